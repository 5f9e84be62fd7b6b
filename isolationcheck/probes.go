package isolationcheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"

	"github.com/agentsandbox/terraform-provider-agentsandbox/isolationcheck/probe"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// kubeletPort always listens on a node.
const kubeletPort = 10250

// nodePorts are other ports nodes commonly listen on: SSH, etcd, the API
// server, node-exporter, kube-proxy's metrics and health, the kubelet's
// read-only port.
var nodePorts = []int{22, 2379, 6443, 9100, 10249, 10255, 10256}

// The NodePort range, Kubernetes' default.
const nodePortFirst, nodePortLast = 30000, 32767

// metadataAddress is where clouds serve instance credentials.
const metadataAddress = "169.254.169.254:80"

// windowLength is how long the start-up probe tries the kubelet.
const windowLength = 3 * time.Second

// probe runs every probe and returns the rows, in the report's order.
func (c *check) probe(ctx context.Context) ([]Row, error) {
	c.opts.Progress("probing from inside sandboxes " + c.a.name + " and " + c.b.name)
	for _, s := range []*sandbox{c.a, c.b} {
		if err := c.runJSON(ctx, s, &s.facts, "facts", "--workspace", s.workspace); err != nil {
			return nil, err
		}
	}
	pod, err := c.sdk.Pod(ctx, c.a.name)
	if err != nil {
		return nil, err
	}
	node := pod.Status.HostIP
	if node == "" {
		node = c.a.facts.Gateway
	}
	rows := c.selfRows(c.a.facts)
	network, err := c.networkRows(ctx, node)
	if err != nil {
		return nil, err
	}
	rows = append(rows, network...)
	rows = append(rows, c.icmpRow(ctx, node), c.dnsRow(ctx))
	// The stop and start last: on a busy node another pod may take the
	// stopped sandbox's room, and nothing after it needs that sandbox. The
	// other sandbox has done its part by then: deleted first, it leaves
	// its room to the restart (on a node as full as the demo's, the room
	// the stop frees alone was taken by a warm pool's new member).
	rows = append(rows, c.workspaceRow(ctx), c.processesRow(ctx), c.neighbourRow(ctx))
	if err := c.sdk.Delete(ctx, c.b.name); err != nil && !sandboxclient.IsNotFound(err) {
		c.opts.Progress(fmt.Sprintf("deleting sandbox %s before the restart: %v", c.b.name, err))
	}
	rows = append(rows, c.startRows(ctx, pod, node)...)
	return rows, nil
}

