package v1alpha1_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// These tests hold the CRDs generated from this package to what the types
// promise, on a real API server: defaults, validation, immutability, printer
// columns, the category and /scale.

func nodePool(name string) *v1.NodePool {
	return &v1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.NodePoolSpec{
			RuntimeHandler: "runsc",
			// Selects no node, so a running NodePool controller has nothing to
			// clean up and deletes complete at once.
			NodeSelector: map[string]string{"agentsandbox.dev/node-group": "none"},
		},
	}
}

func template(name string) *v1.SandboxTemplate {
	return &v1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1.SandboxTemplateSpec{Image: "ghcr.io/acme/python-sandbox:3.12"},
	}
}

func warmPool(name string) *v1.WarmPool {
	return &v1.WarmPool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1.WarmPoolSpec{TemplateRef: v1.LocalObjectReference{Name: "python"}},
	}
}

func sandbox(name string) *v1.Sandbox {
	return &v1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.SandboxSpec{
			TemplateRef: &v1.LocalObjectReference{Name: "python"},
			Owner:       "alice@example.com",
		},
	}
}

func gitSync(name string) *v1.GitSync {
	return &v1.GitSync{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1.GitSyncSpec{URL: "https://git.example.com/platform/sandboxes.git"},
	}
}

func create(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), obj) })
}

func TestDefaultsAreApplied(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client

	tpl := template(testcluster.Name("defaults"))
	create(t, c, tpl)
	want := v1.SandboxTemplateSpec{
		Image:                  "ghcr.io/acme/python-sandbox:3.12",
		ImagePullPolicy:        corev1.PullIfNotPresent,
		EnvVarsInjectionPolicy: v1.EnvVarsInjectionDisallowed,
		Resources: v1.Resources{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		},
		SecurityContext: v1.SecurityContext{RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532), FSGroup: ptr.To[int64](65532)},
		Workspace:       v1.Workspace{Size: ptr.To(resource.MustParse("1Gi")), MountPath: "/workspace"},
		Network:         v1.Network{ClusterDNS: ptr.To(false)},
	}
	if diff := cmp.Diff(want, tpl.Spec); diff != "" {
		t.Errorf("template defaults (-want +got):\n%s", diff)
	}

	egress := template(testcluster.Name("egress"))
	egress.Spec.Network = v1.Network{
		Egress: []v1.EgressRule{
			{Hosts: []string{"pypi.org", "*.pythonhosted.org"}, Ports: []v1.NetworkPort{{Port: 443}}},
			{Service: &v1.ServiceReference{Namespace: "models", Name: "vllm"}},
		},
		Endpoints: []v1.Endpoint{{Name: "openai", URL: "https://api.openai.com/v1", Credential: &v1.EndpointCredential{
			SecretRef: v1.SecretKeyReference{Name: "openai", Key: "api-key"}, Prefix: "Bearer ",
		}}},
	}
	create(t, c, egress)
	wantNetwork := v1.Network{
		ClusterDNS: ptr.To(false),
		Egress: []v1.EgressRule{
			{Hosts: []string{"pypi.org", "*.pythonhosted.org"}, Ports: []v1.NetworkPort{{Port: 443, Protocol: "TCP"}}},
			{Service: &v1.ServiceReference{Namespace: "models", Name: "vllm"}},
		},
		Endpoints: []v1.Endpoint{{Name: "openai", URL: "https://api.openai.com/v1", Credential: &v1.EndpointCredential{
			SecretRef: v1.SecretKeyReference{Namespace: v1.SystemNamespace, Name: "openai", Key: "api-key"}, Header: "Authorization", Prefix: "Bearer ",
		}}},
	}
	if diff := cmp.Diff(wantNetwork, egress.Spec.Network); diff != "" {
		t.Errorf("egress by name and endpoint defaults (-want +got):\n%s", diff)
	}

	wp := warmPool(testcluster.Name("defaults"))
	create(t, c, wp)
	if *wp.Spec.Replicas != 1 || wp.Spec.UpdateStrategy.Type != v1.OnReplenishUpdateStrategy || wp.Spec.WhenEmpty != v1.WhenEmptyColdStart {
		t.Errorf("warm pool defaults: replicas %d, strategy %q, whenEmpty %q", *wp.Spec.Replicas, wp.Spec.UpdateStrategy.Type, wp.Spec.WhenEmpty)
	}

	sbx := sandbox(testcluster.Name("defaults"))
	create(t, c, sbx)
	if sbx.Spec.State != v1.SandboxRunning {
		t.Errorf("sandbox state defaulted to %q, want Running", sbx.Spec.State)
	}

	gs := gitSync(testcluster.Name("defaults"))
	create(t, c, gs)
	wantGit := v1.GitSyncSpec{
		URL: gs.Spec.URL, Ref: v1.GitRef{Branch: "main"}, Path: "./", Prune: ptr.To(true), DeletionPolicy: v1.DeletionOrphan,
		Interval: metav1.Duration{Duration: 5 * time.Minute}, Timeout: metav1.Duration{Duration: 2 * time.Minute},
	}
	if diff := cmp.Diff(wantGit, gs.Spec); diff != "" {
		t.Errorf("git sync defaults (-want +got):\n%s", diff)
	}

	np := nodePool(testcluster.Name("defaults"))
	np.Spec.Taints = []v1.NodePoolTaint{{Key: "sandbox.gvisor.dev/runtime", Value: "gvisor"}}
	create(t, c, np)
	if np.Spec.Taints[0].Effect != "NoSchedule" {
		t.Errorf("taint effect defaulted to %q, want NoSchedule", np.Spec.Taints[0].Effect)
	}
}

