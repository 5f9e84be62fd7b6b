package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/agentsandbox/terraform-provider-agentsandbox/provider/crdschema"
)

// Default waits: long enough for a large warm pool to fill or a node pool's
// nodes to join; override with the timeouts attribute.
const (
	defaultWriteTimeout  = 10 * time.Minute
	defaultDeleteTimeout = 10 * time.Minute
)

var (
	_ resource.ResourceWithConfigure   = &objectResource{}
	_ resource.ResourceWithImportState = &objectResource{}
)

// objectResource manages one agentsandbox.dev object; its kind and the CRD
// make it a node pool, template, warm pool, sandbox or Git sync.
type objectResource struct {
	kind    *Kind
	waits   Waits
	clients *Clients
}

// Waits says how a resource type waits for its object to be ready, and
// how its documentation says so.
type Waits struct {
	// ReadyDoc says what ready means for the kind (v1alpha1.Readiness), in
	// the resource's documentation.
	ReadyDoc string
	// OptIn makes wait_for_ready false unless set: for kinds whose
	// readiness depends on things outside the cluster.
	OptIn bool
	// ServerDefaulted are spec attributes an admission step sets when they
	// are left unset, so a plan must not insist on their absence.
	ServerDefaulted map[string]bool
}

// Resource is the resource of kind k, waiting as w says.
func Resource(k *Kind, w Waits) resource.Resource { return &objectResource{kind: k, waits: w} }

func (r *objectResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_" + r.kind.TypeName
}

func (r *objectResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	k, err := r.kind.loaded()
	if err != nil {
		resp.Diagnostics.AddError("Schema Error", err.Error())
		return
	}
	spec, err := crdschema.SpecAttribute(k.schema, r.waits.ServerDefaulted)
	if err != nil {
		resp.Diagnostics.AddError("Schema Error", err.Error())
		return
	}
	attrs := map[string]schema.Attribute{
		"id": schema.StringAttribute{
			Computed:      true,
			Description:   "The object's name, also the import ID.",
			PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
		},
		"name": schema.StringAttribute{
			Required:      true,
			Description:   fmt.Sprintf("Name of the %s (metadata.name), unique in the cluster. Changing it replaces the object.", k.Noun),
			Validators:    k.schema.NameValidators,
			PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
		},
		"labels":      metadataAttribute("Labels"),
		"annotations": metadataAttribute("Annotations"),
		"spec":        spec,
		// An update plans the status read before it, not "known after
		// apply": a plan then shows what the configuration changed, not
		// the whole status and every condition as removed.
		"status": schema.SingleNestedAttribute{
			Computed: true,
			Description: "What the reconciler last observed, as of the last time Terraform read the object " +
				"(create, refresh, import): " + k.schema.Status.Description + " An update keeps the status read " +
				"before it, so plans show only what the configuration changes; the next refresh reads the new one " +
				"(for a value after an update in the same run, read the object with its data source).",
			Attributes:    crdschema.ComputedAttributes(k.schema.Status),
			PlanModifiers: []planmodifier.Object{objectplanmodifier.UseStateForUnknown()},
		},
		"timeouts": timeouts.Attributes(ctx, timeouts.Opts{Create: true, Update: true, Delete: true}),
	}
	description := k.schema.Description + "\n\nApplied with server-side apply; destroy waits until the object and what it owns are gone."
	waitDoc := "Wait after create and update until the " + k.Noun + " is ready (" + r.waits.ReadyDoc +
		"), within timeouts.create / timeouts.update. A stalled object fails the apply at once."
	if r.waits.OptIn {
		waitDoc += " Off by default: the first sync needs a reachable Git server and credentials."
	}
	attrs["wait_for_ready"] = schema.BoolAttribute{
		Optional: true, Computed: true, Default: booldefault.StaticBool(!r.waits.OptIn), Description: waitDoc,
	}
	resp.Schema = schema.Schema{Description: description, Attributes: attrs}
}

func (r *objectResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.clients = clientsFrom(req.ProviderData, &resp.Diagnostics)
}

func (r *objectResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	r.write(ctx, req.Plan, &resp.State, &resp.Diagnostics, true)
}

func (r *objectResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	r.write(ctx, req.Plan, &resp.State, &resp.Diagnostics, false)
}

