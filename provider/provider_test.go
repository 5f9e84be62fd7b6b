package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/provider/engine"
)

// server runs the provider over the plugin protocol, as Terraform and
// OpenTofu talk to it, and builds configurations of its schema type.
type server struct {
	tfprotov6.ProviderServer
	typ tftypes.Object
}

func newServer(t *testing.T) server {
	t.Helper()
	srv, err := Server("test")()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.GetProviderSchema(context.Background(), &tfprotov6.GetProviderSchemaRequest{})
	if err != nil || len(resp.Diagnostics) > 0 {
		t.Fatalf("schema: %v %v", err, resp.Diagnostics)
	}
	return server{srv, resp.Provider.ValueType().(tftypes.Object)}
}

// config returns a provider configuration with the given attributes set and
// every other one null.
func (s server) config(t *testing.T, attrs map[string]tftypes.Value) *tfprotov6.DynamicValue {
	t.Helper()
	vals := map[string]tftypes.Value{}
	for name, typ := range s.typ.AttributeTypes {
		if v, ok := attrs[name]; ok {
			vals[name] = v
		} else {
			vals[name] = tftypes.NewValue(typ, nil)
		}
	}
	dv, err := tfprotov6.NewDynamicValue(s.typ, tftypes.NewValue(s.typ, vals))
	if err != nil {
		t.Fatal(err)
	}
	return &dv
}

func str(s string) tftypes.Value { return tftypes.NewValue(tftypes.String, s) }

func errorsOf(diags []*tfprotov6.Diagnostic) string {
	var b strings.Builder
	for _, d := range diags {
		if d.Severity == tfprotov6.DiagnosticSeverityError {
			b.WriteString(d.Summary + ": " + d.Detail + "\n")
		}
	}
	return b.String()
}

