package v1alpha1_test

import (
	"context"
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// TestCategoryListsEveryKind checks that `kubectl get agentsandbox` shows
// objects of all five kinds.
func TestCategoryListsEveryKind(t *testing.T) {
	t.Parallel()
	cl := testcluster.Get(t)
	objs := []client.Object{
		nodePool(testcluster.Name("category")), template(testcluster.Name("category")),
		warmPool(testcluster.Name("category")), sandbox(testcluster.Name("category")),
		gitSync(testcluster.Name("category")),
	}
	for _, o := range objs {
		create(t, cl.Client, o)
	}
	out := cl.Kubectl(t, "get", v1.Category, "-o", "name")
	for _, want := range []string{
		"nodepool.agentsandbox.dev/" + objs[0].GetName(),
		"sandboxtemplate.agentsandbox.dev/" + objs[1].GetName(),
		"warmpool.agentsandbox.dev/" + objs[2].GetName(),
		"sandbox.agentsandbox.dev/" + objs[3].GetName(),
		"gitsync.agentsandbox.dev/" + objs[4].GetName(),
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("kubectl get %s does not list %s:\n%s", v1.Category, want, out)
		}
	}
}

// TestPrinterColumns checks the columns kubectl prints, by short name, for
// each kind.
func TestPrinterColumns(t *testing.T) {
	t.Parallel()
	cl := testcluster.Get(t)
	sbx := sandbox(testcluster.Name("columns"))
	create(t, cl.Client, sbx)
	wp := with(warmPool(testcluster.Name("columns")), func(o *v1.WarmPool) { o.Spec.Replicas = ptr.To[int32](4) })
	create(t, cl.Client, wp)
	tpl := template(testcluster.Name("columns"))
	create(t, cl.Client, tpl)
	np := nodePool(testcluster.Name("columns"))
	create(t, cl.Client, np)
	gs := gitSync(testcluster.Name("columns"))
	create(t, cl.Client, gs)

	cases := []struct {
		shortName, name string
		header          []string
		row             []string
	}{
		{"sbx", sbx.Name, []string{"NAME", "OWNER", "STATE", "PHASE", "LAUNCH", "NAMESPACE", "POD IP", "READY", "AGE"},
			[]string{sbx.Name, "alice@example.com", "Running"}},
		{"sbxwp", wp.Name, []string{"NAME", "TEMPLATE", "DESIRED", "CURRENT", "READY", "STRATEGY", "AGE"},
			[]string{wp.Name, "python", "4", "OnReplenish"}},
		{"sbxt", tpl.Name, []string{"NAME", "IMAGE", "NODE POOL", "PERSISTENT", "READY", "AGE"},
			[]string{tpl.Name, "ghcr.io/acme/python-sandbox:3.12", "false"}},
		{"sbxnp", np.Name, []string{"NAME", "HANDLER", "NODES", "READY NODES", "READY", "AGE"},
			[]string{np.Name, "runsc"}},
		{"gsync", gs.Name, []string{"NAME", "URL", "REVISION", "SUSPENDED", "READY", "STATUS", "AGE"},
			[]string{gs.Name, gs.Spec.URL, "false"}},
	}
	for _, tc := range cases {
		t.Run(tc.shortName, func(t *testing.T) {
			out := cl.Kubectl(t, "get", tc.shortName, tc.name, "-o", "wide")
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 2 {
				t.Fatalf("want a header and one row, got:\n%s", out)
			}
			header := strings.Join(strings.Fields(lines[0]), " ")
			if want := strings.Join(tc.header, " "); header != want {
				t.Errorf("header %q, want %q", header, want)
			}
			for _, cell := range tc.row {
				if !strings.Contains(" "+lines[1]+" ", " "+cell+" ") {
					t.Errorf("row %q lacks %q", lines[1], cell)
				}
			}
		})
	}
}

// TestWarmPoolScaleSubresource drives replicas through /scale, as an HPA
// does, and reads the selector back from it.
func TestWarmPoolScaleSubresource(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client
	ctx := context.Background()
	wp := warmPool(testcluster.Name("scale"))
	create(t, c, wp)

	wp.Status.Replicas, wp.Status.Selector = 1, v1.LabelWarmPool+"="+wp.Name
	if err := c.Status().Update(ctx, wp); err != nil {
		t.Fatalf("status update: %v", err)
	}
	scale := &autoscalingv1.Scale{}
	if err := c.SubResource("scale").Get(ctx, wp, scale); err != nil {
		t.Fatalf("get /scale: %v", err)
	}
	if scale.Spec.Replicas != 1 || scale.Status.Replicas != 1 || scale.Status.Selector != wp.Status.Selector {
		t.Errorf("scale = %+v, want spec 1, status 1, selector %q", scale, wp.Status.Selector)
	}
	scale.Spec.Replicas = 7
	if err := c.SubResource("scale").Update(ctx, wp, client.WithSubResourceBody(scale)); err != nil {
		t.Fatalf("update /scale: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(wp), wp); err != nil {
		t.Fatal(err)
	}
	if *wp.Spec.Replicas != 7 {
		t.Errorf("spec.replicas = %d after scaling to 7", *wp.Spec.Replicas)
	}
	scale.Spec.Replicas = -2
	if err := c.SubResource("scale").Update(ctx, wp, client.WithSubResourceBody(scale)); err == nil {
		t.Errorf("scaling to -2 was accepted")
	}
}

// TestExplainDescribesEgressByName: `kubectl explain` shows the doc
// comments of the egress fields, as users read them.
func TestExplainDescribesEgressByName(t *testing.T) {
	t.Parallel()
	cl := testcluster.Get(t)
	for field, want := range map[string]string{
		"sandboxtemplate.spec.network.egress.hosts":                   "*.example.com for every name below",
		"sandboxtemplate.spec.network.egress.service":                 "follows the",
		"sandboxtemplate.spec.network.endpoints":                      "AGENTSANDBOX_ENDPOINT_<NAME>",
		"sandboxtemplate.spec.network.endpoints.credential.secretRef": "should not",
	} {
		out := cl.Kubectl(t, "explain", field)
		if !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
			t.Errorf("kubectl explain %s does not say %q:\n%s", field, want, out)
		}
	}
}
