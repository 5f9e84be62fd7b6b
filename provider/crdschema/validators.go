package crdschema

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The validators below are the plan-time form of the CRDs' CEL rules that
// the validators library has no equivalent for.

// stringCheck validates a known string; check returns what is wrong, or "".
type stringCheck struct {
	description string
	check       func(string) string
}

func (v stringCheck) Description(context.Context) string         { return v.description }
func (v stringCheck) MarkdownDescription(context.Context) string { return v.description }

func (v stringCheck) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	value := req.ConfigValue.ValueString()
	if problem := v.check(value); problem != "" {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid Attribute Value",
			fmt.Sprintf("Attribute %s %s, got: %q", req.Path, problem, value))
	}
}

var cidrValidator = stringCheck{"value must be a CIDR", func(s string) string {
	if _, _, err := net.ParseCIDR(s); err != nil {
		return "must be a CIDR such as 10.0.0.0/8 or 2001:db8::/32"
	}
	return ""
}}

// positiveQuantityValidator refuses zero and negative quantities; what is
// no quantity at all the field's pattern refuses, once.
var positiveQuantityValidator = stringCheck{"value must be a quantity greater than zero", func(s string) string {
	if q, err := resource.ParseQuantity(s); err == nil && q.Sign() <= 0 {
		return "must be a quantity greater than zero, such as 5Gi"
	}
	return ""
}}

// nameLengthValidator refuses a name longer than maxLength, saying why the
// kind allows no more (reason, from the CRD's rule).
func nameLengthValidator(maxLength int, reason string) stringCheck {
	limit := fmt.Sprintf("must be at most %d characters long", maxLength)
	if reason != "" {
		limit += " (" + reason + ")"
	}
	return stringCheck{"value " + limit, func(s string) string {
		if n := len(s); n == 0 || n > maxLength {
			return fmt.Sprintf("is %d characters long but %s", n, limit)
		}
		return ""
	}}
}

var noParentSegmentValidator = stringCheck{"value must not contain a '..' segment", func(s string) string {
	if slices.Contains(strings.Split(s, "/"), "..") {
		return "must stay inside the repository: '..' is not allowed"
	}
	return ""
}}

// objectCheck validates a known object from its attributes; check returns
// the attribute at fault and what is wrong, or "" for both.
type objectCheck struct {
	description string
	check       func(attrs map[string]attr.Value) (attribute, problem string)
}

func (v objectCheck) Description(context.Context) string         { return v.description }
func (v objectCheck) MarkdownDescription(context.Context) string { return v.description }

func (v objectCheck) ValidateObject(_ context.Context, req validator.ObjectRequest, resp *validator.ObjectResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	attrs := req.ConfigValue.Attributes()
	for _, a := range attrs {
		if a.IsUnknown() {
			return // checked again at apply, once known
		}
	}
	if attribute, problem := v.check(attrs); problem != "" {
		at := req.Path
		if attribute != "" {
			at = at.AtName(attribute)
		}
		resp.Diagnostics.AddAttributeError(at, "Invalid Attribute combination", fmt.Sprintf("Attribute %s %s", at, problem))
	}
}

// objectRule builds an objectCheck over two attributes of an object.
type objectRule func(a, b string) objectCheck

func addObjectCheck(f *Field, rule objectRule, a, b string) error {
	fa, fb := f.childByJSON(a), f.childByJSON(b)
	if fa == nil || fb == nil {
		return fmt.Errorf("rule names unknown fields %s, %s", a, b)
	}
	f.ObjectValidators = append(f.ObjectValidators, rule(fa.Name, fb.Name))
	return nil
}

// notLower: attribute a, when set, must not be lower than b.
func notLower(a, b string) objectCheck {
	return objectCheck{a + " must not be lower than " + b, func(attrs map[string]attr.Value) (string, string) {
		av, aok := attrs[a].(types.Int64)
		bv, bok := attrs[b].(types.Int64)
		if aok && bok && !av.IsNull() && !bv.IsNull() && av.ValueInt64() < bv.ValueInt64() {
			return a, fmt.Sprintf("must not be lower than %s (%d), got: %d", b, bv.ValueInt64(), av.ValueInt64())
		}
		return "", ""
	}}
}

