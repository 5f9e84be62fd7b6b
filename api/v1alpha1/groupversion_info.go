// Package v1alpha1 holds the agentsandbox.dev/v1alpha1 API: the five kinds a
// platform team declares (NodePool, SandboxTemplate, WarmPool, Sandbox and
// GitSync). These Go types are the single source of truth: controller-gen
// derives the CRDs and deepcopy functions from them, the reconciler decodes
// Git declarations into them, and the Terraform provider maps its schema onto
// them.
//
// +kubebuilder:object:generate=true
// +groupName=agentsandbox.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "agentsandbox.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the kinds of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
