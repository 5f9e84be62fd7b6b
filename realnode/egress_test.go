package realnode_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/realnode"
)

// probeProgram runs the probes of its JSON argument from inside a sandbox
// and prints their results as JSON, in order. Kinds:
//
//   - fetch: urllib with the proxy variables, as pip's and most Python
//     clients do, verifying TLS with the test CA (/workspace/ca.pem);
//   - connect: a CONNECT through the proxy by hand (what curl sends), then,
//     when sni is set, TLS with that server name and a GET;
//   - direct: a plain TCP connection, around the gateway;
//   - endpoint: a GET of an endpoint's address (from its variable) plus a
//     path, straight to the gateway;
//   - search: where a secret appears: the environment, every process's
//     environ and cmdline, and every file under / but /proc, /sys and /dev.
const probeProgram = `
import json, os, socket, ssl, sys, urllib.request
ca = "/workspace/ca.pem"
def proxy():
    host, port = os.environ["HTTPS_PROXY"].rsplit("/", 1)[-1].rsplit(":", 1)
    return host, int(port)
def fetch(p):
    try:
        with urllib.request.urlopen(p["url"], context=ssl.create_default_context(cafile=ca), timeout=10) as r:
            return {"status": r.status, "body": r.read().decode()}
    except Exception as e:
        return {"error": str(e)}
def connect(p):
    s = socket.create_connection(proxy(), timeout=10)
    try:
        s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (p["target"], p["target"])).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = s.recv(4096)
            if not chunk: break
            head += chunk
        status = head.split(b"\r\n", 1)[0].decode()
        out = {"status": status}
        if " 200 " not in status + " ":
            s.settimeout(3)
            try:
                while True:
                    chunk = s.recv(4096)
                    if not chunk: break
                    head += chunk
            except OSError: pass
            out["body"] = head.split(b"\r\n\r\n", 1)[-1].decode(errors="replace")
            return out
        if p.get("sni"):
            try:
                t = ssl.create_default_context(cafile=ca)
                t.check_hostname = False
                t.verify_mode = ssl.CERT_NONE
                tls = t.wrap_socket(s, server_hostname=p["sni"])
                tls.sendall(b"GET /sni HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                out["tls"] = tls.recv(100).decode(errors="replace")
            except Exception as e:
                out["tls_error"] = type(e).__name__ + ": " + str(e)
        return out
    finally:
        s.close()
def direct(p):
    host, port = p["target"].rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
        return {"result": "open"}
    except OSError as e:
        return {"result": "blocked: " + str(e)}
def endpoint(p):
    url = os.environ[p["variable"]] + p["path"]
    req = urllib.request.Request(url, headers=p.get("headers", {}))
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return {"status": r.status, "body": r.read().decode(), "headers": dict(r.headers)}
    except urllib.error.HTTPError as e:
        return {"status": e.code, "body": e.read().decode()}
    except Exception as e:
        return {"error": str(e)}
def search(p):
    # The needle comes hex-encoded, so that it is not in this process's
    # own command line.
    needle, found = bytes.fromhex(p["needle_hex"]), []
    if needle.decode() in "".join(k + "=" + v for k, v in os.environ.items()): found.append("environment")
    for pid in [d for d in os.listdir("/proc") if d.isdigit()]:
        for f in ("environ", "cmdline"):
            try:
                with open("/proc/%s/%s" % (pid, f), "rb") as fh:
                    if needle in fh.read(): found.append("/proc/%s/%s" % (pid, f))
            except OSError: pass
    for root, dirs, files in os.walk("/"):
        dirs[:] = [d for d in dirs if os.path.join(root, d) not in ("/proc", "/sys", "/dev")]
        for f in files:
            path = os.path.join(root, f)
            try:
                if os.path.islink(path) or os.path.getsize(path) > (1 << 20): continue
                with open(path, "rb") as fh:
                    if needle in fh.read(): found.append(path)
            except OSError: pass
    return {"found": found}
kinds = {"fetch": fetch, "connect": connect, "direct": direct, "endpoint": endpoint, "search": search}
print(json.dumps([kinds[p["kind"]](p) for p in json.loads(sys.argv[1])]))
`

