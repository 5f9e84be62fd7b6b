package sandbox

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// lifetime is when a sandbox's lifetime ends and what happens then. The
// sandbox's own shutdownTime or ttl wins over the template's default.
type lifetime struct {
	end    *metav1.Time
	policy v1.ShutdownPolicy
}

func lifetimeOf(sbx *v1.Sandbox, tpl *v1.SandboxTemplate) lifetime {
	lt := lifetime{policy: v1.ShutdownPolicyStop}
	var def *v1.Lifecycle
	if tpl != nil {
		def = tpl.Spec.Lifecycle
	}
	if def != nil && def.ShutdownPolicy != "" {
		lt.policy = def.ShutdownPolicy
	}
	if sbx.Spec.ShutdownPolicy != "" {
		lt.policy = sbx.Spec.ShutdownPolicy
	}
	switch {
	case sbx.Spec.ShutdownTime != nil:
		lt.end = sbx.Spec.ShutdownTime.DeepCopy()
	case sbx.Spec.TTL != nil:
		lt.end = &metav1.Time{Time: sbx.CreationTimestamp.Add(sbx.Spec.TTL.Duration)}
	case def != nil && def.TTL != nil:
		lt.end = &metav1.Time{Time: sbx.CreationTimestamp.Add(def.TTL.Duration)}
	}
	return lt
}

// expired reports whether the lifetime has ended at now, and otherwise how
// long until it does (zero without an end).
func (lt lifetime) expired(now time.Time) (bool, time.Duration) {
	if lt.end == nil {
		return false, 0
	}
	left := lt.end.Sub(now)
	return left <= 0, left
}
