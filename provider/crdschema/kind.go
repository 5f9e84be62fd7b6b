package crdschema

import (
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Kind is one CRD as the provider sees it.
type Kind struct {
	// GVK addresses the objects of the kind.
	GVK schema.GroupVersionKind
	// Description is the CRD's description of the kind.
	Description string
	// NameValidators check metadata.name as the CRD's root rule does.
	NameValidators []validator.String
	// Spec and Status are the two halves of the object.
	Spec   *Field
	Status *Field
}

// Load reads the storage version of a CRD.
func Load(crd *apiextensionsv1.CustomResourceDefinition) (*Kind, error) {
	for _, v := range crd.Spec.Versions {
		if !v.Storage {
			continue
		}
		k, err := load(crd, &v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", crd.Name, err)
		}
		return k, nil
	}
	return nil, fmt.Errorf("%s: no storage version", crd.Name)
}

func load(crd *apiextensionsv1.CustomResourceDefinition, v *apiextensionsv1.CustomResourceDefinitionVersion) (*Kind, error) {
	if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		return nil, fmt.Errorf("version %s has no schema", v.Name)
	}
	root := v.Schema.OpenAPIV3Schema
	k := &Kind{
		GVK:         schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind},
		Description: root.Description,
	}
	pattern, maxLength, err := nameLimit(root.XValidations)
	if err != nil {
		return nil, err
	}
	re, err := patternValidator("name", pattern)
	if err != nil {
		return nil, err
	}
	k.NameValidators = []validator.String{stringvalidator.LengthBetween(1, maxLength), re}
	for name, dst := range map[string]**Field{"spec": &k.Spec, "status": &k.Status} {
		props, ok := root.Properties[name]
		if !ok {
			return nil, fmt.Errorf("no %s in the schema", name)
		}
		if *dst, err = newField(name, &props, false); err != nil {
			return nil, err
		}
	}
	return k, nil
}