// probe is one probe of probeProgram.
type probe map[string]any

// probeResult is what probeProgram says of one probe.
type probeResult struct {
	Status   any               `json:"status"`
	Body     string            `json:"body"`
	Headers  map[string]string `json:"headers"`
	Error    string            `json:"error"`
	TLS      string            `json:"tls"`
	TLSError string            `json:"tls_error"`
	Result   string            `json:"result"`
	Found    []string          `json:"found"`
}

func (e env) probe(t *testing.T, sbx started, probes ...probe) []probeResult {
	t.Helper()
	arg, err := json.Marshal(probes)
	if err != nil {
		t.Fatal(err)
	}
	var out []probeResult
	e.pythonJSON(t, sbx.Name, probeProgram, &out, string(arg))
	return out
}

// checkEgressByName runs the egress gateway's suite on the runtime of pool:
// what each of two owners' sandboxes reaches by name, and only through the
// gateway; what the gateway refuses, and how it says so; a Service by its
// rule; an endpoint's key, added upstream and found nowhere in the sandbox,
// and rotated; and the gateway's replicas replaced under the sandbox.
func (e env) checkEgressByName(t *testing.T, pool *v1.NodePool, to targets) {
	w := e.gatewayFixture(t, to)
	ctx := context.Background()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: credentialNS, Name: testcluster.Name(credential)},
		Data:       map[string][]byte{"key": []byte("sk-first-" + testcluster.Name("k"))},
	}
	if err := e.c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.c.Delete(context.Background(), secret) })
	alice := e.template(t, pool, func(s *v1.SandboxTemplateSpec) {
		s.Network.Egress = []v1.EgressRule{
			{Hosts: []string{apiHost, "*.pkg.example.test", internalHost, metadataHost}, Ports: []v1.NetworkPort{{Port: 443}}},
			{Service: &v1.ServiceReference{Namespace: w.service.Namespace, Name: w.service.Name}, Ports: []v1.NetworkPort{{Port: 80}}},
		}
		s.Network.Endpoints = []v1.Endpoint{{Name: "model", URL: "https://" + apiHost + "/v1", Credential: &v1.EndpointCredential{
			SecretRef: v1.SecretKeyReference{Namespace: credentialNS, Name: secret.Name, Key: "key"}, Header: apiKeyHeader, Prefix: "Bearer ",
		}}}
	})
	bob := e.template(t, pool, func(s *v1.SandboxTemplateSpec) {
		s.Network.Egress = []v1.EgressRule{{Hosts: []string{otherHost}}}
	})
	both := e.sandboxes(t, alice, bob)
	sbxAlice, sbxBob := both[0], both[1]
	for _, sbx := range both {
		e.python(t, sbx.Name, "import sys; open('/workspace/ca.pem', 'wb').write(sys.argv[1].encode())", string(w.caPEM))
	}
	svc := &corev1.Service{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: w.service.Namespace, Name: w.service.Name}, svc); err != nil {
		t.Fatal(err)
	}

	t.Run("hosts through the gateway", func(t *testing.T) {
		got := e.probe(t, sbxAlice,
			probe{"kind": "fetch", "url": "https://" + apiHost + "/hello"},
			probe{"kind": "fetch", "url": "https://" + pkgHost + "/simple/"},
			probe{"kind": "connect", "target": otherHost + ":443"},
			probe{"kind": "connect", "target": apiHost + ":8443"},
			probe{"kind": "connect", "target": UpstreamIP + ":443"},
			probe{"kind": "connect", "target": internalHost + ":443"},
			probe{"kind": "connect", "target": metadataHost + ":443"},
			probe{"kind": "direct", "target": UpstreamIP + ":443"},
			probe{"kind": "connect", "target": apiHost + ":443", "sni": apiHost},
			probe{"kind": "connect", "target": apiHost + ":443", "sni": otherHost},
		)
		expectBody(t, "allowed host", got[0], `"host":"`+apiHost+`"`)
		expectBody(t, "wildcard host", got[1], `"path":"/simple/"`)
		expectRefused(t, "host not in the list", got[2], "403", "not in", "hosts")
		expectRefused(t, "port not in the rule", got[3], "403", "8443")
		expectRefused(t, "IP literal", got[4], "403", UpstreamIP)
		expectRefused(t, "name resolving to the node", got[5], "403", realnode.NodeIP)
		expectRefused(t, "name resolving to the metadata address", got[6], "403", MetadataIP)
		if !strings.HasPrefix(got[7].Result, "blocked") {
			t.Errorf("a direct connection to the upstream, around the gateway, is %s", got[7].Result)
		}
		if !strings.Contains(got[8].TLS, "HTTP/1.1 200") {
			t.Errorf("TLS through CONNECT with the CONNECT host as server name: %+v", got[8])
		}
		if strings.Contains(got[9].TLS, "HTTP/1.1") || got[9].TLSError == "" && got[9].TLS != "" {
			t.Errorf("TLS naming %s through a CONNECT to %s got through: %+v", otherHost, apiHost, got[9])
		}
	})

	t.Run("each owner's own rules", func(t *testing.T) {
		got := e.probe(t, sbxBob,
			probe{"kind": "fetch", "url": "https://" + otherHost + "/bob"},
			probe{"kind": "connect", "target": apiHost + ":443"},
		)
		expectBody(t, "bob's host", got[0], `"path":"/bob"`)
		expectRefused(t, "alice's host from bob's sandbox", got[1], "403", apiHost)
	})

	t.Run("a Service by its rule", func(t *testing.T) {
		target80 := svc.Spec.ClusterIP + ":80"
		target81 := svc.Spec.ClusterIP + ":81"
		// Her template allows no cluster DNS: the name comes from the
		// pod's /etc/hosts.
		byName := svc.Name + "." + svc.Namespace + ".svc:80"
		got := e.probe(t, sbxAlice, probe{"kind": "direct", "target": target80}, probe{"kind": "direct", "target": target81},
			probe{"kind": "direct", "target": byName})
		if got[0].Result != open || !strings.HasPrefix(got[1].Result, "blocked") {
			t.Errorf("from alice's sandbox: %s is %s (want open), %s is %s (want blocked: the rule names port 80 only)", target80, got[0].Result, target81, got[1].Result)
		}
		if got[2].Result != open {
			t.Errorf("from alice's sandbox, without cluster DNS: %s is %s, want open", byName, got[2].Result)
		}
		got = e.probe(t, sbxBob, probe{"kind": "direct", "target": target80})
		if !strings.HasPrefix(got[0].Result, "blocked") {
			t.Errorf("from bob's sandbox, which has no service rule: %s is %s", target80, got[0].Result)
		}
	})

	t.Run("the endpoint's key is added upstream and nowhere inside", func(t *testing.T) {
		key := string(secret.Data["key"])
		got := e.probe(t, sbxAlice,
			probe{"kind": "endpoint", "variable": "AGENTSANDBOX_ENDPOINT_MODEL", "path": "/chat", "headers": map[string]string{apiKeyHeader: "Bearer forged"}},
			probe{"kind": "search", "needle_hex": hex.EncodeToString([]byte(key))},
		)
		if seen := w.seen.get("/v1/chat"); seen != "Bearer "+key {
			t.Errorf("the upstream saw %s %q, want the Secret's key", apiKeyHeader, seen)
		}
		if got[0].Status != float64(200) || !strings.Contains(got[0].Body, `"path":"/v1/chat"`) {
			t.Errorf("endpoint answered %+v", got[0])
		}
		if strings.Contains(got[0].Body, key) || strings.Contains(fmt.Sprint(got[0].Headers), key) {
			t.Errorf("the upstream's echo carried the key into the sandbox: %s", got[0].Body)
		}
		if len(got[1].Found) > 0 {
			t.Errorf("the key is in the sandbox at %v", got[1].Found)
		}
		e.assertKeyNotInStatus(t, sbxAlice, key)

		rotated := "sk-second-" + testcluster.Name("k")
		patch := client.MergeFrom(secret.DeepCopy())
		secret.Data["key"] = []byte(rotated)
		if err := e.c.Patch(ctx, secret, patch); err != nil {
			t.Fatal(err)
		}
		testcluster.Eventually(t, "the rotated key reaches the upstream", func() (bool, string) {
			e.probe(t, sbxAlice, probe{"kind": "endpoint", "variable": "AGENTSANDBOX_ENDPOINT_MODEL", "path": "/rotated"})
			seen := w.seen.get("/v1/rotated")
			return seen == "Bearer "+rotated, seen
		})
	})

	t.Run("the gateway replaced under traffic", func(t *testing.T) {
		selector := client.MatchingLabels{"app.kubernetes.io/name": v1.EgressGatewayName}
		pods := &corev1.PodList{}
		if err := e.c.List(ctx, pods, client.InNamespace(v1.SystemNamespace), selector); err != nil {
			t.Fatal(err)
		}
		old := map[string]bool{}
		for i := range pods.Items {
			old[string(pods.Items[i].UID)] = true
			if err := e.c.Delete(ctx, &pods.Items[i]); err != nil {
				t.Fatal(err)
			}
		}
		// While the replicas are replaced nothing opens around them; the
		// same client gets through again once only new ones serve.
		replaced := func() bool {
			if err := e.c.List(ctx, pods, client.InNamespace(v1.SystemNamespace), selector); err != nil {
				t.Fatal(err)
			}
			ready := 0
			for _, pod := range pods.Items {
				if old[string(pod.UID)] {
					return false
				}
				for _, c := range pod.Status.Conditions {
					if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
						ready++
					}
				}
			}
			return ready == len(old)
		}
		// Ready replicas are not yet served: the Service's endpoints reach
		// kube-proxy a moment later, so once only new replicas run the same
		// client must get through before the deadline, not at once.
		deadline := time.Now().Add(waitReady)
		for {
			done := replaced()
			got := e.probe(t, sbxAlice,
				probe{"kind": "direct", "target": UpstreamIP + ":443"},
				probe{"kind": "fetch", "url": "https://" + apiHost + "/after-restart"},
			)
			if !strings.HasPrefix(got[0].Result, "blocked") {
				t.Fatalf("during the gateway's restart the upstream is %s directly", got[0].Result)
			}
			if done && got[1].Error == "" {
				expectBody(t, "through the new replicas", got[1], `"path":"/after-restart"`)
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the gateway's replicas were not replaced and serving in %s (replaced: %t; last fetch: %+v)", waitReady, done, got[1])
			}
			time.Sleep(time.Second)
		}
	})
}

