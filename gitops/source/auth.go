package source

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Keys of the credentials Secret.
const (
	KeyUsername   = "username"
	KeyPassword   = "password"
	KeyToken      = "token"
	KeyIdentity   = "identity"
	KeyKnownHosts = "known_hosts"
)

// Auth turns the data of a credentials Secret into the auth method for
// repoURL: basic auth or a token over HTTP(S), a private key checked against
// known_hosts over SSH. secret names the Secret in errors; no error carries
// a credential.
func Auth(repoURL, secret string, data map[string][]byte) (transport.AuthMethod, error) {
	if isSSH(repoURL) {
		return sshAuth(repoURL, secret, data)
	}
	switch {
	case len(data[KeyToken]) > 0:
		// Git hosts accept a token as the password of any user name.
		user := string(data[KeyUsername])
		if user == "" {
			user = "git"
		}
		return &githttp.BasicAuth{Username: user, Password: string(data[KeyToken])}, nil
	case len(data[KeyUsername]) > 0 || len(data[KeyPassword]) > 0:
		return &githttp.BasicAuth{Username: string(data[KeyUsername]), Password: string(data[KeyPassword])}, nil
	default:
		return nil, fmt.Errorf("secret %s has neither %q nor %q/%q for an HTTP(S) repository", secret, KeyToken, KeyUsername, KeyPassword)
	}
}

func sshAuth(repoURL, secret string, data map[string][]byte) (transport.AuthMethod, error) {
	if len(data[KeyIdentity]) == 0 || len(data[KeyKnownHosts]) == 0 {
		return nil, fmt.Errorf("secret %s needs both %q and %q for an SSH repository", secret, KeyIdentity, KeyKnownHosts)
	}
	keys, err := gitssh.NewPublicKeys(sshUser(repoURL), data[KeyIdentity], "")
	if err != nil {
		return nil, fmt.Errorf("secret %s: key %q is not a usable private key: %w", secret, KeyIdentity, err)
	}
	callback, err := hostKeyCallback(data[KeyKnownHosts])
	if err != nil {
		return nil, fmt.Errorf("secret %s: key %q: %w", secret, KeyKnownHosts, err)
	}
	keys.HostKeyCallback = callback
	return keys, nil
}

// hostKeyCallback parses known_hosts. The knownhosts package reads files
// only, so the content goes through a temporary file it reads once.
func hostKeyCallback(knownHosts []byte) (ssh.HostKeyCallback, error) {
	dir, err := os.MkdirTemp("", "known-hosts-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(file, knownHosts, 0o600); err != nil {
		return nil, err
	}
	return knownhosts.New(file)
}

// isSSH is true for ssh:// URLs and scp-like user@host:path addresses.
func isSSH(repoURL string) bool {
	if strings.HasPrefix(repoURL, "ssh://") {
		return true
	}
	return !strings.Contains(repoURL, "://") && strings.Contains(repoURL, "@")
}

// sshUser is the user of an SSH URL, git when it names none.
func sshUser(repoURL string) string {
	if u, err := url.Parse(repoURL); err == nil && u.User != nil && u.User.Username() != "" {
		return u.User.Username()
	}
	if user, _, ok := strings.Cut(repoURL, "@"); ok && !strings.Contains(user, "/") {
		return user
	}
	return "git"
}
