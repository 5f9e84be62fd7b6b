package realnode_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/realnode"
)

// factsProgram prints what a process can see of itself and its machine.
const factsProgram = `
import json, os, socket, subprocess, sys
def read(path):
    try:
        with open(path) as f: return f.read()
    except Exception as e: return "error: " + type(e).__name__
def writable(path):
    try:
        with open(path, "w") as f: f.write("x")
        os.remove(path)
        return True
    except OSError: return False
pids = [p for p in os.listdir("/proc") if p.isdigit()]
cmdlines = [read("/proc/%s/cmdline" % p).replace("\0", " ").strip() for p in pids]
try: dmesg = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=10).stdout
except Exception as e: dmesg = "error: " + type(e).__name__
def echo(host):
    try: s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
    except OSError as e: return "no socket: " + str(e)
    s.settimeout(2)
    try:
        s.sendto(b"\x08\x00\x00\x00\x00\x00\x00\x01data", (host, 0))
        s.recvfrom(1500)
        return "reply"
    except OSError as e: return "no reply: " + str(e)
print(json.dumps({
    "hostname": socket.gethostname(), "uid": os.getuid(), "gid": os.getgid(),
    "pid1": read("/proc/1/cmdline").replace("\0", " ").strip(), "processes": cmdlines,
    "hostFileVisible": os.path.exists(sys.argv[1]),
    "workspaceWritable": writable("/workspace/probe"),
    "kernel": read("/proc/version"), "dmesg": dmesg, "icmpEcho": echo(sys.argv[2]),
}))
`

type facts struct {
	Hostname          string   `json:"hostname"`
	UID               int      `json:"uid"`
	GID               int      `json:"gid"`
	PID1              string   `json:"pid1"`
	Processes         []string `json:"processes"`
	HostFileVisible   bool     `json:"hostFileVisible"`
	WorkspaceWritable bool     `json:"workspaceWritable"`
	Kernel            string   `json:"kernel"`
	Dmesg             string   `json:"dmesg"`
	// ICMPEcho is what an echo request to the node got: no socket, no
	// reply, or a reply.
	ICMPEcho string `json:"icmpEcho"`
}

// checkIsolation proves the code runs inside the sandbox, not on this
// host, and sends nothing out over ICMP. What the isolation check judges besides (capabilities,
// no_new_privs, seccomp, the token, the read-only root) the same suite
// asserts through it (checkIsolationCheck).
func (e env) checkIsolation(t *testing.T, sbx started, handler string) {
	marker := filepath.Join(os.TempDir(), "agentsandbox-host-"+sbx.Name)
	if err := os.WriteFile(marker, []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(marker) })
	var got facts
	e.pythonJSON(t, sbx.Name, factsProgram, &got, marker, realnode.NodeIP)
	host, _ := os.Hostname()
	if got.Hostname == host {
		t.Errorf("hostname %q is the host's", got.Hostname)
	}
	if got.UID != 65532 || got.GID != 65532 {
		t.Errorf("runs as uid %d gid %d, want the template's 65532", got.UID, got.GID)
	}
	if !strings.Contains(got.PID1, "http.server") {
		t.Errorf("PID 1 is %q, not the template's command: not a PID namespace of its own", got.PID1)
	}
	for _, p := range got.Processes {
		if strings.Contains(p, "kubelet") || strings.Contains(p, "containerd") || strings.Contains(p, "go test") {
			t.Errorf("a host process is visible: %q", p)
		}
	}
	if got.HostFileVisible {
		t.Errorf("the host's file %s is visible", marker)
	}
	if !got.WorkspaceWritable {
		t.Error("the workspace is not writable")
	}
	switch handler {
	case realnode.RuncHandler:
		if strings.Contains(got.Dmesg+got.Kernel, "gVisor") {
			t.Errorf("a runc sandbox reports gVisor: %s", got.Dmesg)
		}
		// ping_group_range leaves no group an ICMP socket.
		if !strings.HasPrefix(got.ICMPEcho, "no socket") {
			t.Errorf("an ICMP echo to the node: %s, want no socket to send it", got.ICMPEcho)
		}
	case realnode.GVisorHandler:
		// The application talks to gVisor's kernel, not the host's.
		if !strings.Contains(got.Dmesg, "gVisor") {
			t.Errorf("dmesg does not show gVisor's kernel: %q (kernel %q)", got.Dmesg, got.Kernel)
		}
		// gVisor opens the socket whatever the sysctl; the policy drops
		// the echo.
		if !strings.HasPrefix(got.ICMPEcho, "no ") {
			t.Errorf("an ICMP echo to the node: %s, want none answered", got.ICMPEcho)
		}
	}
}

