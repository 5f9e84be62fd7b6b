package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSSHConfigAndProxy proves that the Host block `agentsandbox
// ssh-config` prints has Debian's OpenSSH client reach a sandbox through
// `agentsandbox ssh-proxy` with the caller's kubeconfig, checking the
// proxy's host key strictly and passing LANG on (sshproxy's tests say what
// the proxy serves): a command's stdin, stdout, stderr and exit status.
func TestSSHConfigAndProxy(t *testing.T) {
	devs, tpl, _ := setup(t, "alice")
	alice := devs[0]
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Fatal("ssh not found: install Debian's openssh-client (make test does)")
	}
	sbx := claim(t, alice, tpl.Name)

	dir := t.TempDir()
	res := cli(t, alice, "", "ssh-config", "--key-dir", filepath.Join(dir, "keys"))
	if res.code != 0 {
		t.Fatalf("ssh-config: %+v", res)
	}
	for _, want := range []string{"Host *.sandbox", "ProxyCommand ", " ssh-proxy ", "StrictHostKeyChecking yes", "HostKeyAlias agentsandbox"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("ssh-config printed no %q:\n%s", want, res.stdout)
		}
	}
	// The printed block and nothing else: -F leaves ~/.ssh/config out.
	config := filepath.Join(dir, "config")
	if err := os.WriteFile(config, []byte(res.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	// In batch mode: no prompt can hang the test.
	ssh := exec.Command("ssh", "-F", config, "-o", "BatchMode=yes", sbx.Name+".sandbox", `head -c 5; echo " $LANG"; echo to-stderr >&2; exit 7`)
	ssh.Env = append(os.Environ(), "KUBECONFIG="+alice.Kubeconfig, "LANG=C.UTF-8")
	// The proxy ssh starts shares its stderr: if ssh is killed, Wait must
	// not wait for the proxy to close it.
	ssh.WaitDelay = 10 * time.Second
	res = run(t, ssh, "hello world")
	if res.code != 7 || res.stdout != "hello C.UTF-8\n" || !strings.Contains(res.stderr, "to-stderr") {
		t.Errorf("ssh %s.sandbox CMD: %+v; want exit 7, stdin read and LANG passed on stdout, stderr apart", sbx.Name, res)
	}
}
