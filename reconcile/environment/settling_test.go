package environment

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestNamespaceSettling tells the API server's refusals of a pod in a
// namespace the controller manager has not completed from other refusals,
// by the messages the admission plugins give.
func TestNamespaceSettling(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	for _, tc := range []struct {
		name       string
		err        error
		waitingFor string // "" when the error is no such refusal
	}{
		{"no default ServiceAccount yet", apierrors.NewForbidden(pods, "sandbox",
			errors.New(`error looking up service account sandbox-x/default: serviceaccount "default" not found`)), "default ServiceAccount"},
		{"quota not counted yet", apierrors.NewForbidden(pods, "sandbox",
			errors.New("status unknown for quota: sandbox, resources: pods")), "ResourceQuota"},
		{"quota exceeded", apierrors.NewForbidden(pods, "sandbox",
			errors.New("exceeded quota: sandbox, requested: pods=1, used: pods=2, limited: pods=2")), ""},
		{"not a refusal", errors.New("status unknown for quota: sandbox"), ""},
		{"no error", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			waitingFor, ok := NamespaceSettling(tc.err)
			if ok != (tc.waitingFor != "") || !strings.Contains(waitingFor, tc.waitingFor) {
				t.Errorf("NamespaceSettling(%v) = %q, %v; want one mentioning %q", tc.err, waitingFor, ok, tc.waitingFor)
			}
		})
	}
}
