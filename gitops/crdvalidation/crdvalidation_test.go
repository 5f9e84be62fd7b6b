package crdvalidation_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/crdvalidation"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// valid are objects of every kind the API server accepts; each case below
// changes one of them.
var valid = map[string]string{
	"NodePool": `
apiVersion: agentsandbox.dev/v1alpha1
kind: NodePool
metadata: {name: gvisor}
spec:
  runtimeHandler: runsc
  nodeSelector: {agentsandbox.dev/node-group: gvisor}
  taints: [{key: agentsandbox.dev/runtime, value: gvisor, effect: NoSchedule}]
  overhead: {cpu: 100m, memory: 64Mi}`,
	"SandboxTemplate": `
apiVersion: agentsandbox.dev/v1alpha1
kind: SandboxTemplate
metadata: {name: python}
spec:
  image: python:3.12
  command: [sleep, infinity]
  resources:
    requests: {cpu: 200m, memory: 256Mi}
    limits: {cpu: "2", memory: 2Gi}
  workspace: {persistent: true, size: 5Gi}
  network:
    egress:
    - cidr: 0.0.0.0/0
      except: [10.0.0.0/8]
      ports: [{port: 443}]
  lifecycle: {ttl: 8h, shutdownPolicy: Stop}`,
	"WarmPool": `
apiVersion: agentsandbox.dev/v1alpha1
kind: WarmPool
metadata: {name: python}
spec:
  templateRef: {name: python}
  replicas: 3`,
	"Sandbox": `
apiVersion: agentsandbox.dev/v1alpha1
kind: Sandbox
metadata: {name: scratch}
spec:
  templateRef: {name: python}
  owner: alice@example.com
  ttl: 2h`,
	"GitSync": `
apiVersion: agentsandbox.dev/v1alpha1
kind: GitSync
metadata: {name: platform}
spec:
  url: https://git.example.com/platform.git
  ref: {branch: main}
  path: deploy`,
}

// cases change one valid object: set replaces the value at a dotted path
// (a YAML value), unset removes it.
var cases = []struct {
	name, kind string
	set        map[string]string
	unset      []string
}{
	{name: "valid node pool", kind: "NodePool"},
	{name: "valid template", kind: "SandboxTemplate"},
	{name: "valid warm pool", kind: "WarmPool"},
	{name: "valid sandbox", kind: "Sandbox"},
	{name: "valid git sync", kind: "GitSync"},
	{name: "a taint effect out of its enum", kind: "NodePool", set: map[string]string{"spec.taints": "[{key: k, effect: Sometimes}]"}},
	{name: "a name with capitals", kind: "NodePool", set: map[string]string{"metadata.name": "Bad_Name"}},
	{name: "a name too long for a label", kind: "SandboxTemplate", set: map[string]string{"metadata.name": strings.Repeat("a", 70)}},
	{name: "an invalid label value", kind: "NodePool", set: map[string]string{"metadata.labels": "{team: 'a b'}"}},
	{name: "an invalid annotation key", kind: "WarmPool", set: map[string]string{"metadata.annotations": "{'a/b/c': x}"}},
	{name: "a CIDR that is none", kind: "SandboxTemplate", set: map[string]string{"spec.network.egress": "[{cidr: 300.0.0.0/8}]"}},
	{name: "an egress rule with a CIDR and hosts", kind: "SandboxTemplate", set: map[string]string{"spec.network.egress": "[{cidr: 10.0.0.0/8, hosts: [pypi.org]}]"}},
	{name: "an egress rule with nothing to allow", kind: "SandboxTemplate", set: map[string]string{"spec.network.egress": "[{ports: [{port: 443}]}]"}},
	{name: "an end port before the port", kind: "SandboxTemplate", set: map[string]string{"spec.network.egress": "[{cidr: 0.0.0.0/0, ports: [{port: 443, endPort: 80}]}]"}},
	{name: "a resource that is not cpu, memory or storage", kind: "SandboxTemplate", set: map[string]string{"spec.resources.requests": "{gpu: '1'}"}},
	{name: "requests above limits", kind: "SandboxTemplate", set: map[string]string{"spec.resources.requests": "{cpu: '4'}"}},
	{name: "a storage class on a scratch workspace", kind: "SandboxTemplate", set: map[string]string{"spec.workspace": "{persistent: false, storageClassName: fast}"}},
	{name: "an empty command word", kind: "SandboxTemplate", set: map[string]string{"spec.command": "[sleep, '']"}},
	{name: "a shutdown policy out of its enum", kind: "SandboxTemplate", set: map[string]string{"spec.lifecycle.shutdownPolicy": "Pause"}},
	{name: "an image missing", kind: "SandboxTemplate", unset: []string{"spec.image"}},
	{name: "negative replicas", kind: "WarmPool", set: map[string]string{"spec.replicas": "-1"}},
	{name: "a pool with no template", kind: "WarmPool", unset: []string{"spec.templateRef"}},
	{name: "a sandbox of a template and a pool", kind: "Sandbox", set: map[string]string{"spec.warmPoolRef": "{name: python}"}},
	{name: "a sandbox of neither", kind: "Sandbox", unset: []string{"spec.templateRef"}},
	{name: "a shutdown time and a ttl", kind: "Sandbox", set: map[string]string{"spec.shutdownTime": "'2030-01-01T00:00:00Z'"}},
	{name: "a path out of the repository", kind: "GitSync", set: map[string]string{"spec.path": "deploy/../../etc"}},
	{name: "a branch and a tag", kind: "GitSync", set: map[string]string{"spec.ref": "{branch: main, tag: v1}"}},
	{name: "two errors at once", kind: "SandboxTemplate", set: map[string]string{"metadata.name": "Two_Errors", "spec.lifecycle.shutdownPolicy": "Pause"}},
}

