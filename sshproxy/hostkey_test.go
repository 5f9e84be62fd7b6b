package sshproxy

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
)

// TestHostKeyIsMadeOnceAndNamedInKnownHosts: the first call makes the key,
// later and concurrent calls agree on it, and known_hosts names it under
// the alias the ssh-config block checks.
func TestHostKeyIsMadeOnceAndNamedInKnownHosts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ssh")
	keys := make([]ssh.Signer, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			key, err := HostKey(dir)
			if err != nil {
				t.Error(err)
			}
			keys[i] = key
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	first := keys[0].PublicKey().Marshal()
	for i, key := range keys {
		if !bytes.Equal(key.PublicKey().Marshal(), first) {
			t.Errorf("call %d got another key", i)
		}
	}
	info, err := os.Stat(filepath.Join(dir, hostKeyFile))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v, mode %v; want 0600", err, info.Mode())
	}
	known, err := os.ReadFile(KnownHostsPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	marker, hosts, _, _, _, err := ssh.ParseKnownHosts(known)
	if err != nil || marker != "" || len(hosts) != 1 || hosts[0] != HostKeyAlias {
		t.Fatalf("known_hosts %q: %v", known, err)
	}
	if !strings.HasPrefix(string(known), HostKeyAlias+" ssh-ed25519 ") {
		t.Errorf("known_hosts %q does not name the key under %s", known, HostKeyAlias)
	}
	again, err := HostKey(dir)
	if err != nil || !bytes.Equal(again.PublicKey().Marshal(), first) {
		t.Errorf("a later call: %v", err)
	}
}

func TestHostKeyRefusesABrokenKeyFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, hostKeyFile), []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := HostKey(dir); err == nil || !strings.Contains(err.Error(), "remove it to make a new one") {
		t.Errorf("a broken key file: %v", err)
	}
}
