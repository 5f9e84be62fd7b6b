package nodepool

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

var (
	taintA      = corev1.Taint{Key: "a.test/dedicated", Value: "gvisor", Effect: corev1.TaintEffectNoSchedule}
	taintB      = corev1.Taint{Key: "b.test/runtime", Value: "runsc", Effect: corev1.TaintEffectPreferNoSchedule}
	foreign     = corev1.Taint{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule}
	poolTaintsA = []v1.NodePoolTaint{{Key: taintA.Key, Value: taintA.Value, Effect: "NoSchedule"}}
	poolTaintsB = []v1.NodePoolTaint{{Key: taintB.Key, Value: taintB.Value, Effect: "PreferNoSchedule"}}
)

// node builds a node with the given labels, annotations and taints.
func node(labels, annotations map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: labels, Annotations: annotations},
		Spec:       corev1.NodeSpec{Taints: taints},
	}
}

func member(pool string, owned string, taints ...corev1.Taint) *corev1.Node {
	annotations := map[string]string{}
	if owned != "" {
		annotations[v1.AnnotationOwnedTaints] = owned
	}
	return node(map[string]string{"group": "g", v1.LabelNodePool: pool}, annotations, taints...)
}

const (
	ownsA = `[{"key":"a.test/dedicated","effect":"NoSchedule"}]`
	ownsB = `[{"key":"b.test/runtime","effect":"PreferNoSchedule"}]`
)

// nodeDiff ignores the nil/empty distinction, which the API server does
// not keep either.
var nodeDiff = cmpopts.EquateEmpty()

