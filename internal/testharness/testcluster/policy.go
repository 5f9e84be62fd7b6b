package testcluster

import (
	"context"
	"fmt"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DenyCreates installs a ValidatingAdmissionPolicy, bound to deny, that
// refuses creating group's resource unless the CEL expression holds,
// answering message; it is removed when the test ends. A policy takes a
// moment to be in force, so DenyCreates returns once probe, a create the
// policy refuses, fails with message.
func (c *Cluster) DenyCreates(t testing.TB, group, resource, expression, message string, probe func() error) {
	t.Helper()
	ctx := context.Background()
	name := Name("deny")
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: []string{resource}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: expression, Message: message}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	for _, obj := range []client.Object{policy, binding} {
		if err := c.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Client.Delete(ctx, obj) })
	}
	Eventually(t, "the policy "+name+" in force", func() (bool, string) {
		err := probe()
		return err != nil && strings.Contains(err.Error(), message), fmt.Sprintf("the probe's create answered %v", err)
	})
}
