package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/ephemeral/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/ephemeralvalidator"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

const (
	// defaultEphemeralTTL bounds the life of a sandbox whose run died
	// before it could release it: the controller deletes it then.
	defaultEphemeralTTL = time.Hour
	defaultOpenTimeout  = 5 * time.Minute
	// closeTimeout bounds the wait for the released Sandbox to be gone:
	// OpenTofu gives Close 10 seconds. Its namespace is deleted after it,
	// by garbage collection.
	closeTimeout = 8 * time.Second
	privateName  = "sandbox"
)

var (
	_ ephemeral.EphemeralResourceWithClose            = &ephemeralSandbox{}
	_ ephemeral.EphemeralResourceWithConfigure        = &ephemeralSandbox{}
	_ ephemeral.EphemeralResourceWithConfigValidators = &ephemeralSandbox{}
)

// ephemeralSandbox claims a sandbox for one Terraform run and deletes it
// when the run closes it: a throwaway environment for a pipeline.
type ephemeralSandbox struct {
	clients *Clients
}

type ephemeralSandboxModel struct {
	Name          types.String   `tfsdk:"name"`
	WarmPool      types.String   `tfsdk:"warm_pool"`
	Template      types.String   `tfsdk:"template"`
	Owner         types.String   `tfsdk:"owner"`
	TTL           types.String   `tfsdk:"ttl"`
	Namespace     types.String   `tfsdk:"namespace"`
	PodName       types.String   `tfsdk:"pod_name"`
	PodIP         types.String   `tfsdk:"pod_ip"`
	LaunchType    types.String   `tfsdk:"launch_type"`
	LaunchMessage types.String   `tfsdk:"launch_message"`
	Timeouts      timeouts.Value `tfsdk:"timeouts"`
}

// EphemeralSandbox is the ephemeral agentsandbox_sandbox: a sandbox opened for
// one run and deleted at its end.
func EphemeralSandbox() ephemeral.EphemeralResource { return &ephemeralSandbox{} }

func (e *ephemeralSandbox) Metadata(_ context.Context, req ephemeral.MetadataRequest, resp *ephemeral.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_sandbox"
}

func (e *ephemeralSandbox) Schema(ctx context.Context, _ ephemeral.SchemaRequest, resp *ephemeral.SchemaResponse) {
	k, err := Sandbox.loaded()
	if err != nil {
		resp.Diagnostics.AddError("Schema Error", err.Error())
		return
	}
	refName := k.schema.Spec.Child("warm_pool_ref").Child("name").StringValidators
	resp.Schema = schema.Schema{
		Description: "Claims a sandbox for the length of one Terraform run and deletes it when the run ends. " +
			"Nothing is written to state. A run that dies before it can release the sandbox leaves it to its ttl, " +
			"after which the controller deletes it. With a fixed name, each open waits until the sandbox an " +
			"earlier open of that name released, and its namespace, are gone (OpenTofu opens ephemeral resources " +
			"during plan and again during apply), so a sandbox is never handed out in its predecessor's " +
			"terminating namespace; leave name unset for a unique name that never waits.",
		Attributes: map[string]schema.Attribute{
			"name": schema.StringAttribute{Optional: true, Computed: true, Validators: k.schema.NameValidators,
				Description: "Name of the Sandbox; a random ephemeral-… name when unset."},
			"warm_pool": schema.StringAttribute{Optional: true, Validators: refName,
				Description: "Warm pool to claim from. Exactly one of warm_pool and template."},
			"template": schema.StringAttribute{Optional: true, Validators: refName,
				Description: "Template to start the sandbox from (a cold start). Exactly one of warm_pool and template."},
			"owner": schema.StringAttribute{Optional: true, Computed: true,
				Description: "Owner of the sandbox; the identity Terraform connects as when unset (set by admission)."},
			"ttl": schema.StringAttribute{Optional: true, Computed: true,
				Description: "Lifetime after which the controller deletes the sandbox if the run has not; default 1h.",
				Validators:  k.schema.Spec.Child("ttl").StringValidators},
			"namespace":      schema.StringAttribute{Computed: true, Description: "Namespace of the sandbox: sandbox-<name> for a cold start, the warm pool member's sandbox-wp-<pool>-<id> for a warm claim."},
			"pod_name":       schema.StringAttribute{Computed: true, Description: "Pod of the sandbox."},
			"pod_ip":         schema.StringAttribute{Computed: true, Description: "IP of the sandbox's pod."},
			"launch_type":    schema.StringAttribute{Computed: true, Description: "Warm (claimed from the pool) or Cold (started on demand)."},
			"launch_message": schema.StringAttribute{Computed: true, Description: "Why the sandbox was launched the way it was."},
			"timeouts":       timeouts.Attributes(ctx),
		},
	}
}

func (e *ephemeralSandbox) ConfigValidators(context.Context) []ephemeral.ConfigValidator {
	return []ephemeral.ConfigValidator{
		ephemeralvalidator.ExactlyOneOf(path.MatchRoot("warm_pool"), path.MatchRoot("template")),
	}
}

func (e *ephemeralSandbox) Configure(_ context.Context, req ephemeral.ConfigureRequest, resp *ephemeral.ConfigureResponse) {
	e.clients = clientsFrom(req.ProviderData, &resp.Diagnostics)
}

