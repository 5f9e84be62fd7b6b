package nodepool

import (
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// desiredRuntimeClass is the RuntimeClass a pool declares, named after it. Its
// scheduling section makes the pods that use it land on the pool's nodes and
// tolerate the pool's taints, so a sandbox template only names the pool and
// never repeats selector or tolerations. The controller reference lets the
// garbage collector delete it with the pool and tells this controller which
// RuntimeClass it may overwrite.
func desiredRuntimeClass(pool *v1.NodePool) *nodev1.RuntimeClass {
	rc := &nodev1.RuntimeClass{
		TypeMeta: metav1.TypeMeta{APIVersion: nodev1.SchemeGroupVersion.String(), Kind: "RuntimeClass"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            pool.Name,
			Labels:          map[string]string{v1.LabelManagedBy: v1.ManagedByValue},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(pool, v1.GroupVersion.WithKind(v1.KindNodePool))},
		},
		Handler: pool.Spec.RuntimeHandler,
		Scheduling: &nodev1.Scheduling{
			NodeSelector: pool.Spec.NodeSelector,
			Tolerations:  tolerations(pool.Spec.Taints),
		},
	}
	if len(pool.Spec.Overhead) > 0 {
		rc.Overhead = &nodev1.Overhead{PodFixed: pool.Spec.Overhead}
	}
	return rc
}

// tolerations tolerates exactly the pool's taints (operator Equal, so a pod of
// this runtime tolerates this pool's taint value and no other pool's).
func tolerations(taints []v1.NodePoolTaint) []corev1.Toleration {
	if len(taints) == 0 {
		return nil
	}
	out := make([]corev1.Toleration, 0, len(taints))
	for _, t := range taints {
		out = append(out, corev1.Toleration{
			Key:      t.Key,
			Operator: corev1.TolerationOpEqual,
			Value:    t.Value,
			Effect:   corev1.TaintEffect(effect(t)),
		})
	}
	return out
}

// effect is the taint's effect with the CRD default applied, so an object
// built in memory (tests, a client that skipped defaulting) behaves like one
// read from the API server.
func effect(t v1.NodePoolTaint) v1.TaintEffect {
	if t.Effect == "" {
		return v1.TaintEffect(corev1.TaintEffectNoSchedule)
	}
	return t.Effect
}
