package applier

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestAdmitsCreate(t *testing.T) {
	templates := schema.GroupResource{Group: "agentsandbox.dev", Resource: "sandboxtemplates"}
	namespaced, cluster := admissionregistrationv1.NamespacedScope, admissionregistrationv1.ClusterScope
	rule := func(ops []admissionregistrationv1.OperationType, groups, resources []string, scope *admissionregistrationv1.ScopeType) admissionregistrationv1.RuleWithOperations {
		return admissionregistrationv1.RuleWithOperations{Operations: ops,
			Rule: admissionregistrationv1.Rule{APIGroups: groups, APIVersions: []string{"v1"}, Resources: resources, Scope: scope}}
	}
	create := []admissionregistrationv1.OperationType{admissionregistrationv1.Create}
	all := []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll}
	update := []admissionregistrationv1.OperationType{admissionregistrationv1.Update, admissionregistrationv1.Delete}
	for _, tc := range []struct {
		name string
		rule admissionregistrationv1.RuleWithOperations
		want bool
	}{
		{"the resource on create", rule(create, []string{"agentsandbox.dev"}, []string{"sandboxtemplates"}, nil), true},
		{"every operation", rule(all, []string{"agentsandbox.dev"}, []string{"sandboxtemplates"}, nil), true},
		{"every group and resource", rule(create, []string{"*"}, []string{"*"}, nil), true},
		{"resources and subresources", rule(create, []string{"*"}, []string{"*/*"}, nil), true},
		{"the resource and its subresources", rule(create, []string{"agentsandbox.dev"}, []string{"sandboxtemplates/*"}, &cluster), true},
		{"another version still matches (Equivalent)", rule(create, []string{"agentsandbox.dev"}, []string{"sandboxtemplates"}, nil), true},
		{"updates only", rule(update, []string{"agentsandbox.dev"}, []string{"sandboxtemplates"}, nil), false},
		{"another group", rule(create, []string{"apps"}, []string{"*"}, nil), false},
		{"another resource", rule(create, []string{"agentsandbox.dev"}, []string{"sandboxes"}, nil), false},
		{"only a subresource", rule(create, []string{"agentsandbox.dev"}, []string{"sandboxtemplates/status"}, nil), false},
		{"namespaced objects only", rule(create, []string{"*"}, []string{"*"}, &namespaced), false},
	} {
		if got := admitsCreate(tc.rule, templates); got != tc.want {
			t.Errorf("%s: admitsCreate = %v, want %v", tc.name, got, tc.want)
		}
	}
}
