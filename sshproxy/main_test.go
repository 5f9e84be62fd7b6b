package sshproxy_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testterm"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/reconciletest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
	"github.com/agentsandbox/terraform-provider-agentsandbox/sshproxy"
)

// The tests that need a cluster run the controllers in-process and serve
// SSH for a sandbox as developers with the agentsandbox-user role, in this
// process, to golang.org/x/crypto/ssh's client (and pkg/sftp's) or to
// OpenSSH's programs. On the local cluster kwok runs a sandbox's commands
// as host processes (hack/cluster/kwok.yaml), so a template's workspace is
// a host directory of the test's.
func TestMain(m *testing.M) {
	reconciletest.MainLeakChecked(m, func(mgr ctrl.Manager) error { return reconcile.SetupControllers(mgr, reconcile.Options{}) })
}

// proxy is ssh-proxy for one sandbox as one developer, served in this
// process on a loopback port: each connection as ssh-proxy serves the one
// on its standard input and output.
type proxy struct {
	port    int
	hostKey ssh.PublicKey
	keyDir  string
	// stderr is what ssh-proxy prints, which ssh shows its user: why a
	// forwarded connection ended, why it refused to serve.
	stderr *testterm.Screen
}

// serve serves the sandbox as dev until the test ends.
func serve(t *testing.T, dev testcluster.Developer, sandbox string) *proxy {
	t.Helper()
	sdk, err := sandboxclient.New(dev.Config)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{keyDir: t.TempDir(), stderr: &testterm.Screen{}}
	key, err := sshproxy.HostKey(p.keyDir)
	if err != nil {
		t.Fatal(err)
	}
	p.hostKey = key.PublicKey()
	server := &sshproxy.Server{Client: sdk, Sandbox: sandbox, HostKey: key, Version: "test", Log: p.stderr}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.port = l.Addr().(*net.TCPAddr).Port
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return // closed when the test ends
			}
			wg.Go(func() {
				// As ssh-proxy exits when it is done: the client sees the
				// connection end, and ssh shows the error it printed.
				defer conn.Close()
				if err := server.Serve(context.Background(), conn); err != nil {
					fmt.Fprintf(p.stderr, "Error: %v\n", err)
				}
			})
		}
	})
	t.Cleanup(func() {
		_ = l.Close()
		wg.Wait()
	})
	return p
}

// dial connects an SSH client that checks the proxy's host key.
func (p *proxy) dial() (*ssh.Client, error) {
	return ssh.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", p.port), &ssh.ClientConfig{
		User: "developer", HostKeyCallback: ssh.FixedHostKey(p.hostKey),
	})
}

// connect is dial for a connection that has to succeed, closed when the
// test ends.
func (p *proxy) connect(t *testing.T) *ssh.Client {
	t.Helper()
	c, err := p.dial()
	if err != nil {
		t.Fatalf("connecting to ssh-proxy: %v; it said %q", err, p.stderr)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// openSSH is the options of OpenSSH's programs to reach the proxy: its
// port, and its host key checked strictly against the known_hosts file
// HostKey writes, as the ssh-config block has them check it.
func (p *proxy) openSSH() []string {
	return []string{"-F", "/dev/null", "-o", "BatchMode=yes", "-o", fmt.Sprintf("Port=%d", p.port),
		"-o", "HostKeyAlias=" + sshproxy.HostKeyAlias, "-o", "UserKnownHostsFile=" + sshproxy.KnownHostsPath(p.keyDir),
		"-o", "StrictHostKeyChecking=yes"}
}