// write applies the plan, waits for readiness when asked and records what
// the cluster holds. An object that was applied but did not become ready
// is still recorded, so Terraform marks it tainted rather than losing it.
func (r *objectResource) write(ctx context.Context, plan tfsdk.Plan, state *tfsdk.State, diags *diag.Diagnostics, create bool) {
	var t timeouts.Value
	diags.Append(plan.GetAttribute(ctx, path.Root("timeouts"), &t)...)
	limit := t.Update
	if create {
		limit = t.Create
	}
	timeout, d := limit(ctx, defaultWriteTimeout)
	diags.Append(d...)
	o, ok := newObjects(r.clients, r.kind, diags)
	if !ok || diags.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	attrs, ok := rootAttrs(plan.Raw, diags)
	if !ok {
		return
	}
	desired, spec, err := o.kind.desiredObject(attrs)
	if err != nil {
		diags.AddError("Invalid Plan", err.Error())
		return
	}
	name := desired.GetName()
	if create {
		_, err := o.get(ctx, name)
		switch {
		case err == nil:
			diags.AddError("Object Already Exists", fmt.Sprintf(
				"%s %q already exists on the cluster. Import it rather than create it: "+
					"terraform import agentsandbox_%s.<address> %s", o.kind.Noun, name, r.kind.TypeName, name))
			return
		case !apierrors.IsNotFound(err):
			diags.AddError("Kubernetes API Error", err.Error())
			return
		}
	}
	live, err := o.apply(ctx, desired, spec)
	if err != nil {
		diags.AddError("Apply Failed", err.Error())
		return
	}
	tflog.Info(ctx, "applied "+o.kind.Noun, map[string]any{"name": name})
	if waitForReady(attrs) {
		ready, err := o.waitReady(ctx, name)
		if err != nil {
			diags.AddError("Not Ready", err.Error())
		} else {
			live = ready
		}
	}
	r.record(live, attrs, state, diags)
	if !create && !diags.HasError() {
		// The plan promised the status read before the update.
		keepAttribute(state, "status", attrs["status"], diags)
	}
}

// keepAttribute sets one top-level attribute of state to v.
func keepAttribute(state *tfsdk.State, name string, v tftypes.Value, diags *diag.Diagnostics) {
	var attrs map[string]tftypes.Value
	if err := state.Raw.As(&attrs); err != nil {
		diags.AddError("Invalid State", err.Error())
		return
	}
	attrs[name] = v
	state.Raw = tftypes.NewValue(state.Raw.Type(), attrs)
}

// waitForReady reads wait_for_ready, which the schema defaults.
func waitForReady(attrs map[string]tftypes.Value) bool {
	var b bool
	return attrs["wait_for_ready"].As(&b) == nil && b
}

func (r *objectResource) record(live *unstructured.Unstructured, prior map[string]tftypes.Value, state *tfsdk.State, diags *diag.Diagnostics) {
	k, err := r.kind.loaded()
	if err != nil {
		diags.AddError("Schema Error", err.Error())
		return
	}
	typ, _ := state.Schema.Type().TerraformType(context.Background()).(tftypes.Object)
	v, err := k.objectValue(typ, live, prior)
	if err != nil {
		diags.AddError("Cannot Read Object", fmt.Sprintf("%s %q: %v", k.Noun, live.GetName(), err))
		return
	}
	state.Raw = v
}

// Read refreshes the state from the cluster; an object deleted out of band
// leaves the state, so the next plan creates it again.
func (r *objectResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	o, ok := newObjects(r.clients, r.kind, &resp.Diagnostics)
	if !ok {
		return
	}
	attrs, ok := rootAttrs(req.State.Raw, &resp.Diagnostics)
	if !ok {
		return
	}
	var name string
	if err := attrs["name"].As(&name); err != nil {
		resp.Diagnostics.AddError("Invalid State", err.Error())
		return
	}
	live, err := o.get(ctx, name)
	if apierrors.IsNotFound(err) {
		tflog.Info(ctx, o.kind.Noun+" was deleted outside Terraform", map[string]any{"name": name})
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Kubernetes API Error", err.Error())
		return
	}
	r.record(live, attrs, &resp.State, &resp.Diagnostics)
}

func (r *objectResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var t timeouts.Value
	resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("timeouts"), &t)...)
	timeout, diags := t.Delete(ctx, defaultDeleteTimeout)
	resp.Diagnostics.Append(diags...)
	o, ok := newObjects(r.clients, r.kind, &resp.Diagnostics)
	if !ok || resp.Diagnostics.HasError() {
		return
	}
	var name string
	resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("name"), &name)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := o.remove(ctx, name, metav1.DeletePropagationForeground); err != nil {
		resp.Diagnostics.AddError("Delete Failed", err.Error())
	}
}

// ImportState takes the object's name as the ID.
func (r *objectResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("wait_for_ready"), !r.waits.OptIn)...)
}

// rootAttrs splits a plan or state into its attributes.
func rootAttrs(v tftypes.Value, diags *diag.Diagnostics) (map[string]tftypes.Value, bool) {
	var attrs map[string]tftypes.Value
	if err := v.As(&attrs); err != nil {
		diags.AddError("Invalid Terraform Value", err.Error())
		return nil, false
	}
	return attrs, true
}

// clientsFrom takes the provider's Clients from Configure data.
func clientsFrom(data any, diags *diag.Diagnostics) *Clients {
	if data == nil {
		return nil // validation runs before the provider is configured
	}
	c, ok := data.(*Clients)
	if !ok {
		diags.AddError("Unexpected Provider Data", fmt.Sprintf("expected *engine.Clients, got %T", data))
	}
	return c
}
