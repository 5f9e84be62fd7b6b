package engine

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/agentsandbox/terraform-provider-agentsandbox/provider/crdschema"
)

var _ datasource.DataSourceWithConfigure = &objectDataSource{}

// objectDataSource reads one agentsandbox.dev object by name.
type objectDataSource struct {
	kind    *Kind
	clients *Clients
}

// DataSource is the data source of kind k: it reads one object by name.
func DataSource(k *Kind) datasource.DataSource { return &objectDataSource{kind: k} }

func (d *objectDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_" + d.kind.TypeName
}

func (d *objectDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	k, err := d.kind.loaded()
	if err != nil {
		resp.Diagnostics.AddError("Schema Error", err.Error())
		return
	}
	attrs := objectAttributes(k)
	attrs["name"] = schema.StringAttribute{
		Required:    true,
		Description: fmt.Sprintf("Name of the %s to read.", k.Noun),
		Validators:  k.schema.NameValidators,
	}
	resp.Schema = schema.Schema{
		Description: fmt.Sprintf("Reads a %s declared elsewhere (another configuration, a GitSync, kubectl). %s",
			k.Noun, k.schema.Description),
		Attributes: attrs,
	}
}

// objectAttributes are the read-only attributes of an object: id, labels,
// annotations, spec and status.
func objectAttributes(k *Kind) map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"id":          schema.StringAttribute{Computed: true, Description: "The object's name."},
		"labels":      schema.MapAttribute{Computed: true, ElementType: types.StringType, Description: "Labels of the object, without the system's."},
		"annotations": schema.MapAttribute{Computed: true, ElementType: types.StringType, Description: "Annotations of the object, without the system's."},
		"spec": schema.SingleNestedAttribute{Computed: true, Description: k.schema.Spec.Description,
			Attributes: crdschema.DataSourceAttributes(k.schema.Spec)},
		"status": schema.SingleNestedAttribute{Computed: true, Description: k.schema.Status.Description,
			Attributes: crdschema.DataSourceAttributes(k.schema.Status)},
	}
}

func (d *objectDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.clients = clientsFrom(req.ProviderData, &resp.Diagnostics)
}

func (d *objectDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	o, ok := newObjects(d.clients, d.kind, &resp.Diagnostics)
	if !ok {
		return
	}
	var name string
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("name"), &name)...)
	if resp.Diagnostics.HasError() {
		return
	}
	live, err := o.get(ctx, name)
	if apierrors.IsNotFound(err) {
		resp.Diagnostics.AddAttributeError(path.Root("name"), "Not Found", fmt.Sprintf("%s %q does not exist on the cluster", o.kind.Noun, name))
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Kubernetes API Error", err.Error())
		return
	}
	typ, _ := resp.State.Schema.Type().TerraformType(ctx).(tftypes.Object)
	v, err := o.kind.objectValue(typ, live, nil)
	if err != nil {
		resp.Diagnostics.AddError("Cannot Read Object", err.Error())
		return
	}
	resp.State.Raw = v
}