// selfRows judge what the sandbox's code sees of itself.
func (c *check) selfRows(f probe.Facts) []Row {
	gvisor := c.expectsGVisor()
	rows := []Row{
		judge("runs as a user other than root", "uid ≠ 0", fmt.Sprintf("uid %d, gid %d", f.UID, f.GID), f.UID != 0,
			"set the template's securityContext.runAsUser, or use an image with a non-root user"),
		judge("capabilities", "none", fmt.Sprintf("effective %s, bounding %s", f.CapEff, f.CapBnd),
			zeroCaps(f.CapEff) && zeroCaps(f.CapBnd), "the pod drops every capability: is a mutating webhook adding some back?"),
		judge("no new privileges", "NoNewPrivs 1", "NoNewPrivs "+f.NoNewPrivs, f.NoNewPrivs == "1",
			"allowPrivilegeEscalation is false on the pod: is a webhook changing it?"),
	}
	if gvisor {
		rows = append(rows, Row{Probe: "seccomp", Expected: "gVisor's kernel answers the syscalls", Observed: "Seccomp " + f.Seccomp, Result: Note})
	} else {
		rows = append(rows, judge("seccomp", "filter (RuntimeDefault)", "Seccomp "+f.Seccomp, f.Seccomp == "2",
			"the container runtime does not apply seccomp: build runc with libseccomp"))
	}
	rows = append(rows,
		judge("service account token", "not mounted", mountedOrNot(f.ServiceAccountToken), !f.ServiceAccountToken,
			"automountServiceAccountToken is false on the pod: is a webhook mounting one?"),
		judge("the node's processes", "invisible",
			fmt.Sprintf("%d processes, PID 1 %q%s", f.Processes, truncate(f.PID1, 40), listOf(", node's: ", f.NodeProcesses)),
			len(f.NodeProcesses) == 0, "the pod shares the node's PID namespace: hostPID must stay false"),
	)
	readOnly := c.template.Spec.SecurityContext.ReadOnlyRootFilesystem
	if readOnly {
		rows = append(rows, judge("root file system", "read-only (the template's)", writableOrNot(f.RootWritable), !f.RootWritable,
			"the template says readOnlyRootFilesystem: is a webhook changing the pod?"))
	} else {
		rows = append(rows, Row{Probe: "root file system", Expected: "the template does not make it read-only", Observed: writableOrNot(f.RootWritable) + " to the sandbox's user", Result: Note})
	}
	kernel := "the node's (" + truncate(f.Kernel, 40) + ")"
	isGVisor := strings.Contains(f.KernelLog, "gVisor")
	if isGVisor {
		kernel = "gVisor's"
	}
	if gvisor {
		rows = append(rows, judge("kernel", "gVisor's", kernel, isGVisor,
			"node pool's runtime handler "+c.handler+" is not gVisor on the node: check containerd's runtime configuration"))
	} else {
		rows = append(rows, Row{Probe: "kernel", Expected: "any (" + c.runtime() + ")", Observed: kernel, Result: Note,
			Fix: "run untrusted code on a NodePool with gVisor or Kata: under runc a kernel exploit reaches the node"})
	}
	return rows
}

// expectsGVisor tells whether the template's pool runs gVisor.
func (c *check) expectsGVisor() bool {
	return c.handler == "runsc" || strings.Contains(c.handler, "gvisor")
}

// networkRows try, from a, every destination the policy should deny (and
// the ones it allows, as notes).
func (c *check) networkRows(ctx context.Context, node string) ([]Row, error) {
	listener, err := c.listen(ctx, c.b)
	if err != nil {
		return nil, err
	}
	type target struct{ probe, address string }
	targets := []target{
		{"the node's kubelet", net.JoinHostPort(node, itoa(kubeletPort))},
		{"cloud metadata", metadataAddress},
	}
	if svc := c.a.facts.Service; svc != "" {
		targets = append(targets, target{"the API server through its service", svc})
	}
	for _, ip := range c.b.facts.IPv4 {
		targets = append(targets, target{"another sandbox over IPv4", net.JoinHostPort(ip, itoa(listenPort))})
	}
	for _, ip := range c.b.facts.IPv6 {
		targets = append(targets, target{"another sandbox over IPv6", net.JoinHostPort(ip, itoa(listenPort))})
	}
	for _, address := range c.opts.Unreachable {
		targets = append(targets, target{"--unreachable " + address, address})
	}
	for _, port := range nodePorts {
		targets = append(targets, target{"the node's other ports", net.JoinHostPort(node, itoa(port))})
	}
	addresses := make([]string, len(targets))
	for i, t := range targets {
		addresses[i] = t.address
	}
	var reached []probe.Reach
	if err := c.runJSON(ctx, c.a, &reached, append([]string{"connect", "--timeout=2s"}, addresses...)...); err != nil {
		_, _ = listener.stop()
		return nil, err
	}
	var scan probe.ScanResult
	scanErr := c.runJSON(ctx, c.a, &scan, "scan", "--timeout=500ms", node, itoa(nodePortFirst), itoa(nodePortLast))
	accepted, err := listener.stop()
	if err != nil {
		return nil, err
	}

	var rows []Row
	var others []probe.Reach
	for i, t := range targets {
		if t.probe == "the node's other ports" {
			others = append(others, reached[i])
			continue
		}
		name := t.probe + " (" + t.address + ")"
		if strings.HasSuffix(t.probe, t.address) {
			name = t.probe
		}
		rows = append(rows, c.reachRow(name, reached[i]))
	}
	if len(c.b.facts.IPv6) == 0 {
		rows = append(rows, judge("another sandbox over IPv6", "blocked", "no IPv6 address on it"+ipv6Of(c.a.facts), true, ""))
	}
	rows = append(rows, c.portsRow("the node's other ports ("+node+")", others))
	if scanErr != nil {
		rows = append(rows, Row{Probe: "the node's NodePort range", Expected: "blocked", Observed: scanErr.Error(), Result: NotRun, Fix: "see the error"})
	} else {
		rows = append(rows, c.scanRow(scan))
	}
	if len(accepted) > 0 {
		rows = append(rows, judge("connections the other sandbox accepted", "none", strings.Join(accepted, ", "), false,
			"the sandbox's ingress is open: the NetworkPolicy enforcer does not enforce ingress"))
	}
	return rows, nil
}