func TestJoin(t *testing.T) {
	tests := []struct {
		name        string
		taints      []v1.NodePoolTaint
		in, want    *corev1.Node
		wantChanged bool
	}{{
		name:        "a new node gets the label, the taint and the record",
		taints:      poolTaintsA,
		in:          node(map[string]string{"group": "g"}, nil),
		want:        member("gvisor", ownsA, taintA),
		wantChanged: true,
	}, {
		name:        "taints of others are kept",
		taints:      poolTaintsA,
		in:          node(map[string]string{"group": "g"}, nil, foreign),
		want:        member("gvisor", ownsA, foreign, taintA),
		wantChanged: true,
	}, {
		name:   "a member is unchanged",
		taints: poolTaintsA,
		in:     member("gvisor", ownsA, foreign, taintA),
		want:   member("gvisor", ownsA, foreign, taintA),
	}, {
		name:        "a taint dropped from the spec is removed, the new one added",
		taints:      poolTaintsB,
		in:          member("gvisor", ownsA, foreign, taintA),
		want:        member("gvisor", ownsB, foreign, taintB),
		wantChanged: true,
	}, {
		name:        "no taints left: the record goes",
		taints:      nil,
		in:          member("gvisor", ownsA, taintA),
		want:        member("gvisor", ""),
		wantChanged: true,
	}, {
		name:        "an identical taint someone else set stays theirs",
		taints:      poolTaintsA,
		in:          node(map[string]string{"group": "g"}, nil, taintA),
		want:        member("gvisor", "", taintA),
		wantChanged: true,
	}, {
		name:        "a taint of the same key and effect takes the pool's value and becomes the pool's",
		taints:      poolTaintsA,
		in:          node(map[string]string{"group": "g"}, nil, corev1.Taint{Key: taintA.Key, Value: "other", Effect: taintA.Effect}),
		want:        member("gvisor", ownsA, taintA),
		wantChanged: true,
	}, {
		name:        "a record that does not parse owns nothing",
		taints:      nil,
		in:          member("gvisor", "not json", taintA),
		want:        member("gvisor", "", taintA),
		wantChanged: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := testPool(v1.NodePoolSpec{NodeSelector: map[string]string{"group": "g"}, Taints: tt.taints})
			got := tt.in.DeepCopy()
			if changed := join(got, pool); changed != tt.wantChanged {
				t.Errorf("join() changed = %v, want %v", changed, tt.wantChanged)
			}
			if diff := cmp.Diff(tt.want, got, nodeDiff); diff != "" {
				t.Errorf("join() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLeave(t *testing.T) {
	tests := []struct {
		name        string
		in, want    *corev1.Node
		wantChanged bool
	}{{
		name:        "label, owned taints and record go, other taints stay",
		in:          member("gvisor", ownsA, foreign, taintA),
		want:        node(map[string]string{"group": "g"}, nil, foreign),
		wantChanged: true,
	}, {
		name:        "an identical taint the pool did not set stays",
		in:          member("gvisor", "", taintA),
		want:        node(map[string]string{"group": "g"}, nil, taintA),
		wantChanged: true,
	}, {
		name: "a node outside any pool is unchanged",
		in:   node(map[string]string{"group": "g"}, nil, foreign),
		want: node(map[string]string{"group": "g"}, nil, foreign),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in.DeepCopy()
			if changed := leave(got); changed != tt.wantChanged {
				t.Errorf("leave() changed = %v, want %v", changed, tt.wantChanged)
			}
			if diff := cmp.Diff(tt.want, got, nodeDiff); diff != "" {
				t.Errorf("leave() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSelects(t *testing.T) {
	tests := []struct {
		name     string
		selector map[string]string
		labels   map[string]string
		want     bool
	}{
		{"all selector labels match", map[string]string{"a": "1", "b": "2"}, map[string]string{"a": "1", "b": "2", "c": "3"}, true},
		{"one value differs", map[string]string{"a": "1", "b": "2"}, map[string]string{"a": "1", "b": "3"}, false},
		{"a label is missing", map[string]string{"a": "1"}, nil, false},
		{"an empty selector selects nothing", nil, map[string]string{"a": "1"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := testPool(v1.NodePoolSpec{NodeSelector: tt.selector})
			if got := selects(pool, tt.labels); got != tt.want {
				t.Errorf("selects() = %v, want %v", got, tt.want)
			}
		})
	}
}

func withReady(n *corev1.Node, status corev1.ConditionStatus, heartbeat int64) *corev1.Node {
	n = n.DeepCopy()
	n.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: status, LastHeartbeatTime: metav1.Unix(heartbeat, 0),
	}}
	return n
}

func TestNodeReady(t *testing.T) {
	base := node(nil, nil)
	for _, tt := range []struct {
		name string
		node *corev1.Node
		want bool
	}{
		{"Ready=True", withReady(base, corev1.ConditionTrue, 0), true},
		{"Ready=False", withReady(base, corev1.ConditionFalse, 0), false},
		{"Ready=Unknown", withReady(base, corev1.ConditionUnknown, 0), false},
		{"no Ready condition", base, false},
	} {
		if got := nodeReady(tt.node); got != tt.want {
			t.Errorf("%s: nodeReady() = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestNodeChangedPredicate(t *testing.T) {
	old := withReady(member("gvisor", ownsA, taintA), corev1.ConditionTrue, 1)
	relabelled := old.DeepCopy()
	relabelled.Labels["group"] = "other"
	retainted := old.DeepCopy()
	retainted.Spec.Taints = append(retainted.Spec.Taints, foreign)
	for _, tt := range []struct {
		name string
		new  *corev1.Node
		want bool
	}{
		{"heartbeat only", withReady(old, corev1.ConditionTrue, 2), false},
		{"labels changed", relabelled, true},
		{"taints changed", retainted, true},
		{"became not Ready", withReady(old, corev1.ConditionFalse, 2), true},
	} {
		if got := nodeChangedPredicate().Update(event.UpdateEvent{ObjectOld: old, ObjectNew: tt.new}); got != tt.want {
			t.Errorf("%s: predicate = %v, want %v", tt.name, got, tt.want)
		}
	}
}
