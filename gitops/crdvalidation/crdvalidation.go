// Package crdvalidation validates objects of this API in the process,
// the way the API server validates them on create: the CRD's OpenAPI
// schema after its defaults, the list types, the object's metadata and
// the CEL rules (x-kubernetes-validations), with the apiextensions
// API server's own validators and the CRDs of config/crd. A GitSync that
// creates thousands of objects then needs no dry run per object to know
// that none will be refused half-way (gitops/applier).
//
// What it does not see is admission: a policy or webhook may still refuse
// an object this package accepts, so the applier dry-runs the kinds one
// could refuse. Updates are not its job either: the API server ratchets
// (an invalid field left unchanged passes), which needs the live object.
package crdvalidation

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	schemavalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"

	"github.com/agentsandbox/terraform-provider-agentsandbox/config"
)

// Validator validates objects of every kind config/crd defines.
type Validator struct {
	kinds map[schema.GroupVersionKind]*kindValidator
}

// kindValidator is what the API server builds from one version of a CRD.
type kindValidator struct {
	namespaced bool
	structural *structuralschema.Structural
	schema     schemavalidation.SchemaValidator
	cel        *cel.Validator
	// specReplicas is the path of the replicas of the scale subresource,
	// which the API server checks beyond the schema; "" without one.
	specReplicas string
	// hasStatus is whether status is a subresource: a create drops it.
	hasStatus bool
}

// New builds a Validator from the CRDs of config/crd. Compiling their CEL
// rules takes a moment: build one and keep it.
func New() (*Validator, error) {
	crds, err := config.CRDs()
	if err != nil {
		return nil, err
	}
	v := &Validator{kinds: map[schema.GroupVersionKind]*kindValidator{}}
	for _, crd := range crds {
		for _, version := range crd.Spec.Versions {
			if !version.Served || version.Schema == nil {
				continue
			}
			k, err := newKindValidator(crd, version)
			if err != nil {
				return nil, fmt.Errorf("CRD %s, version %s: %w", crd.Name, version.Name, err)
			}
			v.kinds[schema.GroupVersionKind{Group: crd.Spec.Group, Version: version.Name, Kind: crd.Spec.Names.Kind}] = k
		}
	}
	return v, nil
}

func newKindValidator(crd *apiextensionsv1.CustomResourceDefinition, version apiextensionsv1.CustomResourceDefinitionVersion) (*kindValidator, error) {
	props := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(version.Schema.OpenAPIV3Schema, props, nil); err != nil {
		return nil, err
	}
	structural, err := structuralschema.NewStructural(props)
	if err != nil {
		return nil, err
	}
	// As the API server serves it: defaults pruned of unknown fields.
	structural = structural.DeepCopy()
	if err := structuraldefaulting.PruneDefaults(structural); err != nil {
		return nil, err
	}
	openAPI, _, err := schemavalidation.NewSchemaValidator(props)
	if err != nil {
		return nil, err
	}
	k := &kindValidator{
		namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
		structural: structural,
		schema:     openAPI,
		cel:        cel.NewValidator(structural, true, celconfig.PerCallLimit),
	}
	if sub := version.Subresources; sub != nil {
		k.hasStatus = sub.Status != nil
		if sub.Scale != nil {
			k.specReplicas = sub.Scale.SpecReplicasPath
		}
	}
	return k, nil
}

// Validate returns what the API server would refuse in creating obj, as
// the field errors it would answer with; none when it would accept it.
// Numbers must be decoded as the API server decodes them, integers as
// int64 (declarations.Decode does); a float64 where the schema has an
// integer fails differently. obj is not changed: its defaults are applied
// to a copy.
func (v *Validator) Validate(ctx context.Context, obj *unstructured.Unstructured) field.ErrorList {
	k, ok := v.kinds[obj.GroupVersionKind()]
	if !ok {
		return field.ErrorList{field.NotSupported(field.NewPath("apiVersion"), obj.GetAPIVersion()+" "+obj.GetKind(), v.served())}
	}
	u := obj.DeepCopy()
	if k.hasStatus {
		delete(u.Object, "status")
	}
	structuraldefaulting.Default(u.Object, k.structural)

	var errs field.ErrorList
	meta := &metav1.ObjectMeta{}
	if raw, ok := u.Object["metadata"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, meta); err != nil {
			return field.ErrorList{field.Invalid(field.NewPath("metadata"), nil, err.Error())}
		}
	}
	errs = append(errs, metavalidation.ValidateObjectMeta(meta, k.namespaced, metavalidation.NameIsDNSSubdomain, field.NewPath("metadata"))...)
	errs = append(errs, schemavalidation.ValidateCustomResource(nil, u.Object, k.schema)...)
	errs = append(errs, k.validateScale(u)...)
	errs = append(errs, schemaobjectmeta.Validate(ctx, nil, u.Object, k.structural, false)...)
	errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, k.structural, u.Object)...)
	if blocked := blocking(errs); blocked != nil {
		// As the API server: rules are not run on an object of the
		// wrong shape, which they could not read.
		return append(errs, blocked)
	}
	celErrs, _ := k.cel.Validate(ctx, nil, k.structural, u.Object, nil, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

// validateScale checks the replicas of the scale subresource as the API
// server does: an integer from 0 to the largest int32.
func (k *kindValidator) validateScale(u *unstructured.Unstructured) field.ErrorList {
	if k.specReplicas == "" {
		return nil
	}
	path := field.NewPath(k.specReplicas)
	replicas, _, err := unstructured.NestedInt64(u.Object, strings.Split(strings.TrimPrefix(k.specReplicas, "."), ".")...)
	switch {
	case err != nil:
		return field.ErrorList{field.Invalid(path, replicas, err.Error())}
	case replicas < 0:
		return field.ErrorList{field.Invalid(path, replicas, "should be a non-negative integer")}
	case replicas > math.MaxInt32:
		return field.ErrorList{field.Invalid(path, replicas, fmt.Sprintf("should be less than or equal to %v", math.MaxInt32))}
	}
	return nil
}

// blocking is the error the API server adds instead of running the CEL
// rules when errs has one that leaves the object unreadable to them.
func blocking(errs field.ErrorList) *field.Error {
	for _, err := range errs {
		switch err.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation")
		}
	}
	return nil
}

// served lists the kinds v validates, for an error about another.
func (v *Validator) served() []string {
	out := make([]string, 0, len(v.kinds))
	for gvk := range v.kinds {
		out = append(out, gvk.GroupVersion().String()+" "+gvk.Kind)
	}
	slices.Sort(out)
	return out
}