// allowed tells whether the template's policy allows address.
func (c *check) allowed(address string) bool {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return false
	}
	return environment.EgressAllows(c.template.Spec.Network, environment.DefaultBlockedEgress, ap)
}

// reachRow judges one connection attempt.
func (c *check) reachRow(name string, r probe.Reach) Row {
	observed := r.Result
	if r.Detail != "" && r.Result != probe.Unreachable {
		observed += ": " + r.Detail
	}
	if c.allowed(r.Address) {
		return Row{Probe: name, Expected: "open (the template allows it)", Observed: observed, Result: Note}
	}
	fix := denyFix
	if ap, err := netip.ParseAddrPort(r.Address); err == nil && ap.Addr().Is6() {
		fix = ipv6Fix
	}
	return judge(name, "blocked", observed, r.Result != probe.Open, fix)
}

// ipv6Fix is what to fix for an IPv6 destination that answered.
const ipv6Fix = "the pods have IPv6 that the NetworkPolicy enforcer does not police: give them no IPv6 " +
	"(the CNI's tuning plugin with net.ipv6.conf.all.disable_ipv6=1) or use an enforcer of both families"

// denyFix is what to fix for a destination the policy denies but that
// answered.
const denyFix = "the NetworkPolicy enforcer let the sandbox through: check that it runs on the node, enforces egress, " +
	"and exempts no node-local address (kube-router exempts its --service-cluster-ip-range and --service-node-port-range)"

// portsRow judges a set of ports tried on the node.
func (c *check) portsRow(name string, reached []probe.Reach) Row {
	var open []string
	for _, r := range reached {
		if r.Result == probe.Open && !c.allowed(r.Address) {
			open = append(open, r.Address)
		}
	}
	observed := fmt.Sprintf("%d ports tried, none answered", len(reached))
	if len(open) > 0 {
		observed = "open: " + strings.Join(open, ", ")
	}
	return judge(name, "blocked", observed, len(open) == 0, denyFix)
}

// scanRow judges the NodePort range.
func (c *check) scanRow(s probe.ScanResult) Row {
	var open []string
	for _, port := range s.Open {
		if !c.allowed(net.JoinHostPort(s.Host, itoa(port))) {
			open = append(open, itoa(port))
		}
	}
	observed := fmt.Sprintf("%d ports tried, none answered", s.Tried)
	if len(open) > 0 {
		observed = "open: " + strings.Join(open, ", ")
	}
	return judge(fmt.Sprintf("the node's NodePort range (%s:%d-%d)", s.Host, nodePortFirst, nodePortLast), "blocked", observed, len(open) == 0, denyFix)
}

// listener is a probe listening in a sandbox until stopped.
type listener struct {
	name  string
	stdin *io.PipeWriter
	out   *markWriter
	ended chan error
}

