// Package kubescheme is the one runtime scheme the project's clients decode
// with: the reconciler, the Terraform provider, the CLI and the SDK.
//
// It lives apart from the controllers so that a client needs nothing but
// the API types: the provider plugin links neither the controllers nor
// their Git and server-side apply libraries.
package kubescheme

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// Scheme knows the built-in kinds, CustomResourceDefinitions (to tell a
// missing install from other errors) and the agentsandbox.dev kinds.
var Scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(Scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(Scheme))
	utilruntime.Must(v1.AddToScheme(Scheme))
}
