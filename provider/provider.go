// Package provider is the agentsandbox Terraform provider: its configuration
// schema and the lazily built Kubernetes client its resources share.
package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	_ "k8s.io/client-go/plugin/pkg/client/auth" // legacy auth plugins named in kubeconfigs

	"github.com/agentsandbox/terraform-provider-agentsandbox/datasources"
	"github.com/agentsandbox/terraform-provider-agentsandbox/provider/engine"
	"github.com/agentsandbox/terraform-provider-agentsandbox/resources"
)

// Address is the provider's registry address.
const Address = "registry.terraform.io/agentsandbox/agentsandbox"

// DefaultFieldManager is the server-side apply field manager of every write
// the provider makes, unless field_manager says otherwise.
const DefaultFieldManager = "terraform-provider-agentsandbox"

var _ provider.ProviderWithEphemeralResources = &Provider{}

// Provider is the agentsandbox provider.
type Provider struct {
	version string
}

// New returns a constructor of the provider for providerserver.Serve.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &Provider{version: version} }
}

// providerModel mirrors the provider schema.
type providerModel struct {
	ConfigPath           types.String `tfsdk:"config_path"`
	ConfigPaths          []string     `tfsdk:"config_paths"`
	ConfigContext        types.String `tfsdk:"config_context"`
	ConfigContextUser    types.String `tfsdk:"config_context_auth_info"`
	ConfigContextCluster types.String `tfsdk:"config_context_cluster"`
	Host                 types.String `tfsdk:"host"`
	TLSServerName        types.String `tfsdk:"tls_server_name"`
	ProxyURL             types.String `tfsdk:"proxy_url"`
	Username             types.String `tfsdk:"username"`
	Password             types.String `tfsdk:"password"`
	Token                types.String `tfsdk:"token"`
	ClientCertificate    types.String `tfsdk:"client_certificate"`
	ClientKey            types.String `tfsdk:"client_key"`
	ClusterCACertificate types.String `tfsdk:"cluster_ca_certificate"`
	Insecure             types.Bool   `tfsdk:"insecure"`
	Exec                 []execModel  `tfsdk:"exec"`
	FieldManager         types.String `tfsdk:"field_manager"`
}

// execModel mirrors the exec credential plugin block.
type execModel struct {
	APIVersion types.String      `tfsdk:"api_version"`
	Command    types.String      `tfsdk:"command"`
	Args       []string          `tfsdk:"args"`
	Env        map[string]string `tfsdk:"env"`
}

// Metadata names the provider: resource type names start with "agentsandbox_".
func (p *Provider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "agentsandbox"
	resp.Version = p.version
}

