package realnode_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/config"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testdns"
	"github.com/agentsandbox/terraform-provider-agentsandbox/realnode"
)

// The egress gateway's world on the real node: HTTPS upstreams of the
// test's own on a public-looking address of this machine (a documentation
// range, so no traffic leaves it), names resolved by a DNS server the test
// controls, and the gateway itself installed from config/gateway.
const (
	// UpstreamIP is where the upstreams listen: an address of the host's,
	// outside every private range, as a public server's would be.
	UpstreamIP = "198.51.100.10"
	// dnsAddr is the test resolver the gateway asks (--dns-server).
	dnsAddr = realnode.NodeIP + ":5353"
	// secretTTL is the gateway's --secret-ttl here: a rotation shows
	// within it.
	secretTTL = time.Second
)

// Names the test resolver answers.
const (
	apiHost      = "api.example.test"        // an upstream
	pkgHost      = "files.pkg.example.test"  // an upstream under a wildcard
	otherHost    = "other.example.test"      // an upstream no rule allows
	internalHost = "internal.example.test"   // resolves to the node: private
	metadataHost = "metadata.example.test"   // resolves to the metadata address
	apiKeyHeader = "Authorization"           // where the endpoint's key goes
	credentialNS = v1.SystemNamespace        // where the endpoint's Secret lives
	credential   = "gateway-test-credential" // its name
)

// gatewayWorld is what the egress tests use of the fixture.
type gatewayWorld struct {
	// caPEM signs the upstreams' certificate; sandboxes trust it for the
	// test's HTTPS clients.
	caPEM []byte
	// seen records the upstream's requests: the credential header of
	// each, by path.
	seen *upstreamLog
	// service is the plain pod's Service (ports 80 → 8080, 81 → 8081).
	service types.NamespacedName
}

type upstreamLog struct {
	mu      sync.Mutex
	headers map[string]string
}

func (l *upstreamLog) record(path, value string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.headers[path] = value
}

func (l *upstreamLog) get(path string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.headers[path]
}

var (
	world     gatewayWorld
	worldErr  error
	worldOnce sync.Once
)

// gatewayFixture sets the world up once for the package.
func (e env) gatewayFixture(t *testing.T, to targets) gatewayWorld {
	t.Helper()
	worldOnce.Do(func() { world, worldErr = e.setUpGateway(to) })
	if worldErr != nil {
		t.Fatal(worldErr)
	}
	return world
}

func (e env) setUpGateway(to targets) (gatewayWorld, error) {
	w := gatewayWorld{seen: &upstreamLog{headers: map[string]string{}}, service: to.service}
	ca, caKey, caPEM, err := newCA()
	if err != nil {
		return w, err
	}
	w.caPEM = caPEM
	if err := upstreamAddress(); err != nil {
		return w, err
	}
	if err := startUpstream(ca, caKey, w.seen); err != nil {
		return w, err
	}
	dns, err := testdns.Start(dnsAddr)
	if err != nil {
		return w, fmt.Errorf("test resolver: %w", err)
	}
	teardown = append(teardown, func() { _ = dns.Close() })
	upstream := netip.MustParseAddr(UpstreamIP)
	dns.Set(apiHost, upstream)
	dns.Set(pkgHost, upstream)
	dns.Set(otherHost, upstream)
	dns.Set(internalHost, netip.MustParseAddr(realnode.NodeIP))
	dns.Set(metadataHost, netip.MustParseAddr(MetadataIP))
	relay, err := e.apiRelay()
	if err != nil {
		return w, err
	}
	return w, e.installGateway(relay, caPEM)
}

// newCA makes the certificate authority of the upstreams.
func newCA() (*x509.Certificate, *ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "agentsandbox realnode test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, err
	}
	ca, err := x509.ParseCertificate(der)
	return ca, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), err
}

// upstreamAddress puts UpstreamIP on the node's bridge, as
// ServiceRangeAddress is: the host's, reached from pods as any address
// outside their range is.
func upstreamAddress() error {
	_ = exec.Command("ip", "addr", "del", UpstreamIP+"/32", "dev", realnode.Bridge).Run() // a killed run's
	if out, err := exec.Command("ip", "addr", "add", UpstreamIP+"/32", "dev", realnode.Bridge).CombinedOutput(); err != nil {
		return fmt.Errorf("ip addr add %s/32 dev %s: %v: %s", UpstreamIP, realnode.Bridge, err, out)
	}
	teardown = append(teardown, func() { _ = exec.Command("ip", "addr", "del", UpstreamIP+"/32", "dev", realnode.Bridge).Run() })
	return nil
}

// startUpstream serves HTTPS on UpstreamIP:443 for every upstream name: it
// records the credential header each request came with, and answers with
// the request's headers (as httpbin's /headers does), which the gateway
// must mask.
func startUpstream(ca *x509.Certificate, caKey *ecdsa.PrivateKey, seen *upstreamLog) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: apiHost},
		DNSNames:  []string{apiHost, "*.pkg.example.test", otherHost},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(UpstreamIP, "443"))
	if err != nil {
		return err
	}
	server := &http.Server{
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}},
		ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen.record(r.URL.Path, r.Header.Get(apiKeyHeader))
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"host": r.Host, "path": r.URL.Path, "headers": r.Header})
		}),
	}
	go func() { _ = server.ServeTLS(ln, "", "") }()
	teardown = append(teardown, func() { _ = server.Close() })
	return nil
}