// TestRunc and TestGVisor run the same suite on each runtime, one after
// the other: the node belongs to one pool at a time.
func TestRunc(t *testing.T)   { runtimeSuite(t, realnode.RuncHandler) }
func TestGVisor(t *testing.T) { runtimeSuite(t, realnode.GVisorHandler) }

func runtimeSuite(t *testing.T, handler string) {
	e := requireNode(t)
	to := e.sharedTargets(t)
	// Made before the sandboxes, so that it would receive their mounts
	// were they propagated (see checkNothingLeft).
	peer := otherMountNamespace(t, "unchanged")
	pool := e.nodePool(t, handler)
	// Four sandboxes at once: target is reached by the others; isolated
	// has no egress at all, and the smallest workspace; allow names exactly what it may reach; broad
	// allows the whole internet on the test ports, which the default
	// exceptions keep away from pods, the node and the metadata address.
	target := e.template(t, pool, nil)
	isolated := e.template(t, pool, func(s *v1.SandboxTemplateSpec) {
		s.Workspace.Size = ptr.To(resource.MustParse(realnode.SmallVolume))
	})
	first := e.sandboxes(t, target)
	targetIP := first[0].pod.Status.PodIP
	allow := e.template(t, pool, func(s *v1.SandboxTemplateSpec) {
		s.Network.Egress = []v1.EgressRule{
			tcp(hostOf(to.server)+"/32", 8080),
			tcp(MetadataIP+"/32", 80),
			tcp(realnode.NodeIP+"/32", 10250),
			tcp(targetIP+"/32", 8080),
		}
	})
	broad := e.template(t, pool, func(s *v1.SandboxTemplateSpec) {
		s.Network.Egress = []v1.EgressRule{tcp("0.0.0.0/0", 80, 8080, 8081, 10250)}
	})
	rest := e.sandboxes(t, isolated, allow, broad)
	sbxTarget, sbxIsolated, sbxAllow, sbxBroad := first[0], rest[0], rest[1], rest[2]

	t.Run("code runs isolated", func(t *testing.T) { e.checkIsolation(t, sbxIsolated, handler) })
	t.Run("the workspace is full at its size", func(t *testing.T) { e.checkWorkspaceFull(t, sbxIsolated) })
	t.Run("no IPv6", func(t *testing.T) { e.checkNoIPv6(t, sbxBroad) })
	t.Run("a missing program exits 127", func(t *testing.T) { e.checkMissingProgram(t, sbxTarget) })
	t.Run("a terminal gets the last output", func(t *testing.T) { e.checkTerminal(t, sbxTarget) })
	t.Run("sessions through the agent", func(t *testing.T) { e.checkSessions(t, sbxTarget, handler) })
	t.Run("no code runs before the egress policy", func(t *testing.T) { e.checkStartWindow(t, pool, to) })
	// The check's fork bomb is the suite's: refused under runc, the end of
	// the sandbox's kernel under gVisor, its neighbour working on.
	t.Run("the isolation check finds every probe held", func(t *testing.T) { e.checkIsolationCheck(t, pool, to, handler) })

	t.Run("egress", func(t *testing.T) {
		server8080, server8081 := hostOf(to.server)+":8080", hostOf(to.server)+":8081"
		kubelet, reachIn := realnode.NodeIP+":10250", targetIP+":8080"
		// The listeners are up: the target reaches itself.
		e.expectReach(t, sbxTarget, map[string]string{reachIn: open})
		e.expectReach(t, sbxIsolated, map[string]string{
			server8080: blocked, server8081: blocked, to.metadata: blocked, kubelet: blocked, reachIn: blocked,
			to.nodePort: blocked, to.serviceRange: blocked,
		})
		e.expectReach(t, sbxAllow, map[string]string{
			server8080: open, to.metadata: open, kubelet: open,
			server8081: blocked, // the same server, a port the rule does not name
			reachIn:    blocked, // named in egress, refused by the target's ingress
		})
		e.expectReach(t, sbxBroad, map[string]string{
			server8080: blocked, server8081: blocked, to.metadata: blocked, kubelet: blocked, reachIn: blocked,
		})
	})

	t.Run("the kubelet refuses anonymous requests", func(t *testing.T) {
		got := e.python(t, sbxAllow.Name, kubeletProgram, "https://"+realnode.NodeIP+":10250/pods")
		if strings.TrimSpace(got) != "401" {
			t.Errorf("GET /pods on the kubelet from a sandbox answered %s, want 401", got)
		}
	})

	t.Run("delete leaves nothing behind", func(t *testing.T) {
		e.checkNothingLeft(t, sbxBroad, peer)
	})

	if handler == realnode.RuncHandler {
		t.Run("workspace survives stop and start", func(t *testing.T) { e.checkStopStart(t, sbxTarget) })
		t.Run("port-forward", func(t *testing.T) { e.checkPortForward(t, sbxAllow) })
		t.Run("memory limit", func(t *testing.T) { e.checkMemoryLimit(t, pool) })
		t.Run("ephemeral-storage limit", func(t *testing.T) { e.checkEphemeralStorageLimit(t, pool, sbxTarget) })
	} else {
		t.Run("warm claim and run", func(t *testing.T) { e.checkWarmClaim(t, target) })
	}
	// Last: it ends by replacing the egress gateway's pods, and the check
	// of the kubelet's answer, run right after it, once timed out
	// connecting under gVisor on a loaded run (the enforcer resyncs on
	// every pod change; the cause is not proven). Nothing runs after it.
	t.Run("egress by name", func(t *testing.T) { e.checkEgressByName(t, pool, to) })
}

