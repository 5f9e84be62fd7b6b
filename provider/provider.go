// Package provider is the agentsandbox Terraform provider: its configuration
// schema and the lazily built Kubernetes client its resources share.
package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-validators/objectvalidator"
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
	Host                 types.String `tfsdk:"host"`
	Token                types.String `tfsdk:"token"`
	ClientCertificate    types.String `tfsdk:"client_certificate"`
	ClientKey            types.String `tfsdk:"client_key"`
	ClusterCACertificate types.String `tfsdk:"cluster_ca_certificate"`
	Insecure             types.Bool   `tfsdk:"insecure"`
	Exec                 *execModel   `tfsdk:"exec"`
	FieldManager         types.String `tfsdk:"field_manager"`
}

// execModel mirrors the exec credential plugin attribute.
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

// Schema has the connection attributes users of the kubernetes and helm
// providers already know, with the same KUBE_* environment fallbacks.
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
			"host": schema.StringAttribute{
				Optional:            true,
				MarkdownDescription: "URL of the Kubernetes API server, e.g. `https://127.0.0.1:6443`. Environment: `KUBE_HOST`.",
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
			"exec": schema.SingleNestedAttribute{
				Optional:            true,
				MarkdownDescription: "Runs a client-go credential plugin (as `aws eks get-token` or `gke-gcloud-auth-plugin`) for a token.",
				// The credential plugin supplies the credentials.
				Validators: []validator.Object{
					objectvalidator.ConflictsWith(path.MatchRoot("token"), path.MatchRoot("client_certificate")),
				},
				Attributes: map[string]schema.Attribute{
					"api_version": schema.StringAttribute{
						Required:            true,
						MarkdownDescription: "API version of the ExecCredential, e.g. `client.authentication.k8s.io/v1`.",
						Validators: []validator.String{stringvalidator.OneOf(
							"client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")},
					},
					"command": schema.StringAttribute{
						Required:            true,
						MarkdownDescription: "Command to run.",
						Validators:          []validator.String{stringvalidator.LengthAtLeast(1)},
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
				},
			},
			"field_manager": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "Server-side apply field manager of the provider's writes (default `" + DefaultFieldManager + "`). " +
					"Another manager owning a field (a GitSync, kubectl) makes apply fail with a conflict rather than fight over it.",
				Validators: []validator.String{stringvalidator.LengthBetween(1, 128)},
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
	clients := newClients(settings, stringOr(m.FieldManager, DefaultFieldManager))
	resp.ResourceData = clients
	resp.DataSourceData = clients
	resp.EphemeralResourceData = clients
}

// Resources are one per agentsandbox.dev kind.
func (p *Provider) Resources(context.Context) []func() resource.Resource {
	out := make([]func() resource.Resource, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, newResource(k.typeName))
	}
	return out
}

// DataSources read the objects a platform team consumes elsewhere.
func (p *Provider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{
		newDataSource("template"), newDataSource("warm_pool"), newDataSource("sandbox"),
		newSandboxesDataSource,
	}
}

// EphemeralResources claim a sandbox for the length of one run.
func (p *Provider) EphemeralResources(context.Context) []func() ephemeral.EphemeralResource {
	return []func() ephemeral.EphemeralResource{newEphemeralSandbox}
}
