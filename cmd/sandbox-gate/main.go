// Command sandbox-gate is the first process of every sandbox pod (an init
// container), run before any of the sandbox's own: it returns only once
// the pod's egress NetworkPolicy is enforced. Enforcers program a new pod's
// policy a moment after its network comes up (kube-router once it learns
// the pod's IP, 0.3 to 3.5 s on the real node of make test); code that ran
// in that moment, say a module planted in the persistent workspace and
// imported at start, reached everything the policy denies.
//
// It proves enforcement by connecting to an address the policy always
// denies and that always listens: the node's kubelet (the node's address
// is excepted from every broad egress rule). While the connection is
// accepted the policy is not enforced yet; once it is refused or times out,
// it is. After --timeout it fails the start, saying so in the pod's
// termination message, which the Sandbox's status carries.
//
// With --install-agent it first copies the sandbox agent
// (cmd/agentsandbox-agent, beside it in its image) into the volume through
// which the sandbox's container gets it; with only that flag, it does no
// more (a template whose egress may reach the kubelet's port cannot be
// proven enforced this way).
//
// Run as "sandbox-gate probe …", it is the isolation check's probe
// instead (package isolationcheck/probe): the check copies this binary
// into the sandboxes it starts, for it runs in any image.
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/agentsandbox/terraform-provider-agentsandbox/isolationcheck/probe"
)

// terminationLog is where the kubelet reads a container's termination
// message from.
const terminationLog = "/dev/termination-log"

func main() {
	if len(os.Args) > 1 && os.Args[1] == probe.Command {
		os.Exit(probe.Main(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	install := flag.String("install-agent", "", "a directory to copy the sandbox agent (agentsandbox-agent, beside this program) into first")
	host := flag.String("host", "", "the address that must be denied (the node's, from status.hostIP)")
	port := flag.Int("port", 10250, "the port on it that always listens (the kubelet's)")
	timeout := flag.Duration("timeout", 30*time.Second, "how long to wait for the policy to be enforced")
	interval := flag.Duration("interval", 50*time.Millisecond, "how long to wait between attempts")
	flag.Parse()
	if *install != "" {
		if err := installAgent(*install); err != nil {
			fail("AgentNotInstalled: " + err.Error()) // v1.ReasonAgentNotInstalled, without the API package in this small binary
		}
		if *host == "" {
			return
		}
	}
	if *host == "" {
		fail("--host is empty: set it from the pod's status.hostIP")
	}
	target := net.JoinHostPort(*host, strconv.Itoa(*port))
	start := time.Now()
	for attempt := 1; ; attempt++ {
		conn, err := net.DialTimeout("tcp", target, 250*time.Millisecond)
		if err != nil {
			fmt.Printf("egress policy enforced: %s denied after %s (%d attempts)\n", target, time.Since(start).Round(time.Millisecond), attempt)
			return
		}
		_ = conn.Close()
		if time.Since(start) >= *timeout {
			fail(fmt.Sprintf("PolicyNotEnforced: %s, which the sandbox's NetworkPolicy denies, was still reachable after %s: "+
				"the cluster's NetworkPolicy enforcer does not enforce the policy for this pod", target, *timeout))
		}
		time.Sleep(*interval)
	}
}

// installAgent copies the sandbox agent, which the image carries beside
// this program, into dir (a volume the sandbox's container mounts
// read-only), where it is executable by any user.
func installAgent(dir string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	src, err := os.Open(filepath.Join(filepath.Dir(self), agentProgram))
	if err != nil {
		return fmt.Errorf("the image has no %s beside %s: %w", agentProgram, self, err)
	}
	defer func() { _ = src.Close() }()
	dst, err := os.OpenFile(filepath.Join(dir, agentProgram), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		_ = dst.Close()
		return err
	}
	return dst.Close()
}

// agentProgram is the sandbox agent's file name (cmd/agentsandbox-agent).
const agentProgram = "agentsandbox-agent"

// fail says why on stderr and in the termination message, and exits 1.
func fail(why string) {
	fmt.Fprintln(os.Stderr, why)
	_ = os.WriteFile(terminationLog, []byte(why), 0o644)
	os.Exit(1)
}