// apiRelay makes the API server, which listens on the host's loopback,
// reachable from the node's pods at the node's address: the gateway pods
// read the cluster through it. Returns the address.
func (e env) apiRelay() (string, error) {
	target := strings.TrimPrefix(e.cluster.Config.Host, "https://")
	addr, err := serveTCP(realnode.NodeIP+":0", func(conn net.Conn) { relay(conn, target) })
	if err != nil {
		return "", err
	}
	return addr.String(), nil
}

func relay(conn net.Conn, target string) {
	defer conn.Close()
	up, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{})
	go func() { _, _ = io.Copy(up, conn); close(done) }()
	_, _ = io.Copy(conn, up)
	<-done
}

// installGateway applies config/gateway as shipped, with the node's image
// of the gateway, on the real node, reading the cluster through relay
// with its own service account's token, resolving through the test's
// resolver and trusting the upstreams' CA; and waits for both replicas.
func (e env) installGateway(relay string, caPEM []byte) error {
	ctx := context.Background()
	objs, err := config.Gateway()
	if err != nil {
		return err
	}
	for _, obj := range objs {
		if obj.GetKind() == "Deployment" {
			continue // below, once its configuration exists
		}
		if err := e.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("realnode-test"), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		teardown = append(teardown, func() { _ = e.c.Delete(context.Background(), obj) })
	}
	kubeconfig, err := e.gatewayKubeconfig(ctx, relay)
	if err != nil {
		return err
	}
	cfg := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: v1.SystemNamespace, Name: "gateway-test-config"},
		Data:       map[string][]byte{"kubeconfig": kubeconfig, "ca.pem": caPEM},
	}
	if err := e.c.Create(ctx, cfg); err != nil {
		return err
	}
	teardown = append(teardown, func() { _ = e.c.Delete(context.Background(), cfg) })
	for _, obj := range objs {
		if obj.GetKind() != "Deployment" {
			continue
		}
		deployment := &appsv1.Deployment{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, deployment); err != nil {
			return err
		}
		spec := &deployment.Spec.Template.Spec
		spec.NodeSelector = map[string]string{corev1.LabelHostname: realnode.NodeName}
		spec.Tolerations = []corev1.Toleration{{Key: realnode.TaintKey, Operator: corev1.TolerationOpExists}}
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "test", VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: cfg.Name, DefaultMode: ptr.To[int32](0o444)},
		}})
		c := &spec.Containers[0]
		c.Image, c.ImagePullPolicy = realnode.GateImage, corev1.PullNever
		c.Args = append(c.Args, "--kubeconfig=/etc/gateway-test/kubeconfig", "--dns-server="+dnsAddr,
			"--upstream-ca-file=/etc/gateway-test/ca.pem", "--secret-ttl="+secretTTL.String())
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "test", MountPath: "/etc/gateway-test", ReadOnly: true})
		deployment.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
		if err := e.c.Create(ctx, deployment); err != nil {
			return err
		}
		teardown = append(teardown, func() {
			_ = e.c.Delete(context.Background(), deployment, client.PropagationPolicy(metav1.DeletePropagationForeground))
		})
		return waitDeployment(ctx, e.c, deployment)
	}
	return errors.New("config/gateway has no Deployment")
}

// waitDeployment waits until every replica of d is available.
func waitDeployment(ctx context.Context, c client.Client, d *appsv1.Deployment) error {
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, waitReady, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(d), d)
		return err == nil && d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas == *d.Spec.Replicas &&
			d.Status.UpdatedReplicas == *d.Spec.Replicas && d.Status.Replicas == *d.Spec.Replicas, err
	})
	if err != nil {
		return fmt.Errorf("egress gateway %s not available (%d of %d replicas): %w", d.Name, d.Status.AvailableReplicas, *d.Spec.Replicas, err)
	}
	return nil
}

// gatewayKubeconfig is the gateway's access to the cluster: its service
// account's token (so config/gateway's RBAC is what it has), through relay,
// checking the API server's certificate by its name.
func (e env) gatewayKubeconfig(ctx context.Context, relay string) ([]byte, error) {
	clientset, err := kubernetes.NewForConfig(e.cluster.Config)
	if err != nil {
		return nil, err
	}
	token, err := clientset.CoreV1().ServiceAccounts(v1.SystemNamespace).CreateToken(ctx, v1.EgressGatewayName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](7200)}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token of the gateway's service account: %w", err)
	}
	ca := e.cluster.Config.CAData
	if len(ca) == 0 {
		if ca, err = os.ReadFile(e.cluster.Config.CAFile); err != nil {
			return nil, fmt.Errorf("the test cluster's CA: %w", err)
		}
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://" + relay, CertificateAuthorityData: ca, TLSServerName: "kubernetes"}
	cfg.AuthInfos["a"] = &clientcmdapi.AuthInfo{Token: token.Status.Token}
	cfg.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "a"}
	cfg.CurrentContext = "x"
	return clientcmd.Write(*cfg)
}
