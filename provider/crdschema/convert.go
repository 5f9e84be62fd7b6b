package crdschema

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"

	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// unknown is the type of Unknown.
type unknown struct{}

// Unknown stands, in JSON built from a plan, for a value Terraform does not
// know yet: one the server decides (an admission default, say). Writes
// leave such a field to the server.
var Unknown any = unknown{}

// ToJSON converts a Terraform value of the field to the JSON form the API
// server stores. Null is nil; unknown is Unknown. Objects take only the
// field's attributes, so the root of a resource yields its spec.
func ToJSON(v tftypes.Value, f *Field) (any, error) {
	if !v.IsKnown() {
		return Unknown, nil
	}
	if v.IsNull() {
		return nil, nil
	}
	switch f.Type {
	case String:
		var s string
		return s, v.As(&s)
	case Int:
		var n big.Float
		if err := v.As(&n); err != nil {
			return nil, err
		}
		i, _ := n.Int64()
		return i, nil
	case Bool:
		var b bool
		return b, v.As(&b)
	case Object:
		var attrs map[string]tftypes.Value
		if err := v.As(&attrs); err != nil {
			return nil, err
		}
		out := make(map[string]any, len(f.Fields))
		for _, c := range f.Fields {
			cv, ok := attrs[c.Name]
			if !ok {
				continue
			}
			j, err := ToJSON(cv, c)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", c.Name, err)
			}
			if j != nil {
				out[c.JSON] = j
			}
		}
		return out, nil
	case List:
		var elems []tftypes.Value
		if err := v.As(&elems); err != nil {
			return nil, err
		}
		out := make([]any, 0, len(elems))
		for i, e := range elems {
			j, err := ToJSON(e, f.Elem)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out = append(out, j)
		}
		return out, nil
	case Map:
		var elems map[string]tftypes.Value
		if err := v.As(&elems); err != nil {
			return nil, err
		}
		out := make(map[string]any, len(elems))
		for k, e := range elems {
			j, err := ToJSON(e, f.Elem)
			if err != nil {
				return nil, fmt.Errorf("[%q]: %w", k, err)
			}
			out[k] = j
		}
		return out, nil
	}
	return nil, fmt.Errorf("unsupported type %d", f.Type)
}

// FromJSON converts what the API server stores to a Terraform value of the
// given type. Absent is null; a number in a string field (a quantity
// written as 2) becomes its string.
func FromJSON(j any, f *Field, typ tftypes.Type) (tftypes.Value, error) {
	if j == nil {
		return tftypes.NewValue(typ, nil), nil
	}
	switch f.Type {
	case String:
		switch v := j.(type) {
		case string:
			return tftypes.NewValue(typ, v), nil
		case int64, float64, json.Number, int:
			return tftypes.NewValue(typ, fmt.Sprint(v)), nil
		}
	case Int:
		switch v := j.(type) {
		case int64:
			return tftypes.NewValue(typ, new(big.Float).SetInt64(v)), nil
		case int:
			return tftypes.NewValue(typ, new(big.Float).SetInt64(int64(v))), nil
		case float64:
			return tftypes.NewValue(typ, big.NewFloat(v)), nil
		case json.Number:
			n, err := strconv.ParseInt(string(v), 10, 64)
			return tftypes.NewValue(typ, new(big.Float).SetInt64(n)), err
		}
	case Bool:
		if b, ok := j.(bool); ok {
			return tftypes.NewValue(typ, b), nil
		}
	case Object:
		m, ok := j.(map[string]any)
		objType, typed := typ.(tftypes.Object)
		if !ok || !typed {
			break
		}
		attrs, err := attrsFromJSON(m, f, objType)
		if err != nil {
			return tftypes.Value{}, err
		}
		return tftypes.NewValue(typ, attrs), nil
	case List:
		l, ok := j.([]any)
		listType, typed := typ.(tftypes.List)
		if !ok || !typed {
			break
		}
		elems := make([]tftypes.Value, 0, len(l))
		for i, e := range l {
			v, err := FromJSON(e, f.Elem, listType.ElementType)
			if err != nil {
				return tftypes.Value{}, fmt.Errorf("[%d]: %w", i, err)
			}
			elems = append(elems, v)
		}
		return tftypes.NewValue(typ, elems), nil
	case Map:
		m, ok := j.(map[string]any)
		mapType, typed := typ.(tftypes.Map)
		if !ok || !typed {
			break
		}
		elems := make(map[string]tftypes.Value, len(m))
		for k, e := range m {
			v, err := FromJSON(e, f.Elem, mapType.ElementType)
			if err != nil {
				return tftypes.Value{}, fmt.Errorf("[%q]: %w", k, err)
			}
			elems[k] = v
		}
		return tftypes.NewValue(typ, elems), nil
	}
	return tftypes.Value{}, fmt.Errorf("%s: cannot read %T as %s", f.JSON, j, typ)
}

// attrsFromJSON converts the fields of an object to the attributes of typ.
func attrsFromJSON(m map[string]any, f *Field, typ tftypes.Object) (map[string]tftypes.Value, error) {
	attrs := make(map[string]tftypes.Value, len(typ.AttributeTypes))
	for _, c := range f.Fields {
		attrType, ok := typ.AttributeTypes[c.Name]
		if !ok {
			return nil, fmt.Errorf("no attribute %s in %s", c.Name, typ)
		}
		v, err := FromJSON(m[c.JSON], c, attrType)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.Name, err)
		}
		attrs[c.Name] = v
	}
	return attrs, nil
}
