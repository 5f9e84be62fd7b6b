// Package config embeds the installation's manifests that binaries and
// tests need as data: the CRDs generated from api/v1alpha1, so they install
// and compare exactly those, and the admission policies, so a client can
// tell whether an installation has every one. It also parses manifests the
// way kubectl reads a file.
package config

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

//go:embed crd/bases/*.yaml admission/*.yaml gateway/*.yaml
var manifests embed.FS

// CRDs returns the CRD of every kind, in file name order.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var crds []*apiextensionsv1.CustomResourceDefinition
	err := eachFile("crd/bases/*.yaml", func(name string, data []byte) error {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return fmt.Errorf("failed to decode %s: %w", name, err)
		}
		crds = append(crds, crd)
		return nil
	})
	return crds, err
}

// Admission returns every object config/admission installs: the policies,
// their bindings and the ConfigMap that names the administrators.
func Admission() ([]*unstructured.Unstructured, error) { return objectsOf("admission/*.yaml") }

// Gateway returns every object config/gateway installs: the egress
// gateway's Deployment and Service, its identity and what it may read.
func Gateway() ([]*unstructured.Unstructured, error) { return objectsOf("gateway/*.yaml") }

// objectsOf parses every embedded file matching pattern.
func objectsOf(pattern string) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	err := eachFile(pattern, func(name string, data []byte) error {
		parsed, err := ParseManifests(name, data)
		objs = append(objs, parsed...)
		return err
	})
	return objs, err
}

// eachFile calls fn with each embedded file matching pattern, in name order;
// fn's name is the file's path from the repository's root.
func eachFile(pattern string, fn func(name string, data []byte) error) error {
	paths, err := fs.Glob(manifests, pattern)
	if err != nil {
		return err
	}
	for _, p := range paths {
		data, err := manifests.ReadFile(p)
		if err != nil {
			return err
		}
		if err := fn("config/"+p, data); err != nil {
			return err
		}
	}
	return nil
}

// ParseManifests decodes every non-empty YAML document of data; source
// names it in errors.
func ParseManifests(source string, data []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}
