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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "agentsandbox.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this package with a
	// runtime.Scheme. It is apimachinery's, not controller-runtime's, so
	// that importing the API costs no controller machinery.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// knownTypes are the objects of every kind, each types file adding its own
// with register.
var knownTypes []runtime.Object

func register(objs ...runtime.Object) { knownTypes = append(knownTypes, objs...) }

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, knownTypes...)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
