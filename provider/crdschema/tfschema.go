package crdschema

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	dschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/boolplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// resourceAttributes returns the resource schema of an object's fields:
// required and optional as in the CRD, CRD defaults as Terraform defaults
// (so the planned value is what the API server will store), immutable
// fields replaced on change, every constraint a validator. serverDefaulted
// names attributes an admission step fills in when they are left unset;
// they are optional and computed, and keep their value from state.
func resourceAttributes(f *Field, serverDefaulted map[string]bool) (map[string]schema.Attribute, error) {
	attrs := make(map[string]schema.Attribute, len(f.Fields))
	for _, c := range f.Fields {
		a, err := resourceAttribute(c, serverDefaulted[c.Name])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.Name, err)
		}
		attrs[c.Name] = a
	}
	return attrs, nil
}

func resourceAttribute(f *Field, serverDefaulted bool) (schema.Attribute, error) {
	computed := f.Default != nil || serverDefaulted
	required := f.Required && !computed
	optional := !required
	f = withDocumentation(f, serverDefaulted)
	switch f.Type {
	case String:
		a := schema.StringAttribute{Description: f.Description, Required: required, Optional: optional, Computed: computed,
			Validators: f.StringValidators}
		if s, ok := f.Default.(string); ok {
			a.Default = stringdefault.StaticString(s)
		}
		if serverDefaulted {
			a.PlanModifiers = append(a.PlanModifiers, stringplanmodifier.UseStateForUnknown())
		}
		if f.Immutable {
			a.PlanModifiers = append(a.PlanModifiers, stringplanmodifier.RequiresReplace())
		}
		return a, nil
	case Int:
		a := schema.Int64Attribute{Description: f.Description, Required: required, Optional: optional, Computed: computed,
			Validators: f.IntValidators}
		if n, ok := f.Default.(float64); ok {
			a.Default = int64default.StaticInt64(int64(n))
		}
		if f.Immutable {
			a.PlanModifiers = []planmodifier.Int64{int64planmodifier.RequiresReplace()}
		}
		return a, nil
	case Bool:
		a := schema.BoolAttribute{Description: f.Description, Required: required, Optional: optional, Computed: computed}
		if b, ok := f.Default.(bool); ok {
			a.Default = booldefault.StaticBool(b)
		}
		if f.Immutable {
			a.PlanModifiers = []planmodifier.Bool{boolplanmodifier.RequiresReplace()}
		}
		return a, nil
	case Map:
		a := schema.MapAttribute{Description: f.Description, Required: required, Optional: optional, Computed: computed,
			ElementType: types.StringType, Validators: f.MapValidators}
		if f.Immutable {
			a.PlanModifiers = []planmodifier.Map{mapplanmodifier.RequiresReplace()}
		}
		return a, f.noDefault()
	case Object:
		children, err := resourceAttributes(f, nil)
		if err != nil {
			return nil, err
		}
		a := schema.SingleNestedAttribute{Description: f.Description, Required: required, Optional: optional, Computed: computed,
			Attributes: children, Validators: f.ObjectValidators}
		if f.Default != nil {
			v, err := defaultValue(f, a.GetType())
			if err != nil {
				return nil, err
			}
			a.Default = objectdefault.StaticValue(v.(types.Object))
		}
		if f.Immutable {
			a.PlanModifiers = []planmodifier.Object{objectplanmodifier.RequiresReplace()}
		}
		return a, nil
	case List:
		var mods []planmodifier.List
		if f.Immutable {
			mods = []planmodifier.List{listplanmodifier.RequiresReplace()}
		}
		if f.Elem.Type == Object {
			children, err := resourceAttributes(f.Elem, nil)
			if err != nil {
				return nil, err
			}
			return schema.ListNestedAttribute{Description: f.Description, Required: required, Optional: optional,
				NestedObject:  schema.NestedAttributeObject{Attributes: children, Validators: f.Elem.ObjectValidators},
				Validators:    f.ListValidators,
				PlanModifiers: mods,
			}, f.noDefault()
		}
		return schema.ListAttribute{Description: f.Description, Required: required, Optional: optional,
			ElementType: scalarType(f.Elem), Validators: f.ListValidators, PlanModifiers: mods}, f.noDefault()
	}
	return nil, fmt.Errorf("unsupported type %d", f.Type)
}

// withDocumentation returns the field with a description that also states
// its default, its constraints and whether changing it replaces the object,
// so the generated docs say what plan will check.
func withDocumentation(f *Field, serverDefaulted bool) *Field {
	ctx := context.Background()
	var notes []string
	if f.Default != nil {
		notes = append(notes, fmt.Sprintf("Default: `%s`.", hclValue(f, f.Default)))
	}
	if serverDefaulted {
		notes = append(notes, "Set by the cluster's admission policy when left unset.")
	}
	var constraints []string
	for _, v := range f.StringValidators {
		constraints = append(constraints, v.Description(ctx))
	}
	for _, v := range f.IntValidators {
		constraints = append(constraints, v.Description(ctx))
	}
	for _, v := range f.ListValidators {
		constraints = append(constraints, v.Description(ctx))
	}
	for _, v := range f.MapValidators {
		constraints = append(constraints, v.Description(ctx))
	}
	for _, v := range f.ObjectValidators {
		constraints = append(constraints, v.Description(ctx))
	}
	if len(constraints) > 0 {
		notes = append(notes, "Checked at plan: "+strings.Join(constraints, "; ")+".")
	}
	if f.Immutable {
		notes = append(notes, "Changing it replaces the object.")
	}
	if len(notes) == 0 {
		return f
	}
	documented := *f
	documented.Description = strings.TrimSpace(f.Description + " " + strings.Join(notes, " "))
	return &documented
}

