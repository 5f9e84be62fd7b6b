package realnode_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testdns"
	"github.com/agentsandbox/terraform-provider-agentsandbox/realnode"
)

// MetadataIP is where clouds serve instance credentials; the tests put a
// listener there, on this machine, to prove sandboxes cannot reach it.
const MetadataIP = "169.254.169.254"

// targets are the endpoints the egress tests try from inside sandboxes:
// all of them on this machine.
type targets struct {
	// server is a plain pod on the real node (no NetworkPolicy in its
	// namespace) listening on 8080 and 8081.
	server string
	// metadata is a listener on 169.254.169.254:80 in a network namespace
	// of this machine that pods are routed to.
	metadata string
	// nodePort is a listener on the node's address on a port of the
	// Kubernetes NodePort range, and serviceRange one on an address of the
	// node inside the service range: what a NetworkPolicy enforcer that
	// exempts service traffic would let through.
	nodePort, serviceRange string
	// service is a Service of server's pod: port 80 to its 8080, 81 to
	// its 8081.
	service types.NamespacedName
	// resolver is a DNS server on the node's address that answers every
	// name (NXDOMAIN): one a sandbox without cluster DNS must not ask.
	resolver *testdns.Server
}

// ServiceRangeAddress is the address of the cluster's service range
// (10.96.0.0/12) the tests put on the node's bridge for serviceRange.
const ServiceRangeAddress = "10.96.123.45"

var (
	shared     targets
	sharedErr  error
	sharedOnce sync.Once
)

// sharedTargets starts the targets once for the package.
func (e env) sharedTargets(t *testing.T) targets {
	t.Helper()
	sharedOnce.Do(func() {
		clearStaleFixtures()
		if shared.metadata, sharedErr = metadataListener(); sharedErr != nil {
			return
		}
		if shared.nodePort, shared.serviceRange, sharedErr = nodeLocalListeners(); sharedErr != nil {
			return
		}
		if shared.resolver, sharedErr = testdns.Start(realnode.NodeIP + ":0"); sharedErr != nil {
			return
		}
		teardown = append(teardown, func() { _ = shared.resolver.Close() })
		shared.server, shared.service, sharedErr = serverPod(e.cluster)
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

// clearStaleFixtures removes what a run killed before its teardown left on
// the host (the metadata namespace, its veth, route and rule, the address
// on the bridge), which would make this run's setup fail on "File exists".
func clearStaleFixtures() {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if name, _, _ := strings.Cut(line, " "); strings.HasPrefix(name, "asmeta-") {
			// Deleting the namespace deletes its veth end, and so the pair.
			_ = exec.Command("ip", "netns", "del", name).Run()
		}
	}
	for exec.Command("ip", "rule", "del", "lookup", metadataTable).Run() == nil {
	}
	_ = exec.Command("ip", "route", "flush", "table", metadataTable).Run()
	_ = exec.Command("ip", "addr", "del", ServiceRangeAddress+"/32", "dev", realnode.Bridge).Run()
	_ = exec.Command("ip", "addr", "del", UpstreamIP+"/32", "dev", realnode.Bridge).Run()
}

// metadataTable is the routing table that sends the pods' metadata
// requests to the test's listener.
const metadataTable = "4242"

// serverPod runs a pod that is not a sandbox on the real node, serving on
// ports 8080 and 8081, with a Service; returns its IP and the Service.
func serverPod(cluster *testcluster.Cluster) (string, types.NamespacedName, error) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("realnode-server")}}
	if err := cluster.Client.Create(ctx, ns); err != nil {
		return "", types.NamespacedName{}, err
	}
	teardown = append(teardown, func() { _ = cluster.Client.Delete(context.Background(), ns) })
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "server", Namespace: ns.Name, Labels: map[string]string{"app": "server"}},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{corev1.LabelHostname: realnode.NodeName},
			Tolerations:                   []corev1.Toleration{{Key: realnode.TaintKey, Operator: corev1.TolerationOpExists}},
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:  "server",
				Image: realnode.PythonImage,
				Command: []string{"python3", "-c", `
import http.server, threading
servers = [http.server.ThreadingHTTPServer(("0.0.0.0", p), http.server.SimpleHTTPRequestHandler) for p in (8080, 8081)]
threading.Thread(target=servers[1].serve_forever, daemon=True).start()
servers[0].serve_forever()`},
				WorkingDir: "/tmp",
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
	if err := cluster.Client.Create(ctx, pod); err != nil {
		return "", types.NamespacedName{}, err
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "server", Namespace: ns.Name},
		Spec: corev1.ServiceSpec{Selector: pod.Labels, Ports: []corev1.ServicePort{
			{Name: "a", Port: 80, TargetPort: intstr.FromInt32(8080)}, {Name: "b", Port: 81, TargetPort: intstr.FromInt32(8081)},
		}},
	}
	if err := cluster.Client.Create(ctx, svc); err != nil {
		return "", types.NamespacedName{}, err
	}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, waitReady, true, func(ctx context.Context) (bool, error) {
		err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)
		return err == nil && pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "", err
	})
	if err != nil {
		return "", types.NamespacedName{}, fmt.Errorf("server pod %s/%s not running (phase %s): %w", ns.Name, pod.Name, pod.Status.Phase, err)
	}
	return pod.Status.PodIP, client.ObjectKeyFromObject(svc), nil
}