// TestConfigureNeverDials configures the provider against an address where
// nothing listens: Configure must succeed, because the cluster may be created
// later in the same apply.
func TestConfigureNeverDials(t *testing.T) {
	s := newServer(t)
	resp, err := s.ConfigureProvider(context.Background(), &tfprotov6.ConfigureProviderRequest{
		Config: s.config(t, map[string]tftypes.Value{"host": str("https://127.0.0.1:1"), "token": str("t")}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if msg := errorsOf(resp.Diagnostics); msg != "" {
		t.Fatalf("Configure failed without a reachable cluster: %s", msg)
	}
}

// TestInvalidProviderConfigurations are refused at validation, offline, with
// a message naming the attribute.
func TestInvalidProviderConfigurations(t *testing.T) {
	s := newServer(t)
	execList := s.typ.AttributeTypes["exec"].(tftypes.List)
	execType := execList.ElementType.(tftypes.Object)
	execBlock := tftypes.NewValue(execType, map[string]tftypes.Value{
		"api_version": str("client.authentication.k8s.io/v1"),
		"command":     str("aws"),
		"args":        tftypes.NewValue(execType.AttributeTypes["args"], nil),
		"env":         tftypes.NewValue(execType.AttributeTypes["env"], nil),
	})
	execValue := tftypes.NewValue(execList, []tftypes.Value{execBlock})
	cases := []struct {
		name  string
		attrs map[string]tftypes.Value
		want  string
	}{
		{"exec and token", map[string]tftypes.Value{"exec": execValue, "token": str("t")}, `"token" cannot be specified when "exec[0].command" is specified`},
		{"certificate without key", map[string]tftypes.Value{"client_certificate": str("pem")}, "client_key"},
		{"config_path and config_paths", map[string]tftypes.Value{
			"config_path":  str("a"),
			"config_paths": tftypes.NewValue(tftypes.List{ElementType: tftypes.String}, []tftypes.Value{str("b")}),
		}, "config_paths"},
		{"empty field manager", map[string]tftypes.Value{"field_manager": str("")}, "field_manager"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := s.ValidateProviderConfig(context.Background(), &tfprotov6.ValidateProviderConfigRequest{Config: s.config(t, tc.attrs)})
			if err != nil {
				t.Fatal(err)
			}
			if msg := errorsOf(resp.Diagnostics); !strings.Contains(msg, tc.want) {
				t.Errorf("diagnostics %q do not mention %q", msg, tc.want)
			}
		})
	}
}

// TestClientFromKubeconfig builds the lazy client from config_path and
// reaches the real API server with it.
func TestClientFromKubeconfig(t *testing.T) {
	cluster := testcluster.Get(t)
	settings, err := settingsFrom(providerModel{ConfigPath: types.StringValue(cluster.Kubeconfig)}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	c, err := engine.NewClients(settings.restConfig, DefaultFieldManager).Client()
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	if err := c.List(context.Background(), &v1.SandboxList{}); err != nil {
		t.Fatalf("listing sandboxes through the provider's client: %v", err)
	}
}

func TestNoClusterConfiguredSaysWhatToSet(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	settings, err := settingsFrom(providerModel{}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	_, err = engine.NewClients(settings.restConfig, DefaultFieldManager).Client()
	if err == nil || !strings.Contains(err.Error(), "set config_path (or KUBE_CONFIG_PATH)") {
		t.Fatalf("error %v does not say what to set", err)
	}
}

func TestEnvironmentFallbacks(t *testing.T) {
	env := map[string]string{
		"KUBE_HOST":         "https://api.example.com",
		"KUBE_TOKEN":        "from-env",
		"KUBE_CONFIG_PATHS": "/a:/b",
		"KUBE_CTX":          "prod",
		"KUBE_INSECURE":     "true",
		// The kubernetes provider's names for the settings below.
		"KUBE_CTX_AUTH_INFO":   "deployer",
		"KUBE_CTX_CLUSTER":     "prod-east",
		"KUBE_TLS_SERVER_NAME": "kubernetes",
		"KUBE_PROXY_URL":       "http://proxy.example:3128",
		"KUBE_USER":            "basic",
		"KUBE_PASSWORD":        "secret",
	}
	s, err := settingsFrom(providerModel{Token: types.StringValue("from-config")}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if s.host != "https://api.example.com" || s.token != "from-config" || s.configContext != "prod" || !s.insecure ||
		strings.Join(s.configPaths, ",") != "/a,/b" || s.configContextUser != "deployer" || s.configContextCluster != "prod-east" ||
		s.tlsServerName != "kubernetes" || s.proxyURL != "http://proxy.example:3128" || s.username != "basic" || s.password != "secret" {
		t.Errorf("settings = %+v", s)
	}
	env["KUBE_INSECURE"] = "maybe"
	if _, err := settingsFrom(providerModel{}, func(k string) string { return env[k] }); err == nil ||
		!strings.Contains(err.Error(), `KUBE_INSECURE="maybe"`) {
		t.Errorf("bad KUBE_INSECURE: %v", err)
	}
}

func TestHostWithoutSchemeGetsHTTPS(t *testing.T) {
	s := connectionSettings{host: "10.0.0.1:6443", token: "t"}
	cfg, err := s.restConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://10.0.0.1:6443" || cfg.BearerToken != "t" {
		t.Errorf("host %q token %q", cfg.Host, cfg.BearerToken)
	}
}

// TestEveryAttributeIsDescribed walks the schema of every resource, data
// source and ephemeral resource: the docs have something to say about each
// attribute. The timeouts attribute of the timeouts library describes only
// its children.
func TestEveryAttributeIsDescribed(t *testing.T) {
	resp, err := newServer(t).GetProviderSchema(context.Background(), &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var walk func(where string, attrs []*tfprotov6.SchemaAttribute)
	walk = func(where string, attrs []*tfprotov6.SchemaAttribute) {
		for _, a := range attrs {
			at := where + "." + a.Name
			if a.Description == "" && a.Name != "timeouts" {
				t.Errorf("%s has no description", at)
			}
			if a.NestedType != nil {
				walk(at, a.NestedType.Attributes)
			}
		}
	}
	count := 0
	for kind, schemas := range map[string]map[string]*tfprotov6.Schema{
		"resource": resp.ResourceSchemas, "data": resp.DataSourceSchemas, "ephemeral": resp.EphemeralResourceSchemas,
	} {
		for name, s := range schemas {
			walk(kind+" "+name, s.Block.Attributes)
			count++
		}
	}
	if count != 10 {
		t.Errorf("walked %d schemas, want 10 (5 resources, 4 data sources, 1 ephemeral resource)", count)
	}
}