// noDefault refuses a CRD default the emitters cannot express yet, so a
// new one fails the build instead of planning values the server changes.
func (f *Field) noDefault() error {
	if f.Default != nil {
		return fmt.Errorf("defaults of this type are not supported")
	}
	return nil
}

func defaultValue(f *Field, typ attr.Type) (attr.Value, error) {
	ctx := context.Background()
	v, err := FromJSON(withDefaults(f.Default, f), f, typ.TerraformType(ctx))
	if err != nil {
		return nil, fmt.Errorf("default: %w", err)
	}
	return typ.ValueFromTerraform(ctx, v)
}

// withDefaults fills in the defaults of fields under a default value, as
// the API server's structural defaulting does after it applies the outer
// default.
func withDefaults(j any, f *Field) any {
	switch v := j.(type) {
	case map[string]any:
		if f.Type != Object {
			return v
		}
		out := make(map[string]any, len(f.Fields))
		for k, e := range v {
			out[k] = e
		}
		for _, c := range f.Fields {
			if _, ok := out[c.JSON]; !ok && c.Default != nil {
				out[c.JSON] = c.Default
			}
			if e, ok := out[c.JSON]; ok {
				out[c.JSON] = withDefaults(e, c)
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = withDefaults(e, f.Elem)
		}
		return out
	}
	return j
}

func scalarType(f *Field) attr.Type {
	switch f.Type {
	case Int:
		return types.Int64Type
	case Bool:
		return types.BoolType
	default:
		return types.StringType
	}
}

// ComputedAttributes returns an object's fields as read-only resource
// attributes, for the status.
func ComputedAttributes(f *Field) map[string]schema.Attribute {
	attrs := make(map[string]schema.Attribute, len(f.Fields))
	for _, c := range f.Fields {
		switch {
		case c.Type == Object:
			attrs[c.Name] = schema.SingleNestedAttribute{Description: c.Description, Computed: true, Attributes: ComputedAttributes(c)}
		case c.Type == List && c.Elem.Type == Object:
			attrs[c.Name] = schema.ListNestedAttribute{Description: c.Description, Computed: true,
				NestedObject: schema.NestedAttributeObject{Attributes: ComputedAttributes(c.Elem)}}
		case c.Type == List:
			attrs[c.Name] = schema.ListAttribute{Description: c.Description, Computed: true, ElementType: scalarType(c.Elem)}
		case c.Type == Map:
			attrs[c.Name] = schema.MapAttribute{Description: c.Description, Computed: true, ElementType: types.StringType}
		default:
			attrs[c.Name] = computedScalar(c)
		}
	}
	return attrs
}

func computedScalar(f *Field) schema.Attribute {
	switch f.Type {
	case Int:
		return schema.Int64Attribute{Description: f.Description, Computed: true}
	case Bool:
		return schema.BoolAttribute{Description: f.Description, Computed: true}
	default:
		return schema.StringAttribute{Description: f.Description, Computed: true}
	}
}

// DataSourceAttributes returns an object's fields as data source
// attributes, all read from the cluster.
func DataSourceAttributes(f *Field) map[string]dschema.Attribute {
	attrs := make(map[string]dschema.Attribute, len(f.Fields))
	for _, c := range f.Fields {
		switch {
		case c.Type == Object:
			attrs[c.Name] = dschema.SingleNestedAttribute{Description: c.Description, Computed: true, Attributes: DataSourceAttributes(c)}
		case c.Type == List && c.Elem.Type == Object:
			attrs[c.Name] = dschema.ListNestedAttribute{Description: c.Description, Computed: true,
				NestedObject: dschema.NestedAttributeObject{Attributes: DataSourceAttributes(c.Elem)}}
		case c.Type == List:
			attrs[c.Name] = dschema.ListAttribute{Description: c.Description, Computed: true, ElementType: scalarType(c.Elem)}
		case c.Type == Map:
			attrs[c.Name] = dschema.MapAttribute{Description: c.Description, Computed: true, ElementType: types.StringType}
		case c.Type == Int:
			attrs[c.Name] = dschema.Int64Attribute{Description: c.Description, Computed: true}
		case c.Type == Bool:
			attrs[c.Name] = dschema.BoolAttribute{Description: c.Description, Computed: true}
		default:
			attrs[c.Name] = dschema.StringAttribute{Description: c.Description, Computed: true}
		}
	}
	return attrs
}

// SpecAttribute is the resource's spec: the CRD spec as a required nested
// attribute, named and shaped as in YAML.
func SpecAttribute(k *Kind, serverDefaulted map[string]bool) (schema.SingleNestedAttribute, error) {
	children, err := resourceAttributes(k.Spec, serverDefaulted)
	if err != nil {
		return schema.SingleNestedAttribute{}, fmt.Errorf("%s spec: %w", k.GVK.Kind, err)
	}
	return schema.SingleNestedAttribute{
		Description: k.Spec.Description,
		Required:    true,
		Attributes:  children,
		Validators:  k.Spec.ObjectValidators,
	}, nil
}

// hclValue writes a CRD default as it would be written in a configuration:
// an object's keys as attribute names ({ cluster_dns = true }).
func hclValue(f *Field, v any) string {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			var child *Field
			name := strconv.Quote(k)
			if f != nil && f.Type == Object {
				for _, c := range f.Fields {
					if c.JSON == k {
						child, name = c, c.Name
					}
				}
			} else if f != nil {
				child = f.Elem
			}
			parts = append(parts, name+" = "+hclValue(child, v[k]))
		}
		return "{ " + strings.Join(parts, ", ") + " }"
	case []any:
		parts := make([]string, 0, len(v))
		for _, e := range v {
			var elem *Field
			if f != nil {
				elem = f.Elem
			}
			parts = append(parts, hclValue(elem, e))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}