// Schema has the connection settings of the kubernetes provider, under the
// same names, with the same KUBE_* environment fallbacks and exec as a
// block, so a provider block copied from a kubernetes provider
// configuration works here unchanged. (Its ignore_annotations,
// ignore_labels and experiments shape that provider's own resources and
// have no meaning here.)
func (p *Provider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Manages Agent Sandbox node pools, sandbox templates, warm pools, sandboxes and Git syncs " +
			"on a Kubernetes cluster. The provider never contacts the cluster while it is configured, so the " +
			"cluster may be created in the same apply. `~/.kube/config` is not read unless `config_path` says so.",
		Attributes: map[string]schema.Attribute{
			"config_path": schema.StringAttribute{
				Optional:            true,
				MarkdownDescription: "Path to a kubeconfig file. Environment: `KUBE_CONFIG_PATH`.",
				Validators:          []validator.String{stringvalidator.ConflictsWith(path.MatchRoot("config_paths"))},
			},
			"config_paths": schema.ListAttribute{
				Optional:            true,
				ElementType:         types.StringType,
				MarkdownDescription: "Kubeconfig files merged in order, like `$KUBECONFIG`. Environment: `KUBE_CONFIG_PATHS`.",
			},
			"config_context": schema.StringAttribute{
				Optional:            true,
				MarkdownDescription: "Context of the kubeconfig to use instead of its current context. Environment: `KUBE_CTX`.",
			},
			"config_context_auth_info": schema.StringAttribute{
				Optional:            true,
				MarkdownDescription: "User of the kubeconfig to use instead of the context's. Environment: `KUBE_CTX_AUTH_INFO`.",
			},
			"config_context_cluster": schema.StringAttribute{
				Optional:            true,
				MarkdownDescription: "Cluster of the kubeconfig to use instead of the context's. Environment: `KUBE_CTX_CLUSTER`.",
			},
			"host": schema.StringAttribute{
				Optional:            true,
				MarkdownDescription: "URL of the Kubernetes API server, e.g. `https://127.0.0.1:6443`. Environment: `KUBE_HOST`.",
			},
			"tls_server_name": schema.StringAttribute{
				Optional:            true,
				MarkdownDescription: "Server name the API server's certificate is checked for, when it differs from the host's. Environment: `KUBE_TLS_SERVER_NAME`.",
			},
			"proxy_url": schema.StringAttribute{
				Optional:            true,
				MarkdownDescription: "URL of the proxy to reach the API server through (`http`, `https` or `socks5`). Environment: `KUBE_PROXY_URL`.",
			},
			"username": schema.StringAttribute{
				Optional:            true,
				MarkdownDescription: "User of HTTP basic authentication, for the rare API server that still allows it. Environment: `KUBE_USER`.",
				Validators:          []validator.String{stringvalidator.AlsoRequires(path.MatchRoot("password"))},
			},
			"password": schema.StringAttribute{
				Optional:            true,
				Sensitive:           true,
				MarkdownDescription: "Password of `username`. Environment: `KUBE_PASSWORD`.",
				Validators:          []validator.String{stringvalidator.AlsoRequires(path.MatchRoot("username"))},
			},
			"token": schema.StringAttribute{
				Optional:            true,
				Sensitive:           true,
				MarkdownDescription: "Bearer token. Environment: `KUBE_TOKEN`.",
			},
			"client_certificate": schema.StringAttribute{
				Optional:            true,
				MarkdownDescription: "PEM client certificate for TLS authentication. Environment: `KUBE_CLIENT_CERT_DATA`.",
				Validators:          []validator.String{stringvalidator.AlsoRequires(path.MatchRoot("client_key"))},
			},
			"client_key": schema.StringAttribute{
				Optional:            true,
				Sensitive:           true,
				MarkdownDescription: "PEM key of `client_certificate`. Environment: `KUBE_CLIENT_KEY_DATA`.",
				Validators:          []validator.String{stringvalidator.AlsoRequires(path.MatchRoot("client_certificate"))},
			},
			"cluster_ca_certificate": schema.StringAttribute{
				Optional:            true,
				MarkdownDescription: "PEM CA bundle the API server's certificate is checked against. Environment: `KUBE_CLUSTER_CA_CERT_DATA`.",
			},
			"insecure": schema.BoolAttribute{
				Optional:            true,
				MarkdownDescription: "Skip verification of the API server's certificate. Never use it outside a throwaway cluster. Environment: `KUBE_INSECURE`.",
			},
			"field_manager": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "Server-side apply field manager of the provider's writes (default `" + DefaultFieldManager + "`). " +
					"Another manager owning a field (a GitSync, kubectl) makes apply fail with a conflict rather than fight over it.",
				Validators: []validator.String{stringvalidator.LengthBetween(1, 128)},
			},
		},
		Blocks: map[string]schema.Block{
			// A list of at most one block, as the kubernetes provider's
			// exec is: a single nested block would demand its required
			// arguments even when there is no exec block at all.
			"exec": schema.ListNestedBlock{
				MarkdownDescription: "Runs a client-go credential plugin (as `aws eks get-token` or `gke-gcloud-auth-plugin`) for a token. At most one.",
				Validators:          []validator.List{listvalidator.SizeAtMost(1)},
				NestedObject: schema.NestedBlockObject{Attributes: map[string]schema.Attribute{
					"api_version": schema.StringAttribute{
						Required:            true,
						MarkdownDescription: "API version of the ExecCredential, e.g. `client.authentication.k8s.io/v1`.",
						Validators: []validator.String{stringvalidator.OneOf(
							"client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")},
					},
					"command": schema.StringAttribute{
						Required:            true,
						MarkdownDescription: "Command to run.",
						Validators: []validator.String{
							stringvalidator.LengthAtLeast(1),
							// The credential plugin supplies the credentials.
							stringvalidator.ConflictsWith(path.MatchRoot("token"), path.MatchRoot("client_certificate")),
						},
					},
					"args": schema.ListAttribute{
						Optional:            true,
						ElementType:         types.StringType,
						MarkdownDescription: "Arguments of the command.",
					},
					"env": schema.MapAttribute{
						Optional:            true,
						ElementType:         types.StringType,
						MarkdownDescription: "Environment variables added for the command.",
					},
				}},
			},
		},
	}
}

// Configure stores what resources need to build a client on first use. It
// never dials the cluster: the cluster may not exist until this apply creates
// it, and a plan must work offline.
func (p *Provider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var m providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	settings, err := settingsFrom(m, envLookup)
	if err != nil {
		resp.Diagnostics.AddError("Invalid Provider Environment", err.Error())
		return
	}
	clients := engine.NewClients(settings.restConfig, stringOr(m.FieldManager, DefaultFieldManager))
	resp.ResourceData = clients
	resp.DataSourceData = clients
	resp.EphemeralResourceData = clients
}

// Resources are one per agentsandbox.dev kind (resources/).
func (p *Provider) Resources(context.Context) []func() resource.Resource { return resources.All() }

// DataSources read the objects a platform team consumes elsewhere
// (datasources/).
func (p *Provider) DataSources(context.Context) []func() datasource.DataSource {
	return datasources.All()
}

// EphemeralResources claim a sandbox for the length of one run.
func (p *Provider) EphemeralResources(context.Context) []func() ephemeral.EphemeralResource {
	return resources.Ephemeral()
}
