package isolationcheck

import (
	"bytes"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/isolationcheck/probe"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
)

// checkOf is a check of a template with egress rules, for the judging
// alone.
func checkOf(egress ...v1.EgressRule) *check {
	return &check{template: &v1.SandboxTemplate{Spec: v1.SandboxTemplateSpec{Network: v1.Network{Egress: egress}}}}
}

func TestAnAllowedDestinationIsANoteAndADeniedOneThatAnswersEscaped(t *testing.T) {
	c := checkOf(v1.EgressRule{CIDR: "0.0.0.0/0", Ports: []v1.NetworkPort{{Port: 443}}}, v1.EgressRule{CIDR: "10.244.0.1/32", Ports: []v1.NetworkPort{{Port: 9100}}})
	cases := []struct {
		reach probe.Reach
		want  Result
	}{
		{probe.Reach{Address: "93.184.216.34:443", Result: probe.Open}, Note},       // the template allows it
		{probe.Reach{Address: "10.0.0.1:443", Result: probe.Open}, Escaped},         // excepted from the broad rule
		{probe.Reach{Address: "10.0.0.1:443", Result: probe.Timeout}, Held},         // and denied
		{probe.Reach{Address: "169.254.169.254:80", Result: probe.Refused}, Held},   // a REJECT
		{probe.Reach{Address: "10.244.0.1:10250", Result: probe.Open}, Escaped},     // named, another port
		{probe.Reach{Address: "10.244.0.1:9100", Result: probe.Timeout}, Note},      // named with its port
		{probe.Reach{Address: "[fe80::1%eth0]:47123", Result: probe.Open}, Escaped}, // IPv6 link-local
	}
	for _, tc := range cases {
		if got := c.reachRow(tc.reach.Address, tc.reach); got.Result != tc.want {
			t.Errorf("%s %s: %s, want %s", tc.reach.Address, tc.reach.Result, got.Result, tc.want)
		}
	}
	if row := c.reachRow("v6", probe.Reach{Address: "[fe80::1%eth0]:47123", Result: probe.Open}); row.Fix != ipv6Fix {
		t.Errorf("an IPv6 escape says to fix %q", row.Fix)
	}
	ports := c.portsRow("node", []probe.Reach{{Address: "10.244.0.1:9100", Result: probe.Open}, {Address: "10.244.0.1:22", Result: probe.Refused}})
	if ports.Result != Held {
		t.Errorf("a node port the template names answered, another refused: %+v, want held", ports)
	}
	scan := c.scanRow(probe.ScanResult{Host: "10.244.0.1", Tried: 2768, Open: []int{30080}})
	if scan.Result != Escaped || !strings.Contains(scan.Observed, "30080") {
		t.Errorf("an open NodePort: %+v, want escaped, naming it", scan)
	}
}

func TestTheGateRowSaysWhyThereIsNoGate(t *testing.T) {
	passed := &corev1.Pod{Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{{
		Name: environment.GateName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}},
	}}}}
	if row := checkOf().gateRow(passed); row.Result != Held {
		t.Errorf("a gate that passed: %+v", row)
	}
	if row := checkOf().gateRow(&corev1.Pod{}); row.Result != Escaped || !strings.Contains(row.Fix, "--egress-gate-image") {
		t.Errorf("no gate on a template the gate can prove: %+v, want escaped and the reconciler's flag", row)
	}
	allows := checkOf(v1.EgressRule{CIDR: "203.0.113.0/24", Ports: []v1.NetworkPort{{Port: 10250}}})
	if row := allows.gateRow(&corev1.Pod{}); row.Result != Escaped || !strings.Contains(row.Fix, "10250") {
		t.Errorf("no gate on a template that allows TCP 10250: %+v, want escaped and the template's rule", row)
	}
}

func TestThePrintedReportGroupsTheFixes(t *testing.T) {
	r := &Report{Template: "python", Runtime: "runtime handler runsc", Sandboxes: []string{"a", "b"}, Rows: []Row{
		{Probe: "the node's kubelet", Expected: "blocked", Observed: "open", Result: Escaped, Fix: denyFix},
		{Probe: "cloud metadata", Expected: "blocked", Observed: "open", Result: Escaped, Fix: denyFix},
		{Probe: "capabilities", Expected: "none", Observed: "none", Result: Held},
		{Probe: "kernel", Expected: "any", Observed: "the node's", Result: Note},
		{Probe: "process limit", Expected: "refused", Observed: "exit 1", Result: NotRun, Fix: "see the error"},
	}}
	var out bytes.Buffer
	if err := r.Print(&out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		"PROBE", "the node's kubelet", "ESCAPED", "NOT RUN",
		"- the node's kubelet; cloud metadata: " + denyFix,
		"- process limit: see the error",
		"1 of 5 probes held, 2 escaped, 1 could not run, 1 notes",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the report lacks %q:\n%s", want, text)
		}
	}
	if r.Failed() != 3 {
		t.Errorf("Failed() = %d, want 3", r.Failed())
	}
}

