package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/spf13/cobra"

	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/source"
)

const gitCredentialsHelp = `
Credentials for --git, each from a file named by a flag or, without the flag,
from an environment variable (never a secret as a flag's value, which would
show in the shell history and the process list); none means a public
repository:
  HTTP(S)  --git-token-file FILE       or AGENTSANDBOX_GIT_TOKEN (user name optional)
           --git-password-file FILE    or AGENTSANDBOX_GIT_PASSWORD, with
           --git-username NAME         or AGENTSANDBOX_GIT_USERNAME
  SSH      --git-identity-file FILE    or AGENTSANDBOX_GIT_IDENTITY (unencrypted private key), and
           --git-known-hosts-file FILE or AGENTSANDBOX_GIT_KNOWN_HOSTS (default ~/.ssh/known_hosts)
These are the keys of a GitSync's credentials Secret, and are used the same way.
`

// gitCredential is one credential of diff and sync --git: the Secret key
// it stands for, its flag and its environment variable.
type gitCredential struct {
	key, flag, env string
	// file is true when the flag names a file holding the value, false
	// for the user name, which is no secret and given as is.
	file bool
}

var gitCredentialList = []gitCredential{
	{source.KeyUsername, "git-username", "AGENTSANDBOX_GIT_USERNAME", false},
	{source.KeyPassword, "git-password-file", "AGENTSANDBOX_GIT_PASSWORD", true},
	{source.KeyToken, "git-token-file", "AGENTSANDBOX_GIT_TOKEN", true},
	{source.KeyIdentity, "git-identity-file", "AGENTSANDBOX_GIT_IDENTITY", true},
	{source.KeyKnownHosts, "git-known-hosts-file", "AGENTSANDBOX_GIT_KNOWN_HOSTS", true},
}

// gitCredentials holds the flag values, by Secret key.
type gitCredentials struct {
	flags map[string]*string
}

func (g *gitCredentials) addFlags(cmd *cobra.Command) {
	g.flags = map[string]*string{}
	for _, c := range gitCredentialList {
		usage := fmt.Sprintf("with --git: file holding the %s (default $%s)", c.key, c.env)
		if !c.file {
			usage = fmt.Sprintf("with --git: the %s (default $%s)", c.key, c.env)
		}
		g.flags[c.key] = cmd.Flags().String(c.flag, "", usage)
	}
}

// given reports whether any credential flag is set.
func (g gitCredentials) given() bool {
	for _, v := range g.flags {
		if *v != "" {
			return true
		}
	}
	return false
}

// auth returns the auth method for repoURL built from the flags and the
// environment, nil when neither gives any credential.
func (g gitCredentials) auth(repoURL string) (transport.AuthMethod, error) {
	data := map[string][]byte{}
	for _, c := range gitCredentialList {
		v, err := g.value(c)
		if err != nil {
			return nil, err
		}
		if len(v) > 0 {
			data[c.key] = v
		}
	}
	if len(data) == 0 {
		return nil, nil
	}
	if source.IsSSH(repoURL) && len(data[source.KeyKnownHosts]) == 0 {
		if home, err := os.UserHomeDir(); err == nil {
			if kh, err := os.ReadFile(filepath.Join(home, ".ssh", "known_hosts")); err == nil {
				data[source.KeyKnownHosts] = kh
			}
		}
	}
	return source.AuthFrom(repoURL, source.Credentials{Data: data, Origin: "Git credentials", Name: credentialName})
}

// value reads one credential: the flag's file (or value), else the
// environment variable. Secrets in files usually end in a newline, which
// is no part of a user name, password or token.
func (g gitCredentials) value(c gitCredential) ([]byte, error) {
	v := []byte(os.Getenv(c.env))
	if f := *g.flags[c.key]; f != "" {
		v = []byte(f)
		if c.file {
			var err error
			if v, err = os.ReadFile(f); err != nil {
				return nil, fmt.Errorf("--%s: %w", c.flag, err)
			}
		}
	}
	if c.key == source.KeyUsername || c.key == source.KeyPassword || c.key == source.KeyToken {
		v = []byte(strings.TrimSpace(string(v)))
	}
	return v, nil
}

// credentialName is how errors name a credential: its flag and variable.
func credentialName(key string) string {
	for _, c := range gitCredentialList {
		if c.key == key {
			return fmt.Sprintf("--%s (or $%s)", c.flag, c.env)
		}
	}
	return key
}
