package source

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
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

// Credentials are Git credentials by key (KeyUsername … KeyKnownHosts)
// and how errors name them: the keys of a Secret for the reconciler, the
// flags and environment variables of the CLI.
type Credentials struct {
	Data map[string][]byte
	// Origin says where they come from, e.g. "secret agentsandbox-system/git".
	Origin string
	// Name is how the origin calls a key; nil quotes the key.
	Name func(key string) string
}

func (c Credentials) name(key string) string {
	if c.Name == nil {
		return strconv.Quote(key)
	}
	return c.Name(key)
}

// Auth turns the data of a credentials Secret into the auth method for
// repoURL; secret names the Secret in errors.
func Auth(repoURL, secret string, data map[string][]byte) (transport.AuthMethod, error) {
	return AuthFrom(repoURL, Credentials{Data: data, Origin: "secret " + secret})
}

// AuthFrom returns the auth method for repoURL: basic auth or a token over
// HTTP(S), a private key checked against known_hosts over SSH. No error
// carries a credential.
func AuthFrom(repoURL string, c Credentials) (transport.AuthMethod, error) {
	data := c.Data
	if IsSSH(repoURL) {
		return sshAuth(repoURL, c)
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
		return nil, fmt.Errorf("%s: neither %s nor %s and %s is set, for an HTTP(S) repository",
			c.Origin, c.name(KeyToken), c.name(KeyUsername), c.name(KeyPassword))
	}
}

func sshAuth(repoURL string, c Credentials) (transport.AuthMethod, error) {
	if len(c.Data[KeyIdentity]) == 0 || len(c.Data[KeyKnownHosts]) == 0 {
		return nil, fmt.Errorf("%s: an SSH repository needs both %s and %s", c.Origin, c.name(KeyIdentity), c.name(KeyKnownHosts))
	}
	keys, err := gitssh.NewPublicKeys(sshUser(repoURL), c.Data[KeyIdentity], "")
	if err != nil {
		return nil, fmt.Errorf("%s: %s is not a usable private key: %w", c.Origin, c.name(KeyIdentity), err)
	}
	callback, err := hostKeyCallback(c.Data[KeyKnownHosts])
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", c.Origin, c.name(KeyKnownHosts), err)
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

// IsSSH is true for ssh:// URLs and scp-like user@host:path addresses.
func IsSSH(repoURL string) bool {
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