func tcp(cidr string, ports ...int32) v1.EgressRule {
	rule := v1.EgressRule{CIDR: cidr}
	for _, p := range ports {
		rule.Ports = append(rule.Ports, v1.NetworkPort{Port: p})
	}
	return rule
}

func hostOf(hostPort string) string {
	host, _, _ := strings.Cut(hostPort, ":")
	return host
}

const (
	open    = "open"
	blocked = "blocked"
)

// reachProgram tries a TCP connection to each host:port argument. A
// connection NetworkPolicy rejects is refused or times out; every target
// has a listener, as the open cases show.
const reachProgram = `
import json, socket, sys
out = {}
for target in sys.argv[1:]:
    host, port = target.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
        out[target] = "open"
    except OSError as e:
        out[target] = "blocked: " + (type(e).__name__ if not str(e) else str(e))
print(json.dumps(out))
`

func (e env) expectReach(t *testing.T, from started, want map[string]string) {
	t.Helper()
	args := make([]string, 0, len(want))
	for target := range want {
		args = append(args, target)
	}
	got := map[string]string{}
	e.pythonJSON(t, from.Name, reachProgram, &got, args...)
	for target, w := range want {
		if g := got[target]; (w == open) != (g == open) {
			t.Errorf("from %s: %s is %s, want %s", from.Name, target, g, w)
		}
	}
}

const kubeletProgram = `
import ssl, sys, urllib.request, urllib.error
try:
    urllib.request.urlopen(sys.argv[1], context=ssl._create_unverified_context(), timeout=5)
    print(200)
except urllib.error.HTTPError as e:
    print(e.code)
`
