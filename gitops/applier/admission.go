package applier

import (
	"context"
	"fmt"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentsandbox/terraform-provider-agentsandbox/gitops/declarations"
)

// admissionRules are the resource rules of every admission policy and
// webhook of the cluster that may refuse or change an object: what could
// refuse a create that the CRD's own validation accepts. ok is false when
// they could not all be read (forbidden, say, or a kind this API server
// does not serve): then anything may be refused.
//
// The rules are read coarsely, always erring towards "may refuse": a
// policy counts without a binding, and selectors, match conditions,
// excluded rules and versions are not looked at (with the default match
// policy, Equivalent, a rule for another version matches too).
func admissionRules(ctx context.Context, r client.Reader) (rules []admissionregistrationv1.RuleWithOperations, ok bool) {
	var (
		vaps     admissionregistrationv1.ValidatingAdmissionPolicyList
		maps     admissionregistrationv1.MutatingAdmissionPolicyList
		vwebhook admissionregistrationv1.ValidatingWebhookConfigurationList
		mwebhook admissionregistrationv1.MutatingWebhookConfigurationList
	)
	for _, list := range []client.ObjectList{&vaps, &maps, &vwebhook, &mwebhook} {
		if err := r.List(ctx, list); err != nil {
			return nil, false
		}
	}
	for _, p := range vaps.Items {
		rules = append(rules, namedRules(p.Spec.MatchConstraints)...)
	}
	for _, p := range maps.Items {
		rules = append(rules, namedRules(p.Spec.MatchConstraints)...)
	}
	for _, c := range vwebhook.Items {
		for _, w := range c.Webhooks {
			rules = append(rules, w.Rules...)
		}
	}
	for _, c := range mwebhook.Items {
		for _, w := range c.Webhooks {
			rules = append(rules, w.Rules...)
		}
	}
	return rules, true
}

func namedRules(m *admissionregistrationv1.MatchResources) []admissionregistrationv1.RuleWithOperations {
	if m == nil {
		return nil
	}
	out := make([]admissionregistrationv1.RuleWithOperations, 0, len(m.ResourceRules))
	for _, r := range m.ResourceRules {
		out = append(out, r.RuleWithOperations)
	}
	return out
}

// admitsCreate reports whether rule applies to creating a cluster-scoped
// object of resource: its operations include CREATE, its groups the
// resource's, its resources the resource itself (not only a subresource),
// and its scope is not Namespaced.
func admitsCreate(rule admissionregistrationv1.RuleWithOperations, resource schema.GroupResource) bool {
	ops := sets.New(rule.Operations...)
	if !ops.Has(admissionregistrationv1.Create) && !ops.Has(admissionregistrationv1.OperationAll) {
		return false
	}
	groups := sets.New(rule.APIGroups...)
	if !groups.Has(resource.Group) && !groups.Has("*") {
		return false
	}
	if rule.Scope != nil && *rule.Scope == admissionregistrationv1.NamespacedScope {
		return false
	}
	resources := sets.New(rule.Resources...)
	return resources.HasAny("*", "*/*", resource.Resource, resource.Resource+"/*")
}

// absentAndUnadmitted are the declarations Validate checks in the
// process: those of objects that do not exist, of kinds no admission rule
// could refuse a create of. live is listContents's answer; when it listed
// only labelled objects (not detail, all of decls with one owner), whether
// the others exist is read from their metadata.
func (a *Applier) absentAndUnadmitted(ctx context.Context, decls []declarations.Declaration, live map[ObjectKey]*liveContent, detail bool) (map[ObjectKey]bool, error) {
	var missing []declarations.Declaration
	for _, d := range decls {
		if live[KeyOf(d)] == nil {
			missing = append(missing, d)
		}
	}
	if len(missing) == 0 {
		return nil, nil
	}
	rules, ok := admissionRules(ctx, a.admission)
	if !ok {
		return nil, nil
	}
	refusable := map[schema.GroupVersionKind]bool{}
	out := map[ObjectKey]bool{}
	var candidates []declarations.Declaration
	for _, d := range missing {
		gvk := d.Object.GroupVersionKind()
		may, seen := refusable[gvk]
		if !seen {
			mapping, err := a.client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", d.Where(), err)
			}
			resource := mapping.Resource.GroupResource()
			may = mapping.Scope.Name() != meta.RESTScopeNameRoot ||
				slices.ContainsFunc(rules, func(r admissionregistrationv1.RuleWithOperations) bool { return admitsCreate(r, resource) })
			refusable[gvk] = may
		}
		if !may {
			candidates = append(candidates, d)
			out[KeyOf(d)] = true
		}
	}
	if len(candidates) == 0 || len(listOptions(decls, !detail)) == 0 {
		return out, nil
	}
	err := listPages(ctx, a.client, candidates, nil, true, metadataList,
		func(gvk schema.GroupVersionKind, list *metav1.PartialObjectMetadataList) {
			for i := range list.Items {
				delete(out, ObjectKey{gvk, list.Items[i].Name})
			}
		})
	return out, err
}
