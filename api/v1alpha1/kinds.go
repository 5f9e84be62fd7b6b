package v1alpha1

import "slices"

// The kinds of this API.
const (
	KindNodePool        = "NodePool"
	KindSandboxTemplate = "SandboxTemplate"
	KindWarmPool        = "WarmPool"
	KindSandbox         = "Sandbox"
	KindGitSync         = "GitSync"
)

// ApplyStages orders the kinds for applying a whole configuration (a
// GitSync's revision, `agentsandbox sync`): an object only references
// objects of earlier stages, so applying stage by stage never leaves a
// reference dangling on the way. Nothing references sandboxes and Git
// syncs.
var ApplyStages = [][]string{{KindNodePool}, {KindSandboxTemplate}, {KindWarmPool}, {KindSandbox, KindGitSync}}

// Kinds lists every kind of the API, in apply order.
var Kinds = slices.Concat(ApplyStages...)

// Reference is a field of one kind that names an object of another kind.
// +kubebuilder:object:generate=false
type Reference struct {
	// From is the kind that has the field, To the kind it names.
	From, To string
	// Field is the path of the name in the object: "spec.templateRef.name".
	// The controllers' cache indexes are named by it.
	Field string
	// Get returns the reference of an object of kind From, nil when unset.
	Get func(obj any) *LocalObjectReference
}

// References are every reference between the kinds: what the controllers
// index to find the objects a change affects, and what a GitOps revision
// must either declare or find on the cluster.
var References = []Reference{
	{From: KindSandboxTemplate, Field: "spec.nodePoolRef.name", To: KindNodePool,
		Get: func(o any) *LocalObjectReference { return o.(*SandboxTemplate).Spec.NodePoolRef }},
	{From: KindWarmPool, Field: "spec.templateRef.name", To: KindSandboxTemplate,
		Get: func(o any) *LocalObjectReference { return &o.(*WarmPool).Spec.TemplateRef }},
	{From: KindSandbox, Field: "spec.templateRef.name", To: KindSandboxTemplate,
		Get: func(o any) *LocalObjectReference { return o.(*Sandbox).Spec.TemplateRef }},
	{From: KindSandbox, Field: "spec.warmPoolRef.name", To: KindWarmPool,
		Get: func(o any) *LocalObjectReference { return o.(*Sandbox).Spec.WarmPoolRef }},
}
