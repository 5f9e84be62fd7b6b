package provider_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/acctest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// TestAccKubernetesProviderBlock configures the provider as a kubernetes
// provider block would: kubeconfig context overrides, then host with
// tls_server_name, proxy_url and an exec block, against the test cluster.
// Each setting must take effect: without the overrides the context points
// at a cluster where nothing listens; the proxy must carry the traffic and
// the credential plugin must have run; a wrong tls_server_name must fail.
func TestAccKubernetesProviderBlock(t *testing.T) {
	cluster := testcluster.Get(t)
	admin := adminCredentials(t, cluster.Kubeconfig)
	dir := t.TempDir()

	// A kubeconfig whose current context names an unreachable cluster and
	// a powerless user; the real ones are named by the overrides.
	kubeconfig := filepath.Join(dir, "kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["real"] = &clientcmdapi.Cluster{Server: admin.server, CertificateAuthorityData: admin.ca}
	cfg.Clusters["nowhere"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", CertificateAuthorityData: admin.ca}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: admin.cert, ClientKeyData: admin.key}
	cfg.AuthInfos["nobody"] = &clientcmdapi.AuthInfo{Token: "not-a-token"}
	cfg.Contexts["work"] = &clientcmdapi.Context{Cluster: "nowhere", AuthInfo: "nobody"}
	cfg.CurrentContext = "work"
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}

	// A credential plugin handing out the admin's client certificate, and
	// leaving a mark that it ran.
	ran := filepath.Join(dir, "plugin-ran")
	plugin := filepath.Join(dir, "credential-plugin")
	credential := fmt.Sprintf(`{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"clientCertificateData":%q,"clientKeyData":%q}}`,
		admin.cert, admin.key)
	script := fmt.Sprintf("#!/bin/sh\ntouch %q\ncat <<'EOF'\n%s\nEOF\n", ran, credential)
	if err := os.WriteFile(plugin, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	proxy, tunnels := connectProxy(t)

	const read = `
data "agentsandbox_sandboxes" "all" {}
`
	hostBlock := func(tlsServerName string) string {
		return fmt.Sprintf(`
provider "agentsandbox" {
  host                   = %q
  cluster_ca_certificate = %q
  tls_server_name        = %q
  proxy_url              = %q

  exec {
    api_version = "client.authentication.k8s.io/v1"
    command     = %q
    args        = ["get-token"]
    env         = { CLUSTER = "test" }
  }
}
`, admin.server, admin.ca, tlsServerName, proxy, plugin) + read
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories,
		Steps: []resource.TestStep{
			{
				Config: fmt.Sprintf(`
provider "agentsandbox" {
  config_path              = %q
  config_context           = "work"
  config_context_auth_info = "admin"
  config_context_cluster   = "real"
}
`, kubeconfig) + read,
				Check: resource.TestCheckResourceAttrSet("data.agentsandbox_sandboxes.all", "sandboxes.#"),
			},
			{
				// The API server's certificate names "kubernetes", not the
				// address the host gives.
				Config: hostBlock("kubernetes"),
				Check: resource.ComposeTestCheckFunc(
					resource.TestCheckResourceAttrSet("data.agentsandbox_sandboxes.all", "sandboxes.#"),
					func(*terraform.State) error {
						if _, err := os.Stat(ran); err != nil {
							return fmt.Errorf("the exec credential plugin never ran: %w", err)
						}
						if tunnels.Load() == 0 {
							return fmt.Errorf("no request went through proxy_url %s", proxy)
						}
						return nil
					},
				),
			},
			{
				Config:      hostBlock("elsewhere.example"),
				ExpectError: regexp.MustCompile(`not elsewhere\.example`),
			},
		},
	})
}

// adminCredentials are the test cluster's address, CA and admin client
// certificate, read from its kubeconfig.
type credentials struct {
	server        string
	ca, cert, key []byte
}

func adminCredentials(t *testing.T, kubeconfig string) credentials {
	t.Helper()
	raw, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := clientcmdapi.FlattenConfig(raw); err != nil {
		t.Fatal(err)
	}
	ctx := raw.Contexts[raw.CurrentContext]
	cl, user := raw.Clusters[ctx.Cluster], raw.AuthInfos[ctx.AuthInfo]
	if len(cl.CertificateAuthorityData) == 0 || len(user.ClientCertificateData) == 0 {
		t.Skipf("the test cluster's kubeconfig has no CA or client certificate to build a provider block from")
	}
	return credentials{server: cl.Server, ca: cl.CertificateAuthorityData, cert: user.ClientCertificateData, key: user.ClientKeyData}
}

// connectProxy serves an HTTP CONNECT proxy on loopback and counts the
// tunnels it opened.
func connectProxy(t *testing.T) (url string, tunnels *atomic.Int64) {
	t.Helper()
	tunnels = &atomic.Int64{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		upstream, err := net.Dial("tcp", r.Host)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		hijacker, ok := w.(http.Hijacker)
		if !ok {
			upstream.Close()
			http.Error(w, "cannot hijack", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
		conn, buf, err := hijacker.Hijack()
		if err != nil {
			upstream.Close()
			return
		}
		tunnels.Add(1)
		go func() {
			defer upstream.Close()
			defer conn.Close()
			done := make(chan struct{})
			go func() { _, _ = io.Copy(upstream, buf); close(done) }()
			_, _ = io.Copy(conn, upstream)
			<-done
		}()
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String(), tunnels
}