// listen starts a listener in s and returns once it accepts connections.
func (c *check) listen(ctx context.Context, s *sandbox) (*listener, error) {
	stdin, stdinW := io.Pipe()
	l := &listener{name: s.name, stdin: stdinW, out: newMarkWriter(probe.Listening + "\n"), ended: make(chan error, 1)}
	go func() {
		var stderr strings.Builder
		code, err := c.sdk.Exec(ctx, s.name, sandboxclient.ExecOptions{
			Command: s.command("listen", itoa(listenPort)), Stdin: stdin, Stdout: l.out, Stderr: &stderr, Timeout: 10 * time.Minute,
		})
		if err == nil && code != 0 {
			err = fmt.Errorf("exit %d: %s", code, strings.TrimSpace(stderr.String()))
		}
		l.ended <- err
	}()
	select {
	case <-l.out.seen:
		return l, nil
	case err := <-l.ended:
		return nil, fmt.Errorf("the listener in sandbox %s ended before it listened: %v", s.name, err)
	case <-time.After(time.Minute):
		stdinW.Close()
		return nil, fmt.Errorf("the listener in sandbox %s did not listen within a minute", s.name)
	}
}

// stop ends the listener and returns who connected to it.
func (l *listener) stop() ([]string, error) {
	l.stdin.Close()
	if err := <-l.ended; err != nil {
		return nil, fmt.Errorf("the listener in sandbox %s: %w", l.name, err)
	}
	var got probe.ListenResult
	if err := json.Unmarshal(l.out.after(), &got); err != nil {
		return nil, fmt.Errorf("the listener in sandbox %s printed %q: %w", l.name, l.out.after(), err)
	}
	return got.Accepted, nil
}

// markWriter keeps what is written and says when mark has come.
type markWriter struct {
	mark string
	seen chan struct{}
	mu   sync.Mutex
	buf  []byte
	once sync.Once
}

func newMarkWriter(mark string) *markWriter {
	return &markWriter{mark: mark, seen: make(chan struct{})}
}

func (w *markWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if strings.Contains(string(w.buf), w.mark) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

// after is what came after the mark.
func (w *markWriter) after() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, rest, _ := strings.Cut(string(w.buf), w.mark)
	return []byte(rest)
}

// startRows judge the moment a sandbox starts: whether the gate holds its
// code back until the policy is enforced, and what code run at once after
// a stop and start reaches.
func (c *check) startRows(ctx context.Context, pod *corev1.Pod, node string) []Row {
	kubelet := net.JoinHostPort(node, itoa(kubeletPort))
	if c.allowed(kubelet) {
		return []Row{{Probe: "start-up window", Expected: "the template allows the kubelet's port", Observed: "not tried", Result: Note}}
	}
	rows := []Row{c.gateRow(pod)}
	c.opts.Progress("stopping and starting sandbox " + c.a.name + " to probe its start")
	window, err := c.restartAndTry(ctx, kubelet)
	var full *noRoomError
	if errors.As(err, &full) {
		return append(rows, Row{Probe: "start-up window", Expected: "blocked from the first attempt", Result: Note,
			Observed: "not tried: no node had room to start sandbox " + c.a.name + " again (" + full.why + ")",
			Fix:      "run the check when the node pool has room for one more sandbox"})
	}
	if err != nil {
		return append(rows, Row{Probe: "start-up window", Expected: "blocked from the first attempt", Observed: err.Error(), Result: NotRun,
			Fix: "see the error; the sandbox could not be stopped and started"})
	}
	observed := fmt.Sprintf("%s denied to all %d attempts in %s", kubelet, window.Attempts, windowLength)
	if window.Opens > 0 {
		observed = fmt.Sprintf("%s answered %d of %d attempts, the first %d ms after the probe started", kubelet, window.Opens, window.Attempts, window.FirstOpen)
	}
	return append(rows, judge("start-up window (after stop and start)", "blocked from the first attempt", observed, window.Opens == 0,
		"the policy is enforced only a moment after the sandbox's code starts: run the reconciler with --egress-gate-image"))
}

