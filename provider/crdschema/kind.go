package crdschema

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

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
	pattern, maxLength, reason, err := nameLimit(root.XValidations)
	if err != nil {
		return nil, err
	}
	re, err := patternValidator("name", pattern)
	if err != nil {
		return nil, err
	}
	k.NameValidators = []validator.String{nameLengthValidator(maxLength, reason), re}
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

// SnakeCaseDescriptions rewrites the field names the CRDs' descriptions
// mention (shutdownTime, status.readyReplicas, a template's
// envVarsInjectionPolicy in the sandbox's docs) as the attribute names
// Terraform users write (shutdown_time, status.ready_replicas). Only names
// of the kinds' own fields change; Kubernetes terms such as emptyDir stay.
func SnakeCaseDescriptions(kinds ...*Kind) {
	names := map[string]bool{}
	for _, k := range kinds {
		k.walk(func(f *Field) {
			if f.JSON != f.Name {
				names[f.JSON] = true
			}
		})
	}
	if len(names) == 0 {
		return
	}
	alternatives := make([]string, 0, len(names))
	for name := range names {
		alternatives = append(alternatives, regexp.QuoteMeta(name))
	}
	// Longest first, so that a name is never matched by a prefix of it.
	slices.SortFunc(alternatives, func(a, b string) int { return len(b) - len(a) })
	re := regexp.MustCompile(`\b(` + strings.Join(alternatives, "|") + `)\b`)
	for _, k := range kinds {
		k.walk(func(f *Field) { f.Description = re.ReplaceAllStringFunc(f.Description, SnakeCase) })
		k.Description = re.ReplaceAllStringFunc(k.Description, SnakeCase)
	}
}

// walk calls visit with every field of the kind.
func (k *Kind) walk(visit func(*Field)) {
	var walk func(f *Field)
	walk = func(f *Field) {
		if f == nil {
			return
		}
		visit(f)
		for _, c := range f.Fields {
			walk(c)
		}
		walk(f.Elem)
	}
	walk(k.Spec)
	walk(k.Status)
}
