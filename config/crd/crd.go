// Package crd embeds the generated CustomResourceDefinitions of the
// agentsandbox.dev API, so binaries and tests install exactly the CRDs that
// were generated from api/v1alpha1.
package crd

import (
	"embed"
	"fmt"
	"io/fs"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed bases/*.yaml
var bases embed.FS

// All returns the CRDs of every kind, in file name order.
func All() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	paths, err := fs.Glob(bases, "bases/*.yaml")
	if err != nil {
		return nil, err
	}
	crds := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(paths))
	for _, p := range paths {
		data, err := bases.ReadFile(p)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("failed to decode %s: %w", p, err)
		}
		crds = append(crds, crd)
	}
	return crds, nil
}