// metadataListener serves HTTP on 169.254.169.254:80 inside a network
// namespace of its own, joined to the host by a veth pair, and routes the
// real node's pods (and only them: the host's own metadata service, if it
// has one, stays reachable) to it. Nothing but NetworkPolicy then stands
// between a sandbox and that address. Returns "169.254.169.254:80".
func metadataListener() (string, error) {
	suffix := fmt.Sprintf("%04x", os.Getpid()&0xffff)
	netns, hostEnd, nsEnd, table := "asmeta-"+suffix, "asm"+suffix+"h", "asm"+suffix+"n", metadataTable
	steps := [][]string{
		{"ip", "netns", "add", netns},
		{"ip", "link", "add", hostEnd, "type", "veth", "peer", "name", nsEnd},
		{"ip", "link", "set", nsEnd, "netns", netns},
		{"ip", "-n", netns, "addr", "add", MetadataIP + "/32", "dev", nsEnd},
		{"ip", "-n", netns, "link", "set", "lo", "up"},
		{"ip", "-n", netns, "link", "set", nsEnd, "up"},
		{"ip", "-n", netns, "route", "add", "default", "dev", nsEnd},
		{"ip", "link", "set", hostEnd, "up"},
		// The host answers ARP for the pods' addresses on its end.
		{"sysctl", "-qw", "net.ipv4.conf." + hostEnd + ".proxy_arp=1"},
		{"ip", "route", "add", MetadataIP + "/32", "dev", hostEnd, "table", table},
		{"ip", "rule", "add", "from", realnode.PodCIDR, "to", MetadataIP + "/32", "lookup", table},
	}
	undo := [][]string{
		{"ip", "rule", "del", "from", realnode.PodCIDR, "to", MetadataIP + "/32", "lookup", table},
		{"ip", "route", "flush", "table", table},
		{"ip", "link", "del", hostEnd},
		{"ip", "netns", "del", netns},
	}
	teardown = append(teardown, func() {
		for _, step := range undo {
			_ = exec.Command(step[0], step[1:]...).Run()
		}
	})
	for _, step := range steps {
		if out, err := exec.Command(step[0], step[1:]...).CombinedOutput(); err != nil {
			return "", fmt.Errorf("%s: %v: %s", strings.Join(step, " "), err, out)
		}
	}
	ln, err := listenIn(netns, MetadataIP+":80")
	if err != nil {
		return "", err
	}
	server := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte("instance credentials\n"))
		}),
		ReadHeaderTimeout: 5 * time.Second,
	}
	go func() { _ = server.Serve(ln) }()
	teardown = append(teardown, func() { _ = server.Close() })
	return ln.Addr().String(), nil
}

// nodeLocalListeners listens on the node's address, port 30080 (of the
// NodePort range), and on ServiceRangeAddress:8080, which it adds to the
// node's bridge until the tests end.
func nodeLocalListeners() (nodePort, serviceRange string, err error) {
	if out, err := exec.Command("ip", "addr", "add", ServiceRangeAddress+"/32", "dev", realnode.Bridge).CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("ip addr add %s/32 dev %s: %v: %s", ServiceRangeAddress, realnode.Bridge, err, out)
	}
	teardown = append(teardown, func() {
		_ = exec.Command("ip", "addr", "del", ServiceRangeAddress+"/32", "dev", realnode.Bridge).Run()
	})
	for _, addr := range []string{realnode.NodeIP + ":30080", ServiceRangeAddress + ":8080"} {
		if _, err := serveTCP(addr, func(conn net.Conn) { _ = conn.Close() }); err != nil {
			return "", "", err
		}
	}
	return realnode.NodeIP + ":30080", ServiceRangeAddress + ":8080", nil
}

// serveTCP listens on addr until the tests end and hands every connection
// to handle, each on a goroutine of its own.
func serveTCP(addr string, handle func(net.Conn)) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	teardown = append(teardown, func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go handle(conn)
		}
	}()
	return ln.Addr(), nil
}

// listenIn opens a TCP listener inside the named network namespace. The
// socket stays in that namespace after the thread returns to its own.
func listenIn(netns, addr string) (net.Listener, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	own, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, err
	}
	defer own.Close()
	target, err := os.Open("/var/run/netns/" + netns)
	if err != nil {
		return nil, err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, fmt.Errorf("enter network namespace %s: %w", netns, err)
	}
	ln, listenErr := net.Listen("tcp", addr)
	if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread is stuck in the other namespace: never reuse it.
		runtime.LockOSThread()
		return nil, fmt.Errorf("return from network namespace %s: %w", netns, err)
	}
	return ln, listenErr
}