// TestCRUD creates, reads, updates (spec and status) and deletes one object
// of each kind.
func TestCRUD(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t).Client
	ctx := context.Background()
	cases := []struct {
		kind   string
		obj    client.Object
		update func(client.Object)
		check  func(client.Object) bool
		status func(client.Object)
	}{
		{
			kind: "NodePool",
			obj:  nodePool(testcluster.Name("crud")),
			update: func(o client.Object) {
				o.(*v1.NodePool).Spec.Overhead = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
			},
			check:  func(o client.Object) bool { return o.(*v1.NodePool).Spec.Overhead.Memory().String() == "64Mi" },
			status: func(o client.Object) { o.(*v1.NodePool).Status.ReadyNodes = 2 },
		},
		{
			kind:   "SandboxTemplate",
			obj:    template(testcluster.Name("crud")),
			update: func(o client.Object) { o.(*v1.SandboxTemplate).Spec.Image = "python:3.13" },
			check:  func(o client.Object) bool { return o.(*v1.SandboxTemplate).Spec.Image == "python:3.13" },
			status: func(o client.Object) { o.(*v1.SandboxTemplate).Status.ContentHash = "abc" },
		},
		{
			kind:   "WarmPool",
			obj:    warmPool(testcluster.Name("crud")),
			update: func(o client.Object) { o.(*v1.WarmPool).Spec.Replicas = ptr.To[int32](3) },
			check:  func(o client.Object) bool { return *o.(*v1.WarmPool).Spec.Replicas == 3 },
			status: func(o client.Object) { o.(*v1.WarmPool).Status.ReadyReplicas = 3 },
		},
		{
			kind:   "Sandbox",
			obj:    sandbox(testcluster.Name("crud")),
			update: func(o client.Object) { o.(*v1.Sandbox).Spec.State = v1.SandboxStopped },
			check:  func(o client.Object) bool { return o.(*v1.Sandbox).Spec.State == v1.SandboxStopped },
			status: func(o client.Object) { o.(*v1.Sandbox).Status.Phase = v1.SandboxPhaseStopped },
		},
		{
			kind:   "GitSync",
			obj:    gitSync(testcluster.Name("crud")),
			update: func(o client.Object) { o.(*v1.GitSync).Spec.Suspend = true },
			check:  func(o client.Object) bool { return o.(*v1.GitSync).Spec.Suspend },
			status: func(o client.Object) { o.(*v1.GitSync).Status.LastAppliedRevision = "main@sha1:0123" },
		},
	}
	for _, tc := range cases {
		t.Run(tc.kind, func(t *testing.T) {
			obj := tc.obj
			key := client.ObjectKeyFromObject(obj)
			if err := c.Create(ctx, obj); err != nil {
				t.Fatalf("create: %v", err)
			}
			got := obj.DeepCopyObject().(client.Object)
			if err := c.Get(ctx, key, got); err != nil {
				t.Fatalf("get: %v", err)
			}
			tc.update(got)
			if err := c.Update(ctx, got); err != nil {
				t.Fatalf("update: %v", err)
			}
			if err := c.Get(ctx, key, got); err != nil || !tc.check(got) {
				t.Fatalf("update not persisted (err %v): %+v", err, got)
			}
			if got.GetGeneration() != 2 {
				t.Errorf("generation after a spec update = %d, want 2", got.GetGeneration())
			}
			tc.status(got)
			if err := c.Status().Update(ctx, got); err != nil {
				t.Fatalf("status update: %v", err)
			}
			if got.GetGeneration() != 2 {
				t.Errorf("a status update changed the generation to %d: status must be a subresource", got.GetGeneration())
			}
			if err := c.Delete(ctx, got); err != nil {
				t.Fatalf("delete: %v", err)
			}
			// A Sandbox carries the controller's finalizer from admission,
			// and no controller runs here: it stays, being deleted, until
			// its finalizers are gone.
			if err := c.Get(ctx, key, got); err == nil && len(got.GetFinalizers()) > 0 {
				if got.GetDeletionTimestamp() == nil {
					t.Fatalf("after delete: %s has finalizers %v and no deletion timestamp", tc.kind, got.GetFinalizers())
				}
				got.SetFinalizers(nil)
				if err := c.Update(ctx, got); err != nil {
					t.Fatalf("remove finalizers: %v", err)
				}
			}
			if err := c.Get(ctx, key, got); !apierrors.IsNotFound(err) {
				t.Fatalf("after delete: get returned %v, want NotFound", err)
			}
		})
	}
}