// TestRefusesWhatTheAPIServerRefuses runs every case through the
// Validator and through a dry-run server-side apply (as the GitSync
// applier writes) and compares: the same verdict, and when the API server
// answers with field errors, the same ones.
func TestRefusesWhatTheAPIServerRefuses(t *testing.T) {
	cluster := testcluster.Get(t)
	validator, err := crdvalidation.New()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	refused := 0
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := object(t, tc.kind, tc.set, tc.unset)
			got := messages(validator.Validate(ctx, obj))

			err := cluster.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj.DeepCopy()),
				client.DryRunAll, client.FieldOwner(testcluster.FieldManager))
			want, answered := serverMessages(err)
			switch {
			case err == nil && len(got) > 0:
				t.Fatalf("the API server accepts it; the validator refuses it:\n%s", strings.Join(got, "\n"))
			case err != nil && len(got) == 0:
				t.Fatalf("the API server refuses it (%v); the validator accepts it", err)
			case answered && !slices.Equal(got, want):
				t.Errorf("the validator's errors:\n%s\nthe API server's:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if err != nil {
				refused++
			}
		})
	}
	// The changed objects are all invalid: a schema the API server stopped
	// enforcing would pass every comparison above.
	invalid := 0
	for _, tc := range cases {
		if len(tc.set)+len(tc.unset) > 0 {
			invalid++
		}
	}
	if refused != invalid {
		t.Errorf("the API server refused %d of the %d invalid cases", refused, invalid)
	}
}

// TestValidateLeavesTheObjectAlone checks that defaulting works on a copy:
// the applier applies the declaration as written.
func TestValidateLeavesTheObjectAlone(t *testing.T) {
	validator, err := crdvalidation.New()
	if err != nil {
		t.Fatal(err)
	}
	obj := object(t, "WarmPool", nil, nil)
	before := obj.DeepCopy()
	if errs := validator.Validate(context.Background(), obj); len(errs) > 0 {
		t.Fatal(errs)
	}
	if fmt.Sprint(obj.Object) != fmt.Sprint(before.Object) {
		t.Errorf("Validate changed the object:\n%v\nwas\n%v", obj.Object, before.Object)
	}
}

func TestAnotherKindIsNamed(t *testing.T) {
	validator, err := crdvalidation.New()
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion("v1")
	obj.SetKind("ConfigMap")
	errs := validator.Validate(context.Background(), obj)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `"v1 ConfigMap"`) || !strings.Contains(errs[0].Error(), "agentsandbox.dev/v1alpha1 SandboxTemplate") {
		t.Errorf("errors for a kind of another API: %v", errs)
	}
}

// object is the valid object of kind with the case's changes.
func object(t *testing.T, kind string, set map[string]string, unset []string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{Object: decode(t, valid[kind]).(map[string]any)}
	for path, value := range set {
		v := decode(t, value)
		if err := unstructured.SetNestedField(obj.Object, v, strings.Split(path, ".")...); err != nil {
			t.Fatal(err)
		}
	}
	for _, path := range unset {
		unstructured.RemoveNestedField(obj.Object, strings.Split(path, ".")...)
	}
	return obj
}

// decode decodes YAML as the declarations package does: integers as int64.
func decode(t *testing.T, text string) any {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(js, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// messages are errs as the API server words its causes, sorted.
func messages(errs field.ErrorList) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, e.Field+": "+e.ErrorBody())
	}
	slices.Sort(out)
	return out
}

// serverMessages are the field causes of an Invalid answer, sorted, and
// whether err was one.
func serverMessages(err error) ([]string, bool) {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !apierrors.IsInvalid(err) || status.Status().Details == nil {
		return nil, false
	}
	var out []string
	for _, c := range status.Status().Details.Causes {
		out = append(out, c.Field+": "+c.Message)
	}
	slices.Sort(out)
	return out, true
}