// needsTrue: attribute a may only be set when the boolean b is true.
func needsTrue(a, b string) objectCheck {
	return objectCheck{a + " needs " + b + " = true", func(attrs map[string]attr.Value) (string, string) {
		flag, _ := attrs[b].(types.Bool)
		if !attrs[a].IsNull() && !flag.ValueBool() {
			return a, fmt.Sprintf("needs %s = true", b)
		}
		return "", ""
	}}
}

// quantitiesNotAbove: every quantity of map a is at most the same key's
// quantity in map b.
func quantitiesNotAbove(a, b string) objectCheck {
	return objectCheck{"every " + a + " entry must be at most its " + b + " entry", func(attrs map[string]attr.Value) (string, string) {
		am, aok := attrs[a].(types.Map)
		bm, bok := attrs[b].(types.Map)
		if !aok || !bok || am.IsNull() || bm.IsNull() {
			return "", ""
		}
		limits := bm.Elements()
		for key, v := range am.Elements() {
			lim, ok := limits[key].(types.String)
			req, _ := v.(types.String)
			if !ok {
				continue
			}
			rq, err1 := resource.ParseQuantity(req.ValueString())
			lq, err2 := resource.ParseQuantity(lim.ValueString())
			if err1 == nil && err2 == nil && rq.Cmp(lq) > 0 {
				return a, fmt.Sprintf("%q must be less than or equal to %s[%q], got: %q > %q",
					key, b, key, req.ValueString(), lim.ValueString())
			}
		}
		return "", ""
	}}
}

// combinationValidator checks how many of a combination's attributes are
// set.
func combinationValidator(c combination) objectCheck {
	names := strings.Join(c.Attrs, ", ")
	return objectCheck{c.describe(), func(attrs map[string]attr.Value) (string, string) {
		set := 0
		for _, name := range c.Attrs {
			if !attrs[name].IsNull() {
				set++
			}
		}
		if !c.Kind.allows(set) {
			return "", fmt.Sprintf("must set %s of %s, got %d", c.Kind, names, set)
		}
		return "", ""
	}}
}

func (c combination) describe() string {
	return fmt.Sprintf("set %s of %s", c.Kind, strings.Join(c.Attrs, ", "))
}

func (k combinationKind) allows(set int) bool {
	switch k {
	case exactlyOne:
		return set == 1
	case atLeastOne:
		return set >= 1
	default:
		return set <= 1
	}
}

func (k combinationKind) String() string {
	return [...]string{"exactly one", "at least one", "at most one"}[k]
}

// listCheck validates a known list.
type listCheck struct {
	description string
	check       func(elems []attr.Value) string
}

func (v listCheck) Description(context.Context) string         { return v.description }
func (v listCheck) MarkdownDescription(context.Context) string { return v.description }

func (v listCheck) ValidateList(_ context.Context, req validator.ListRequest, resp *validator.ListResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if problem := v.check(req.ConfigValue.Elements()); problem != "" {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid Attribute Value", fmt.Sprintf("Attribute %s %s", req.Path, problem))
	}
}

// uniqueBy refuses two elements with the same key, the CRD's list-map rule.
// A key attribute left null counts as its default, as the API server would
// see it.
func uniqueBy(elem *Field, jsonKeys []string) listCheck {
	keys := make([]*Field, 0, len(jsonKeys))
	names := make([]string, 0, len(jsonKeys))
	for _, k := range jsonKeys {
		if c := elem.childByJSON(k); c != nil {
			keys = append(keys, c)
			names = append(names, c.Name)
		}
	}
	joined := strings.Join(names, ", ")
	return listCheck{"elements must be unique by " + joined, func(elems []attr.Value) string {
		seen := map[string]int{}
		for i, e := range elems {
			obj, ok := e.(types.Object)
			if !ok || obj.IsUnknown() {
				return ""
			}
			var key []string
			for _, k := range keys {
				v := obj.Attributes()[k.Name]
				switch {
				case v == nil || v.IsUnknown():
					return ""
				case v.IsNull():
					key = append(key, fmt.Sprint(k.Default))
				default:
					key = append(key, keyString(v))
				}
			}
			id := strings.Join(key, "/")
			if j, dup := seen[id]; dup {
				return fmt.Sprintf("elements must be unique by %s: elements %d and %d are both %s", joined, j, i, id)
			}
			seen[id] = i
		}
		return ""
	}}
}

func keyString(v attr.Value) string {
	switch v := v.(type) {
	case types.String:
		return v.ValueString()
	case types.Int64:
		return strconv.FormatInt(v.ValueInt64(), 10)
	default:
		return v.String()
	}
}