// gateRow says whether the pod started behind the egress gate.
func (c *check) gateRow(pod *corev1.Pod) Row {
	const name, expected = "egress gate", "held the start until the policy was enforced"
	// Where the template may reach the kubelet's port, the pod's init
	// container only installs the sandbox agent: it proves nothing.
	if !environment.GateProves(c.template.Spec.Network) {
		return judge(name, expected, "no gate: the template's egress may allow TCP 10250", false,
			"narrow the template's egress so that no rule allows TCP port 10250: the gate proves enforcement on the kubelet's port")
	}
	for _, s := range pod.Status.InitContainerStatuses {
		if s.Name != environment.GateName {
			continue
		}
		if t := s.State.Terminated; t != nil && t.ExitCode == 0 {
			return judge(name, expected, "passed", true, "")
		}
		return judge(name, expected, fmt.Sprintf("in state %+v", s.State), false, "see the gate's log")
	}
	return judge(name, expected, "no gate in the pod", false,
		"run the reconciler with --egress-gate-image: without the gate the sandbox's code starts before its policy is enforced")
}

// restartAndTry stops and starts a, and tries address from the moment
// the sandbox is back.
func (c *check) restartAndTry(ctx context.Context, address string) (probe.WindowResult, error) {
	var out probe.WindowResult
	if err := c.sdk.Stop(ctx, c.a.name); err != nil {
		return out, err
	}
	if _, err := c.sdk.WaitStopped(ctx, c.a.name, c.opts.ReadyTimeout, nil); err != nil {
		return out, err
	}
	if err := c.sdk.Start(ctx, c.a.name); err != nil {
		return out, err
	}
	if _, err := c.sdk.WaitReady(ctx, c.a.name, c.opts.ReadyTimeout, nil); err != nil {
		if sbx, getErr := c.sdk.Get(ctx, c.a.name); getErr == nil && conditions.GetReason(sbx, v1.ReadyCondition) == v1.ReasonUnschedulable {
			return out, &noRoomError{why: conditions.GetMessage(sbx, v1.ReadyCondition)}
		}
		return out, err
	}
	if !c.template.Spec.Workspace.Persistent {
		if err := c.copyProbe(ctx, c.a); err != nil {
			return out, err
		}
	}
	return out, c.runJSON(ctx, c.a, &out, "window", address, windowLength.String())
}

// noRoomError is a sandbox stopped for the start-up probe that no node
// has room to start again: the node pool is full, which says nothing of
// isolation.
type noRoomError struct{ why string }

func (e *noRoomError) Error() string { return "no room to start the sandbox again: " + e.why }

// fillSlack is how far past its size a workspace is asked to grow.
const fillSlack = 16 << 20

// workspaceRow asks the workspace for more than its size.
func (c *check) workspaceRow(ctx context.Context) Row {
	ws := c.template.Spec.Workspace
	size := ws.SizeOrDefault()
	request := size.Value() + max(size.Value()/8, fillSlack)
	name := fmt.Sprintf("workspace size (%s)", size.String())
	expected := "full at " + size.String()
	var fill probe.FillResult
	if err := c.runJSON(ctx, c.a, &fill, "fill", c.a.workspace, strconv.FormatInt(request, 10)); err != nil {
		return Row{Probe: name, Expected: expected, Observed: err.Error(), Result: NotRun, Fix: "see the error"}
	}
	observed := fmt.Sprintf("%s of %s refused (%s)", mebibytes(fill.Requested), fill.How, fill.Refused)
	if fill.Refused == "" {
		observed = fmt.Sprintf("%s taken (%s)", mebibytes(fill.Allocated), fill.How)
	}
	if space := c.a.facts.Workspace; space != nil {
		observed += fmt.Sprintf(", on a file system of %s", mebibytes(space.Total))
	}
	held := (fill.Refused == "ENOSPC" || fill.Refused == "EDQUOT") &&
		(c.a.facts.Workspace == nil || c.a.facts.Workspace.Total <= request)
	fix := "give persistent workspaces a storage class whose volumes are their size (one file system per volume, or project quotas)"
	if !ws.Persistent {
		fix = "the workspace is an emptyDir, whose sizeLimit only evicts the pod after the disk filled: make it persistent on such a storage class"
	}
	return judge(name, expected, observed, held, fix)
}