func expectBody(t *testing.T, what string, got probeResult, part string) {
	t.Helper()
	if got.Error != "" || !strings.Contains(got.Body, part) {
		t.Errorf("%s: %+v, want a body with %s", what, got, part)
	}
}

// expectRefused wants the gateway's refusal: its status and a body that
// says who refused and names what.
func expectRefused(t *testing.T, what string, got probeResult, status string, parts ...string) {
	t.Helper()
	if !strings.Contains(fmt.Sprint(got.Status), status) || !strings.Contains(got.Body, "agentsandbox egress gateway: ") {
		t.Errorf("%s: %+v, want the gateway's %s", what, got, status)
		return
	}
	for _, p := range parts {
		if !strings.Contains(got.Body, p) {
			t.Errorf("%s: the gateway said %q, which does not name %q", what, got.Body, p)
		}
	}
}

// assertKeyNotInStatus: neither the Sandbox, its template nor the events
// of its namespace carry the key.
func (e env) assertKeyNotInStatus(t *testing.T, sbx started, key string) {
	t.Helper()
	ctx := context.Background()
	current := &v1.Sandbox{}
	if err := e.c.Get(ctx, client.ObjectKeyFromObject(sbx.Sandbox), current); err != nil {
		t.Fatal(err)
	}
	events := &corev1.EventList{}
	if err := e.c.List(ctx, events, client.InNamespace(current.Status.Namespace)); err != nil {
		t.Fatal(err)
	}
	for what, obj := range map[string]any{"the Sandbox": current, "its namespace's events": events} {
		data, _ := json.Marshal(obj)
		if strings.Contains(string(data), key) {
			t.Errorf("%s carries the key", what)
		}
	}
}
