package v1alpha1_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// readCRD reads the generated CRD of a resource (config/crd/bases).
func readCRD(t *testing.T, resource string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile("../../config/crd/bases/agentsandbox.dev_" + resource + ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

// TestDefaultsMatchTheCRD holds the Go defaults to the CRD's
// +kubebuilder:default markers, so that code reading an object that was
// never defaulted (a declaration, a plan) agrees with the API server.
func TestDefaultsMatchTheCRD(t *testing.T) {
	crd := readCRD(t, "warmpools")
	replicas := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["replicas"]
	if replicas.Default == nil || string(replicas.Default.Raw) != "1" || v1.DefaultWarmPoolReplicas != 1 {
		t.Errorf("spec.replicas defaults to %v in the CRD, DefaultWarmPoolReplicas is %d", replicas.Default, v1.DefaultWarmPoolReplicas)
	}
	if got := (&v1.WarmPool{}).DesiredReplicas(); got != v1.DefaultWarmPoolReplicas {
		t.Errorf("DesiredReplicas of a pool without replicas: %d", got)
	}
	if got := (&v1.WarmPool{Spec: v1.WarmPoolSpec{Replicas: ptr.To[int32](0)}}).DesiredReplicas(); got != 0 {
		t.Errorf("DesiredReplicas of a pool of 0: %d", got)
	}

	crd = readCRD(t, "sandboxtemplates")
	workspace := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["workspace"].Properties
	for field, want := range map[string]string{"size": v1.DefaultWorkspaceSize, "mountPath": v1.DefaultWorkspaceMountPath} {
		if d := workspace[field].Default; d == nil || string(d.Raw) != `"`+want+`"` {
			t.Errorf("spec.workspace.%s defaults to %v in the CRD, the Go default is %q", field, d, want)
		}
	}
	empty := v1.Workspace{}
	if size := empty.SizeOrDefault(); size.String() != v1.DefaultWorkspaceSize || empty.MountPathOrDefault() != v1.DefaultWorkspaceMountPath {
		t.Errorf("an empty workspace: size %s, mount path %q", size.String(), empty.MountPathOrDefault())
	}

	resources := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["resources"]
	var defaulted struct {
		Limits map[string]string `json:"limits"`
	}
	if resources.Default == nil || json.Unmarshal(resources.Default.Raw, &defaulted) != nil || defaulted.Limits["memory"] != v1.DefaultMemoryLimit {
		t.Errorf("spec.resources defaults to %v in the CRD, DefaultMemoryLimit is %s", resources.Default, v1.DefaultMemoryLimit)
	}
	limits := resources.Properties["limits"]
	for name, value := range map[string]string{"DefaultMemoryLimit": v1.DefaultMemoryLimit + " (", "DefaultEphemeralStorage": v1.DefaultEphemeralStorage + ","} {
		if !strings.Contains(strings.Join(strings.Fields(limits.Description), " "), "gets "+value) {
			t.Errorf("spec.resources.limits's description does not give %s (%s): %q", name, value, limits.Description)
		}
	}
	network := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["network"]
	want := strconv.FormatBool(v1.DefaultClusterDNS)
	if d := network.Properties["clusterDNS"].Default; d == nil || string(d.Raw) != want {
		t.Errorf("spec.network.clusterDNS defaults to %v in the CRD, DefaultClusterDNS is %s", d, want)
	}
	if d := network.Default; d == nil || string(d.Raw) != `{"clusterDNS":`+want+`}` {
		t.Errorf("spec.network defaults to %v in the CRD, DefaultClusterDNS is %s", d, want)
	}
	if got := (&v1.Network{}).AllowsClusterDNS(); got != v1.DefaultClusterDNS {
		t.Errorf("AllowsClusterDNS of a network without clusterDNS: %v", got)
	}

	crd = readCRD(t, "gitsyncs")
	gitSync := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties
	for field, want := range map[string]string{
		"path": `"` + v1.DefaultGitSyncPath + `"`, "prune": strconv.FormatBool(v1.DefaultGitSyncPrune),
		"interval": `"` + strings.TrimSuffix(v1.DefaultGitSyncInterval.String(), "0s") + `"`,
		"timeout":  `"` + strings.TrimSuffix(v1.DefaultGitSyncTimeout.String(), "0s") + `"`,
	} {
		if d := gitSync[field].Default; d == nil || string(d.Raw) != want {
			t.Errorf("spec.%s defaults to %v in the CRD, the Go default is %s", field, d, want)
		}
	}
	spec := v1.GitSyncSpec{}
	if spec.PathOrDefault() != v1.DefaultGitSyncPath || spec.IntervalOrDefault() != v1.DefaultGitSyncInterval ||
		spec.TimeoutOrDefault() != v1.DefaultGitSyncTimeout || spec.PruneOrDefault() != v1.DefaultGitSyncPrune {
		t.Errorf("an empty GitSync spec: path %q, interval %s, timeout %s, prune %v",
			spec.PathOrDefault(), spec.IntervalOrDefault(), spec.TimeoutOrDefault(), spec.PruneOrDefault())
	}
}

func TestReadiness(t *testing.T) {
	ready := metav1.Condition{Type: v1.ReadyCondition, Status: metav1.ConditionTrue, Message: "ok"}
	notReady := metav1.Condition{Type: v1.ReadyCondition, Status: metav1.ConditionFalse, Message: "pulling the image"}
	stalled := metav1.Condition{Type: v1.StalledCondition, Status: metav1.ConditionTrue, Message: "image name invalid"}
	meta := metav1.ObjectMeta{Generation: 2}
	pool := func(observed int64, replicas, ready int32, conds ...metav1.Condition) *v1.WarmPool {
		return &v1.WarmPool{ObjectMeta: meta, Spec: v1.WarmPoolSpec{Replicas: ptr.To[int32](3)},
			Status: v1.WarmPoolStatus{ObservedGeneration: observed, Replicas: replicas, ReadyReplicas: ready, Conditions: conds}}
	}
	sandbox := func(state v1.SandboxState, phase v1.SandboxPhase, conds ...metav1.Condition) *v1.Sandbox {
		return &v1.Sandbox{ObjectMeta: meta, Spec: v1.SandboxSpec{State: state},
			Status: v1.SandboxStatus{ObservedGeneration: 2, Phase: phase, Conditions: conds}}
	}
	for name, tc := range map[string]struct {
		obj  v1.Judged
		want v1.Readiness
	}{
		"template ready": {&v1.SandboxTemplate{ObjectMeta: meta, Status: v1.SandboxTemplateStatus{ObservedGeneration: 2, Conditions: []metav1.Condition{ready}}},
			v1.Readiness{Ready: true, Message: "ok"}},
		"template of an older generation": {&v1.SandboxTemplate{ObjectMeta: meta, Status: v1.SandboxTemplateStatus{ObservedGeneration: 1, Conditions: []metav1.Condition{ready}}},
			v1.Readiness{Message: "waiting for the reconciler to see generation 2"}},
		"node pool without conditions": {&v1.NodePool{ObjectMeta: meta, Status: v1.NodePoolStatus{ObservedGeneration: 2}},
			v1.Readiness{Message: "no Ready condition yet"}},
		"gitsync stalled": {&v1.GitSync{ObjectMeta: meta, Status: v1.GitSyncStatus{ObservedGeneration: 2, Conditions: []metav1.Condition{notReady, stalled}}},
			v1.Readiness{Failed: true, Message: "image name invalid"}},
		"pool full":                   {pool(2, 3, 3, ready), v1.Readiness{Ready: true, Message: "3 of 3 members ready"}},
		"pool filling":                {pool(2, 3, 1, notReady), v1.Readiness{Message: "1 of 3 members ready"}},
		"pool with a member too many": {pool(2, 4, 3, ready), v1.Readiness{Message: "3 of 3 members ready"}},
		"pool stalled":                {pool(2, 0, 0, stalled), v1.Readiness{Failed: true, Message: "image name invalid"}},
		"sandbox running":             {sandbox(v1.SandboxRunning, v1.SandboxPhaseRunning, ready), v1.Readiness{Ready: true, Message: "ok"}},
		"sandbox starting":            {sandbox("", v1.SandboxPhaseStarting, notReady), v1.Readiness{Message: "pulling the image"}},
		"sandbox failed":              {sandbox(v1.SandboxRunning, v1.SandboxPhaseFailed, notReady), v1.Readiness{Failed: true, Message: "pulling the image"}},
		"sandbox stopped as declared": {sandbox(v1.SandboxStopped, v1.SandboxPhaseStopped), v1.Readiness{Ready: true, Message: "phase Stopped"}},
		"sandbox stopping":            {sandbox(v1.SandboxStopped, v1.SandboxPhaseStopping), v1.Readiness{Message: "phase Stopping"}},
	} {
		if got := tc.obj.Readiness(); got != tc.want {
			t.Errorf("%s: %+v, want %+v", name, got, tc.want)
		}
	}
}

// TestEveryNotFoundReasonIsAMissingReference: MissingReference names its
// reasons one by one; a new reason that says another object is missing
// must join them (or be renamed), which this test, reading reasons.go,
// makes someone decide.
func TestEveryNotFoundReasonIsAMissingReference(t *testing.T) {
	file, err := parser.ParseFile(token.NewFileSet(), "reasons.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	ast.Inspect(file, func(n ast.Node) bool {
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		reason, _ := strconv.Unquote(lit.Value)
		if strings.HasSuffix(reason, "NotFound") {
			found++
			if !v1.MissingReference(reason) {
				t.Errorf("reason %s is not a MissingReference", reason)
			}
		}
		return true
	})
	if found < 4 {
		t.Errorf("read %d …NotFound reasons in reasons.go, want at least 4", found)
	}
	for _, reason := range []string{v1.ReasonInvalidEgress, v1.ReasonPodReady, "NotFound", ""} {
		if v1.MissingReference(reason) {
			t.Errorf("%q is a MissingReference", reason)
		}
	}
}

// TestMaxSandboxNameLengthIsTheCRDs: the constant clients use and the
// CRD's rule on metadata.name allow the same length.
func TestMaxSandboxNameLengthIsTheCRDs(t *testing.T) {
	data, err := os.ReadFile("../../config/crd/bases/agentsandbox.dev_sandboxes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := "self.metadata.name.size() <= " + strconv.Itoa(v1.MaxSandboxNameLength)
	// The YAML may fold the rule: compare with the white space squeezed.
	if !strings.Contains(strings.Join(strings.Fields(string(data)), " "), want) {
		t.Errorf("the Sandbox CRD has no rule %q", want)
	}
}

// TestSandboxPhasesAreTheCRDs: SandboxPhases, which clients offer as
// choices, are the CRD's enum, in order.
func TestSandboxPhasesAreTheCRDs(t *testing.T) {
	crd := readCRD(t, "sandboxes")
	var enum []string
	for _, e := range crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"].Properties["phase"].Enum {
		enum = append(enum, strings.Trim(string(e.Raw), `"`))
	}
	var phases []string
	for _, p := range v1.SandboxPhases {
		phases = append(phases, string(p))
	}
	if strings.Join(enum, ",") != strings.Join(phases, ",") {
		t.Errorf("the CRD's phases are %v, SandboxPhases %v", enum, phases)
	}
}

// TestUsableIsRunningAndReadyNow: usable means the pod runs and is Ready
// for the current spec; a settled stopped sandbox, an older generation's
// status or a Ready condition without a pod is not.
func TestUsableIsRunningAndReadyNow(t *testing.T) {
	ready := metav1.Condition{Type: v1.ReadyCondition, Status: metav1.ConditionTrue}
	sbx := func(generation int64, phase v1.SandboxPhase, pod string, conds ...metav1.Condition) *v1.Sandbox {
		return &v1.Sandbox{ObjectMeta: metav1.ObjectMeta{Generation: generation},
			Status: v1.SandboxStatus{ObservedGeneration: 2, Phase: phase, PodName: pod, Conditions: conds}}
	}
	for name, tc := range map[string]struct {
		sbx  *v1.Sandbox
		want bool
	}{
		"running and ready":      {sbx(2, v1.SandboxPhaseRunning, "sandbox", ready), true},
		"an older spec's status": {sbx(3, v1.SandboxPhaseRunning, "sandbox", ready), false},
		"stopped":                {sbx(2, v1.SandboxPhaseStopped, "", ready), false},
		"no pod":                 {sbx(2, v1.SandboxPhaseRunning, "", ready), false},
		"running, not yet ready": {sbx(2, v1.SandboxPhaseRunning, "sandbox"), false},
	} {
		if got := tc.sbx.Usable(); got != tc.want {
			t.Errorf("%s: Usable() = %v, want %v", name, got, tc.want)
		}
	}
}
