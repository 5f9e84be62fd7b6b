package sshproxy

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/crypto/ssh"
)

// HostKeyAlias is the name the ssh client checks the proxy's host key
// under, whichever sandbox it connects to: every sandbox is reached through
// the same local proxy, which has one key per user.
const HostKeyAlias = "agentsandbox"

// Key and known-hosts file names in the proxy's directory.
const (
	hostKeyFile    = "ssh_host_ed25519_key"
	knownHostsFile = "known_hosts"
)

// DefaultDir is where the host key and its known_hosts file live: the
// user's configuration directory (for example ~/.config/agentsandbox/ssh).
func DefaultDir() (string, error) {
	config, err := os.UserConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(config, "agentsandbox", "ssh"), nil
}

// KnownHostsPath is the known_hosts file in dir that HostKey keeps.
func KnownHostsPath(dir string) string { return filepath.Join(dir, knownHostsFile) }

// HostKey loads the user's host key from dir, making it the first time,
// and keeps dir's known_hosts file naming it under HostKeyAlias, so that
// the ssh client can check the proxy strictly from the first connection.
// Two proxies starting at once agree on one key: the key file is created
// only if absent, by linking a complete file into place.
func HostKey(dir string) (ssh.Signer, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	keyPath := filepath.Join(dir, hostKeyFile)
	pemBytes, err := os.ReadFile(keyPath)
	if errors.Is(err, fs.ErrNotExist) {
		pemBytes, err = createKey(dir, keyPath)
	}
	if err != nil {
		return nil, err
	}
	signer, err := ssh.ParsePrivateKey(pemBytes)
	if err != nil {
		return nil, fmt.Errorf("host key %s: %w (remove it to make a new one)", keyPath, err)
	}
	line := []byte(HostKeyAlias + " " + string(ssh.MarshalAuthorizedKey(signer.PublicKey())))
	known := KnownHostsPath(dir)
	if current, err := os.ReadFile(known); err == nil && bytes.Equal(current, line) {
		return signer, nil
	}
	if err := writeAtomically(dir, known, line, 0o600); err != nil {
		return nil, err
	}
	return signer, nil
}

// createKey makes a new ed25519 key at keyPath unless another process
// made one first, and returns the key that is there.
func createKey(dir, keyPath string) ([]byte, error) {
	_, private, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(private, "agentsandbox ssh-proxy host key")
	if err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(dir, ".host-key-*")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(pem.EncodeToMemory(block)); err != nil {
		_ = tmp.Close()
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	if err := os.Link(tmp.Name(), keyPath); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	return os.ReadFile(keyPath)
}

// writeAtomically replaces path with data through a rename, so a reader
// never sees half a file.
func writeAtomically(dir, path string, data []byte, mode fs.FileMode) error {
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
