package engine

import (
	"context"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

var _ datasource.DataSourceWithConfigure = &sandboxesDataSource{}

// sandboxesDataSource lists sandboxes, filtered the way a platform team
// asks: whose, from which template or pool, in which state.
type sandboxesDataSource struct {
	clients *Clients
}

// SandboxList is agentsandbox_sandboxes: the sandboxes that match filters.
func SandboxList() datasource.DataSource { return &sandboxesDataSource{} }

// sandboxFilters are the filter attributes, in the order they apply.
var sandboxFilters = []string{"owner", "template", "warm_pool", "state"}

func (d *sandboxesDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_sandboxes"
}

func (d *sandboxesDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	k, err := Sandbox.loaded()
	if err != nil {
		resp.Diagnostics.AddError("Schema Error", err.Error())
		return
	}
	item := objectAttributes(k)
	item["name"] = schema.StringAttribute{Computed: true, Description: "Name of the sandbox."}
	resp.Schema = schema.Schema{
		Description: "Lists the sandboxes of the cluster that match every filter given, by name.",
		Attributes: map[string]schema.Attribute{
			"owner": schema.StringAttribute{Optional: true, Description: "Only sandboxes of this owner (spec.owner)."},
			"template": schema.StringAttribute{Optional: true,
				Description: "Only sandboxes of this template: started from it, or claimed from a warm pool of it."},
			"warm_pool": schema.StringAttribute{Optional: true, Description: "Only sandboxes claimed from this warm pool."},
			"state": schema.StringAttribute{Optional: true, Description: "Only sandboxes in this desired state.",
				Validators: []validator.String{stringvalidator.OneOf(string(v1.SandboxRunning), string(v1.SandboxStopped))}},
			"sandboxes": schema.ListNestedAttribute{Computed: true, Description: "The matching sandboxes, by name.",
				NestedObject: schema.NestedAttributeObject{Attributes: item}},
		},
	}
}

func (d *sandboxesDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.clients = clientsFrom(req.ProviderData, &resp.Diagnostics)
}

func (d *sandboxesDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	o, ok := newObjects(d.clients, Sandbox, &resp.Diagnostics)
	if !ok {
		return
	}
	filters := map[string]string{}
	for _, f := range sandboxFilters {
		var v *string
		resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root(f), &v)...)
		if v != nil {
			filters[f] = *v
		}
	}
	if resp.Diagnostics.HasError() {
		return
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(o.kind.schema.GVK.GroupVersion().WithKind(o.kind.schema.GVK.Kind + "List"))
	if err := o.c.List(ctx, list); err != nil {
		resp.Diagnostics.AddError("Kubernetes API Error", o.explain(err, "list", "*").Error())
		return
	}
	poolTemplates := map[string]string{}
	if _, ok := filters["template"]; ok {
		pools, err := d.poolTemplates(ctx, o)
		if err != nil {
			resp.Diagnostics.AddError("Kubernetes API Error", err.Error())
			return
		}
		poolTemplates = pools
	}
	typ, _ := resp.State.Schema.Type().TerraformType(ctx).(tftypes.Object)
	listType, _ := typ.AttributeTypes["sandboxes"].(tftypes.List)
	itemType, _ := listType.ElementType.(tftypes.Object)
	slices.SortFunc(list.Items, func(a, b unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
	var items []tftypes.Value
	for i := range list.Items {
		sbx := &list.Items[i]
		if !matches(sbx, filters, poolTemplates) {
			continue
		}
		v, err := o.kind.objectValue(itemType, sbx, nil)
		if err != nil {
			resp.Diagnostics.AddError("Cannot Read Object", err.Error())
			return
		}
		items = append(items, v)
	}
	attrs := map[string]tftypes.Value{"sandboxes": tftypes.NewValue(listType, items)}
	for _, f := range sandboxFilters {
		if v, ok := filters[f]; ok {
			attrs[f] = tftypes.NewValue(tftypes.String, v)
		} else {
			attrs[f] = tftypes.NewValue(tftypes.String, nil)
		}
	}
	resp.State.Raw = tftypes.NewValue(typ, attrs)
}

// poolTemplates maps each warm pool to its template.
func (d *sandboxesDataSource) poolTemplates(ctx context.Context, o objects) (map[string]string, error) {
	pools := &v1.WarmPoolList{}
	if err := o.c.List(ctx, pools); err != nil {
		return nil, o.explain(err, "list warm pools for", "*")
	}
	out := make(map[string]string, len(pools.Items))
	for _, p := range pools.Items {
		out[p.Name] = p.Spec.TemplateRef.Name
	}
	return out, nil
}

func matches(sbx *unstructured.Unstructured, filters map[string]string, poolTemplates map[string]string) bool {
	field := func(path ...string) string {
		s, _, _ := unstructured.NestedString(sbx.Object, append([]string{"spec"}, path...)...)
		return s
	}
	pool := field("warmPoolRef", "name")
	template := field("templateRef", "name")
	if template == "" && pool != "" {
		template = poolTemplates[pool]
	}
	state := field("state")
	if state == "" {
		state = string(v1.SandboxRunning)
	}
	actual := map[string]string{"owner": field("owner"), "template": template, "warm_pool": pool, "state": state}
	for f, want := range filters {
		if actual[f] != want {
			return false
		}
	}
	return true
}