// processesRow forks processes in b until the kernel refuses one or
// MaxProcesses run. Last of the probes: under gVisor the sandbox's kernel
// ends at the pod's limit, and the container restarts.
func (c *check) processesRow(ctx context.Context) Row {
	name := "process limit"
	expected := fmt.Sprintf("a fork refused before %d processes", c.opts.MaxProcesses)
	before := restarts(ctx, c.sdk, c.b.name)
	var got probe.ProcessesResult
	err := c.runJSON(ctx, c.b, &got, "processes", itoa(c.opts.MaxProcesses))
	switch {
	case err == nil && got.Refused != "":
		return judge(name, expected, fmt.Sprintf("refused after %d processes (%s)", got.Started, got.Refused), true, "")
	case err == nil:
		return judge(name, expected, fmt.Sprintf("%d processes started, none refused", got.Started), false,
			"set a per-pod process limit on the nodes: the kubelet's podPidsLimit (hack/node.sh uses 1024)")
	}
	// gVisor's kernel dies at the pod's limit: the kubelet restarts it.
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if after := restarts(ctx, c.sdk, c.b.name); after > before {
			return judge(name, expected, "the sandbox's kernel ended at the pod's limit and restarted", true, "")
		}
		time.Sleep(time.Second)
	}
	return Row{Probe: name, Expected: expected, Observed: err.Error(), Result: NotRun,
		Fix: "the probe ended some other way: give the template more memory, or lower --max-processes"}
}

// neighbourRow: the sandbox beside the fork bomb still runs a command.
func (c *check) neighbourRow(ctx context.Context) Row {
	var none []probe.Reach
	err := c.runJSON(ctx, c.a, &none, "connect")
	observed := "ran a command"
	if err != nil {
		observed = err.Error()
	}
	return judge("the other sandbox, beside the fork bomb", "runs commands", observed, err == nil,
		"the fork bomb in one sandbox stopped another: the node's process limit is not per pod")
}

// restarts is how often the sandbox's container restarted, -1 when its pod
// cannot be read.
func restarts(ctx context.Context, sdk *sandboxclient.Client, name string) int32 {
	pod, err := sdk.Pod(ctx, name)
	if err != nil || len(pod.Status.ContainerStatuses) == 0 {
		return -1
	}
	return pod.Status.ContainerStatuses[0].RestartCount
}

// judge makes a row held when ok, escaped with fix when not.
func judge(probeName, expected, observed string, ok bool, fix string) Row {
	if ok {
		return Row{Probe: probeName, Expected: expected, Observed: observed, Result: Held}
	}
	return Row{Probe: probeName, Expected: expected, Observed: observed, Result: Escaped, Fix: fix}
}

func zeroCaps(hex string) bool { return strings.Trim(hex, "0") == "" && hex != "" }

func mountedOrNot(mounted bool) string {
	if mounted {
		return "mounted"
	}
	return "not mounted"
}

func writableOrNot(writable bool) string {
	if writable {
		return "writable"
	}
	return "read-only"
}

// truncate shortens s to n characters.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

func listOf(prefix string, items []string) string {
	if len(items) == 0 {
		return ""
	}
	return prefix + strings.Join(items, "; ")
}

func ipv6Of(f probe.Facts) string {
	if len(f.IPv6) == 0 {
		return " nor on the attacker's"
	}
	return "; the attacker's: " + strings.Join(f.IPv6, ", ")
}

func mebibytes(n int64) string { return fmt.Sprintf("%d MiB", n>>20) }
