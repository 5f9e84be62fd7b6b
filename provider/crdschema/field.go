// Package crdschema derives the provider's Terraform schemas from the
// agentsandbox.dev CRDs. The CRDs are generated from api/v1alpha1, so the Go
// API types stay the one description of every field, its constraints and
// its defaults: a field added there reaches Terraform users, validated, with
// no second copy to keep in step.
package crdschema

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Type is the Terraform shape of a CRD field.
type Type int

// The shapes a CRD field maps to. Quantities (int-or-string) are strings,
// the form users write them in.
const (
	String Type = iota
	Int
	Bool
	Object
	List
	Map
)

// Field is one CRD field as Terraform sees it.
type Field struct {
	// Name is the attribute name: the JSON name in snake_case.
	Name string
	// JSON is the field's name in the Kubernetes object.
	JSON        string
	Description string
	Type        Type
	// Required mirrors the CRD's required list.
	Required bool
	// Default is the CRD default, as decoded JSON; nil when there is none.
	Default any
	// Immutable fields cannot change after creation (a CEL
	// `self == oldSelf` rule): Terraform replaces the object instead.
	Immutable bool
	// Fields are the attributes of an Object, in name order.
	Fields []*Field
	// Elem is the element of a List or Map.
	Elem *Field

	// The CRD's constraints as plan-time validators, by shape.
	StringValidators []validator.String
	IntValidators    []validator.Int64
	ListValidators   []validator.List
	MapValidators    []validator.Map
	ObjectValidators []validator.Object
}

// Child returns the attribute of an Object by name.
func (f *Field) Child(name string) *Field {
	for _, c := range f.Fields {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// newField converts one schema node, with its CEL rules and constraints.
func newField(jsonName string, p *apiextensionsv1.JSONSchemaProps, required bool) (*Field, error) {
	f := &Field{
		Name:        SnakeCase(jsonName),
		JSON:        jsonName,
		Description: strings.TrimSpace(p.Description),
		Required:    required,
	}
	if p.Default != nil {
		if err := json.Unmarshal(p.Default.Raw, &f.Default); err != nil {
			return nil, fmt.Errorf("%s: default: %w", jsonName, err)
		}
	}
	switch {
	case p.XIntOrString, p.Type == "string":
		f.Type = String
	case p.Type == "integer":
		f.Type = Int
	case p.Type == "boolean":
		f.Type = Bool
	case p.Type == "array":
		if p.Items == nil || p.Items.Schema == nil {
			return nil, fmt.Errorf("%s: array without an item schema", jsonName)
		}
		f.Type = List
		elem, err := newField(jsonName, p.Items.Schema, true)
		if err != nil {
			return nil, err
		}
		f.Elem = elem
	case p.Type == "object" && len(p.Properties) > 0:
		f.Type = Object
		names := make([]string, 0, len(p.Properties))
		for name := range p.Properties {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			prop := p.Properties[name]
			child, err := newField(name, &prop, slices.Contains(p.Required, name))
			if err != nil {
				return nil, fmt.Errorf("%s.%w", jsonName, err)
			}
			f.Fields = append(f.Fields, child)
		}
	case p.Type == "object" && p.AdditionalProperties != nil && p.AdditionalProperties.Schema != nil:
		f.Type = Map
		elem, err := newField(jsonName, p.AdditionalProperties.Schema, true)
		if err != nil {
			return nil, err
		}
		if elem.Type != String {
			return nil, fmt.Errorf("%s: only maps of strings are supported", jsonName)
		}
		f.Elem = elem
	default:
		return nil, fmt.Errorf("%s: unsupported schema type %q", jsonName, p.Type)
	}
	if err := addConstraints(f, p); err != nil {
		return nil, fmt.Errorf("%s: %w", jsonName, err)
	}
	for _, rule := range p.XValidations {
		if err := addRule(f, rule); err != nil {
			return nil, fmt.Errorf("%s: %w", jsonName, err)
		}
	}
	return f, nil
}

// SnakeCase turns a JSON field name into an attribute name, keeping
// acronyms whole: clusterDNS becomes cluster_dns, podIP pod_ip.
func SnakeCase(s string) string {
	r := []rune(s)
	var b strings.Builder
	for i, c := range r {
		if unicode.IsUpper(c) && i > 0 {
			prevLower := unicode.IsLower(r[i-1]) || unicode.IsDigit(r[i-1])
			nextLower := i+1 < len(r) && unicode.IsLower(r[i+1])
			if prevLower || (unicode.IsUpper(r[i-1]) && nextLower) {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}