// TestAResolverThatAnswersIsAnEscapeOnlyWhereNoDNSIsAllowed: without
// cluster DNS any answer is an escape, silence held; with it an answer is
// a note that says why to leave it off, as is one from a resolver a cidr
// rule allows.
func TestAResolverThatAnswersIsAnEscapeOnlyWhereNoDNSIsAllowed(t *testing.T) {
	answered := probe.DNSResult{Name: "agentsandbox-check-1.invalid.", Answers: []probe.DNSAnswer{
		{Server: "10.96.0.10:53", Result: probe.Answered, Rcode: "NXDOMAIN"},
		{Server: "169.254.20.10:53", Result: probe.Timeout},
	}}
	silent := probe.DNSResult{Answers: []probe.DNSAnswer{{Server: "10.96.0.10:53", Result: probe.Timeout}}}
	withDNS := checkOf()
	withDNS.template.Spec.Network.ClusterDNS = ptr.To(true)
	cases := []struct {
		name   string
		c      *check
		result probe.DNSResult
		want   Result
		says   string
	}{
		{"no DNS, an answer", checkOf(), answered, Escaped, "10.96.0.10:53 answered NXDOMAIN for agentsandbox-check-1.invalid."},
		{"no DNS, silence", checkOf(), silent, Held, "10.96.0.10:53 timeout"},
		{"no DNS, no resolver", checkOf(), probe.DNSResult{}, Held, "no resolver configured"},
		{"no DNS, resolv.conf unreadable", checkOf(), probe.DNSResult{Problems: []string{"open /etc/resolv.conf: permission denied"}}, Held, "no resolver configured; open /etc/resolv.conf: permission denied"},
		{"cluster DNS, an answer", withDNS, answered, Note, "answered NXDOMAIN"},
		{"cluster DNS, silence", withDNS, silent, Note, "none answered"},
		{"a cidr rule of the resolver", checkOf(v1.EgressRule{CIDR: "10.96.0.10/32"}), answered, Note, "answered NXDOMAIN"},
	}
	for _, tc := range cases {
		row := tc.c.judgeDNS(tc.result)
		if row.Result != tc.want || !strings.Contains(row.Observed, tc.says) {
			t.Errorf("%s: %+v, want %s saying %q", tc.name, row, tc.want, tc.says)
		}
	}
	if row := checkOf().judgeDNS(answered); row.Fix != dnsDenyFix {
		t.Errorf("an escape says to fix %q", row.Fix)
	}
	if row := withDNS.judgeDNS(answered); row.Fix != dnsChannelFix {
		t.Errorf("an answer the template allows says %q", row.Fix)
	}
}

// TestAnICMPReplyIsAnEscapeUnlessACidrRuleOfEveryPortAllowsIt: no socket
// or no reply held; a reply a note only from where a cidr rule of every
// port (the only kind a NetworkPolicy lets ICMP through) allows.
func TestAnICMPReplyIsAnEscapeUnlessACidrRuleOfEveryPortAllowsIt(t *testing.T) {
	replied := probe.ICMPResult{Echoes: []probe.ICMPEcho{
		{Address: "10.0.0.7", Result: probe.Replied},
		{Address: "10.244.0.9", Result: probe.Timeout},
	}}
	cases := []struct {
		name   string
		c      *check
		result probe.ICMPResult
		want   Result
		says   string
	}{
		{"no socket", checkOf(), probe.ICMPResult{Socket: "EACCES"}, Held, "ping_group_range (EACCES)"},
		{"no socket, another errno", checkOf(), probe.ICMPResult{Socket: "EPERM"}, Held, "no ICMP socket (EPERM)"},
		{"no reply", checkOf(), probe.ICMPResult{Echoes: []probe.ICMPEcho{{Address: "10.0.0.7", Result: probe.Timeout}}}, Held, "10.0.0.7 timeout"},
		{"a reply", checkOf(), replied, Escaped, "replies from 10.0.0.7"},
		{"a reply, a cidr rule of one port", checkOf(v1.EgressRule{CIDR: "10.0.0.7/32", Ports: []v1.NetworkPort{{Port: 443}}}), replied, Escaped, "replies from 10.0.0.7"},
		{"a reply, a cidr rule of every port", checkOf(v1.EgressRule{CIDR: "10.0.0.7/32"}), replied, Note, "replies from 10.0.0.7"},
		{"a reply, a broad rule that excepts the private ranges", checkOf(v1.EgressRule{CIDR: "0.0.0.0/0"}), replied, Escaped, "replies from 10.0.0.7"},
	}
	for _, tc := range cases {
		row := tc.c.judgeICMP(tc.result)
		if row.Result != tc.want || !strings.Contains(row.Observed, tc.says) {
			t.Errorf("%s: %+v, want %s saying %q", tc.name, row, tc.want, tc.says)
		}
	}
	if row := checkOf().judgeICMP(replied); row.Fix != icmpFix {
		t.Errorf("an escape says to fix %q", row.Fix)
	}
}

func TestResolversAreIPAddresses(t *testing.T) {
	got, err := resolverAddresses([]string{"169.254.20.10", "10.0.0.1:5353", "fd00::a", "[fd00::a]:5353"})
	if err != nil || strings.Join(got, " ") != "169.254.20.10:53 10.0.0.1:5353 [fd00::a]:53 [fd00::a]:5353" {
		t.Errorf("resolverAddresses = %v, %v", got, err)
	}
	if _, err := resolverAddresses([]string{"kube-dns.kube-system"}); err == nil || !strings.Contains(err.Error(), `"kube-dns.kube-system"`) {
		t.Errorf("a name: %v, want an error naming it", err)
	}
}