// Open creates the Sandbox and waits until it is Ready. A sandbox that does
// not become Ready is deleted again before the error is returned.
func (e *ephemeralSandbox) Open(ctx context.Context, req ephemeral.OpenRequest, resp *ephemeral.OpenResponse) {
	var m ephemeralSandboxModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	o, ok := newObjects(e.clients, Sandbox, &resp.Diagnostics)
	if !ok || resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := m.Timeouts.Open(ctx, defaultOpenTimeout)
	resp.Diagnostics.Append(diags...)
	sbx, err := m.sandbox()
	if err != nil || resp.Diagnostics.HasError() {
		resp.Diagnostics.AddError("Invalid Configuration", fmt.Sprint(err))
		return
	}
	openCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := e.create(openCtx, o, sbx); err != nil {
		resp.Diagnostics.AddError("Claim Failed", err.Error())
		return
	}
	tflog.Info(ctx, "claimed sandbox", map[string]any{"name": sbx.Name})
	data, _ := json.Marshal(sbx.Name)
	resp.Diagnostics.Append(resp.Private.SetKey(ctx, privateName, data)...)
	live, err := o.waitReady(openCtx, sbx.Name)
	if err != nil {
		resp.Diagnostics.AddError("Sandbox Not Ready", err.Error())
		if err := e.release(ctx, o, sbx.Name); err != nil {
			resp.Diagnostics.AddWarning("Release Failed", fmt.Sprintf("the sandbox %s that did not become ready was not deleted: %v; delete it yourself", sbx.Name, err))
		}
		return
	}
	m.fill(live)
	resp.Diagnostics.Append(resp.Result.Set(ctx, &m)...)
}

// create creates the Sandbox. A fixed name may still belong to the
// sandbox an earlier Close of the same run released (OpenTofu opens an
// ephemeral resource during plan and again during apply): create waits for
// that one to be gone. Its namespace may still be terminating after that;
// the controller then keeps the new sandbox NotReady (NamespaceTerminating)
// until the namespace is gone and a new one is made, so the Ready wait
// after create never hands out the old namespace.
func (e *ephemeralSandbox) create(ctx context.Context, o objects, sbx *v1.Sandbox) error {
	for {
		err := o.c.Create(ctx, sbx.DeepCopy(), client.FieldOwner(o.fieldManager))
		if !apierrors.IsAlreadyExists(err) {
			if err != nil {
				return o.explain(err, "create", sbx.Name)
			}
			return nil
		}
		live, getErr := o.get(ctx, sbx.Name)
		switch {
		case apierrors.IsNotFound(getErr):
			continue // gone meanwhile
		case getErr != nil:
			return o.explain(getErr, "get", sbx.Name)
		case live.GetDeletionTimestamp() == nil:
			return fmt.Errorf("sandbox %q already exists and is not being deleted: this run did not create it, "+
				"so it is not this ephemeral resource's to use; choose another name, or leave name unset for a unique one", sbx.Name)
		}
		tflog.Info(ctx, "waiting for the earlier sandbox of the same name to be deleted", map[string]any{"name": sbx.Name})
		if err := o.waitGone(ctx, sbx.Name); err != nil {
			return fmt.Errorf("sandbox %q of an earlier open is still being deleted: %w", sbx.Name, err)
		}
	}
}

// Close deletes the Sandbox and waits until it is gone; its namespace and
// pod follow by garbage collection.
func (e *ephemeralSandbox) Close(ctx context.Context, req ephemeral.CloseRequest, resp *ephemeral.CloseResponse) {
	data, diags := req.Private.GetKey(ctx, privateName)
	resp.Diagnostics.Append(diags...)
	var name string
	if err := json.Unmarshal(data, &name); err != nil || name == "" {
		return // Open failed before it created anything
	}
	o, ok := newObjects(e.clients, Sandbox, &resp.Diagnostics)
	if !ok {
		return
	}
	if err := e.release(ctx, o, name); err != nil {
		resp.Diagnostics.AddError("Release Failed", err.Error())
	}
}

func (e *ephemeralSandbox) release(ctx context.Context, o objects, name string) error {
	ctx, cancel := context.WithTimeout(ctx, closeTimeout)
	defer cancel()
	tflog.Info(ctx, "releasing sandbox", map[string]any{"name": name})
	return o.remove(ctx, name, metav1.DeletePropagationBackground)
}

// sandbox is the Sandbox the configuration asks for.
func (m *ephemeralSandboxModel) sandbox() (*v1.Sandbox, error) {
	name := m.Name.ValueString()
	if name == "" {
		b := make([]byte, 5)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		name = "ephemeral-" + hex.EncodeToString(b)
	}
	ttl := defaultEphemeralTTL
	if s := m.TTL.ValueString(); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return nil, fmt.Errorf("ttl: %w", err)
		}
		ttl = d
	}
	sbx := &v1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.SandboxSpec{
			Owner:          m.Owner.ValueString(),
			TTL:            &metav1.Duration{Duration: ttl},
			ShutdownPolicy: v1.ShutdownPolicyDelete,
		},
	}
	if pool := m.WarmPool.ValueString(); pool != "" {
		sbx.Spec.WarmPoolRef = &v1.LocalObjectReference{Name: pool}
	} else {
		sbx.Spec.TemplateRef = &v1.LocalObjectReference{Name: m.Template.ValueString()}
	}
	return sbx, nil
}

// fill copies what the claim produced into the result.
func (m *ephemeralSandboxModel) fill(live *unstructured.Unstructured) {
	str := func(fields ...string) types.String {
		s, _, _ := unstructured.NestedString(live.Object, fields...)
		return types.StringValue(s)
	}
	m.Name = types.StringValue(live.GetName())
	m.Owner = str("spec", "owner")
	m.TTL = str("spec", "ttl")
	m.Namespace = str("status", "namespace")
	m.PodName = str("status", "podName")
	m.PodIP = str("status", "podIP")
	m.LaunchType = str("status", "launchType")
	m.LaunchMessage = str("status", "launchMessage")
}
