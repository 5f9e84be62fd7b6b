package nodepool

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// quantities compares resource quantities by value, not by representation.
var quantities = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

func testPool(spec v1.NodePoolSpec) *v1.NodePool {
	return &v1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: "gvisor", UID: "uid-1", Generation: 3},
		Spec:       spec,
	}
}

func TestDesiredRuntimeClass(t *testing.T) {
	owner := metav1.OwnerReference{
		APIVersion: "agentsandbox.dev/v1alpha1", Kind: "NodePool", Name: "gvisor", UID: "uid-1",
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}
	meta := metav1.ObjectMeta{
		Name:            "gvisor",
		Labels:          map[string]string{v1.LabelManagedBy: v1.ManagedByValue},
		OwnerReferences: []metav1.OwnerReference{owner},
	}
	typeMeta := metav1.TypeMeta{APIVersion: "node.k8s.io/v1", Kind: "RuntimeClass"}
	selector := map[string]string{"agentsandbox.dev/node-group": "gvisor"}

	tests := []struct {
		name string
		spec v1.NodePoolSpec
		want *nodev1.RuntimeClass
	}{{
		name: "selector only: no tolerations, no overhead",
		spec: v1.NodePoolSpec{RuntimeHandler: "runsc", NodeSelector: selector},
		want: &nodev1.RuntimeClass{
			TypeMeta: typeMeta, ObjectMeta: meta, Handler: "runsc",
			Scheduling: &nodev1.Scheduling{NodeSelector: selector},
		},
	}, {
		name: "taints become Equal tolerations, the default effect is NoSchedule",
		spec: v1.NodePoolSpec{
			RuntimeHandler: "kata-qemu", NodeSelector: selector,
			Taints: []v1.NodePoolTaint{
				{Key: "agentsandbox.dev/runtime", Value: "kata", Effect: "NoExecute"},
				{Key: "dedicated"},
			},
		},
		want: &nodev1.RuntimeClass{
			TypeMeta: typeMeta, ObjectMeta: meta, Handler: "kata-qemu",
			Scheduling: &nodev1.Scheduling{NodeSelector: selector, Tolerations: []corev1.Toleration{
				{Key: "agentsandbox.dev/runtime", Operator: corev1.TolerationOpEqual, Value: "kata", Effect: corev1.TaintEffectNoExecute},
				{Key: "dedicated", Operator: corev1.TolerationOpEqual, Effect: corev1.TaintEffectNoSchedule},
			}},
		},
	}, {
		name: "overhead becomes podFixed",
		spec: v1.NodePoolSpec{
			RuntimeHandler: "runsc", NodeSelector: selector,
			Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		},
		want: &nodev1.RuntimeClass{
			TypeMeta: typeMeta, ObjectMeta: meta, Handler: "runsc",
			Scheduling: &nodev1.Scheduling{NodeSelector: selector},
			Overhead: &nodev1.Overhead{PodFixed: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi"),
			}},
		},
	}, {
		name: "an empty overhead is no overhead",
		spec: v1.NodePoolSpec{RuntimeHandler: "runsc", NodeSelector: selector, Overhead: corev1.ResourceList{}},
		want: &nodev1.RuntimeClass{
			TypeMeta: typeMeta, ObjectMeta: meta, Handler: "runsc",
			Scheduling: &nodev1.Scheduling{NodeSelector: selector},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := desiredRuntimeClass(testPool(tt.spec))
			if diff := cmp.Diff(tt.want, got, quantities); diff != "" {
				t.Errorf("desiredRuntimeClass() (-want +got):\n%s", diff)
			}
		})
	}
}
