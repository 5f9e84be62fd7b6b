package crdschema

import (
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// patternMessages says in words what the CRD's common patterns accept; any
// other pattern is quoted as is.
var patternMessages = map[string]string{
	`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`: "must be a duration such as 90s, 30m or 8h",
	`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`:  "must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit",
	"^([*][.])?([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?[.])*[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$":                             "must be a host name such as pypi.org or a wildcard such as *.githubusercontent.com: lower case, no scheme, port or path",
	`^https?://[-a-z0-9.:\[\]]+(/[^?#]*)?$`:                                                                             "must be an http or https URL without user, query or fragment, such as https://api.openai.com or http://vllm.models.svc:8000/v1",
	`^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`: "must be a quantity such as 500m, 2, 256Mi or 5Gi",
}

// fieldPatternMessages explain the patterns of fields whose regular
// expression says little to a reader, by field name.
var fieldPatternMessages = map[string]string{
	"image":  "must be an image reference such as ghcr.io/acme/python:3.12, optionally pinned by @sha256:digest",
	"url":    "must be a Git URL: https://, http://, ssh:// or scp-like git@host:path",
	"branch": "must be a Git branch name",
	"tag":    "must be a Git tag name",
	"commit": "must be a full commit SHA (40 or 64 hexadecimal characters)",
}

// patternValidator checks a CRD pattern, explained in words when it is a
// common one or the field's is known, and quotes the value it refuses.
func patternValidator(field, pattern string) (validator.String, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("pattern %q: %w", pattern, err)
	}
	msg, ok := patternMessages[pattern]
	if !ok {
		msg, ok = fieldPatternMessages[field]
	}
	if !ok {
		msg = "must match the regular expression " + pattern
	}
	return stringCheck{"value " + msg, func(s string) string {
		if re.MatchString(s) {
			return ""
		}
		return msg
	}}, nil
}

// addConstraints turns the OpenAPI constraints of a node (enum, pattern,
// lengths, bounds, sizes) into validators of the field's shape.
func addConstraints(f *Field, p *apiextensionsv1.JSONSchemaProps) error {
	switch f.Type {
	case String:
		vs, err := stringConstraints(f.JSON, p)
		if err != nil {
			return err
		}
		f.StringValidators = append(f.StringValidators, vs...)
	case Int:
		switch {
		case p.Minimum != nil && p.Maximum != nil:
			f.IntValidators = append(f.IntValidators, int64validator.Between(int64(*p.Minimum), int64(*p.Maximum)))
		case p.Minimum != nil:
			f.IntValidators = append(f.IntValidators, int64validator.AtLeast(int64(*p.Minimum)))
		case p.Maximum != nil:
			f.IntValidators = append(f.IntValidators, int64validator.AtMost(int64(*p.Maximum)))
		}
	case List:
		if p.MinItems != nil {
			f.ListValidators = append(f.ListValidators, listvalidator.SizeAtLeast(int(*p.MinItems)))
		}
		if p.MaxItems != nil {
			f.ListValidators = append(f.ListValidators, listvalidator.SizeAtMost(int(*p.MaxItems)))
		}
		switch f.Elem.Type {
		case String:
			if len(f.Elem.StringValidators) > 0 {
				f.ListValidators = append(f.ListValidators, listvalidator.ValueStringsAre(f.Elem.StringValidators...))
			}
		case Object:
			if len(p.XListMapKeys) > 0 {
				f.ListValidators = append(f.ListValidators, uniqueBy(f.Elem, p.XListMapKeys))
			}
		}
	case Map:
		if p.MaxProperties != nil {
			f.MapValidators = append(f.MapValidators, mapvalidator.SizeAtMost(int(*p.MaxProperties)))
		}
		if len(f.Elem.StringValidators) > 0 {
			f.MapValidators = append(f.MapValidators, mapvalidator.ValueStringsAre(f.Elem.StringValidators...))
		}
	}
	return nil
}

func stringConstraints(field string, p *apiextensionsv1.JSONSchemaProps) ([]validator.String, error) {
	var vs []validator.String
	if len(p.Enum) > 0 {
		values := make([]string, 0, len(p.Enum))
		for _, e := range p.Enum {
			var s string
			if err := json.Unmarshal(e.Raw, &s); err != nil {
				return nil, fmt.Errorf("enum: %w", err)
			}
			values = append(values, s)
		}
		vs = append(vs, stringvalidator.OneOf(values...))
	}
	switch {
	case p.MinLength != nil && p.MaxLength != nil:
		vs = append(vs, stringvalidator.LengthBetween(int(*p.MinLength), int(*p.MaxLength)))
	case p.MinLength != nil:
		vs = append(vs, stringvalidator.LengthAtLeast(int(*p.MinLength)))
	case p.MaxLength != nil:
		vs = append(vs, stringvalidator.LengthAtMost(int(*p.MaxLength)))
	}
	if p.Pattern != "" {
		v, err := patternValidator(field, p.Pattern)
		if err != nil {
			return nil, err
		}
		vs = append(vs, v)
	}
	return vs, nil
}
