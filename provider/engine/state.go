package engine

import (
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/agentsandbox/terraform-provider-agentsandbox/provider/crdschema"
)

// objectValue is the Terraform value of a live object, with the attributes
// of typ: name, id, labels, annotations, spec and status from the object;
// anything else (timeouts, wait_for_ready) from prior, or null.
func (k *Kind) objectValue(typ tftypes.Object, obj *unstructured.Unstructured, prior map[string]tftypes.Value) (tftypes.Value, error) {
	attrs := make(map[string]tftypes.Value, len(typ.AttributeTypes))
	for name, attrType := range typ.AttributeTypes {
		var v tftypes.Value
		var err error
		switch name {
		case "id", "name":
			v = tftypes.NewValue(attrType, obj.GetName())
		case "labels":
			v = metadataValue(attrType, obj.GetLabels(), prior[name])
		case "annotations":
			v = metadataValue(attrType, obj.GetAnnotations(), prior[name])
		case "spec":
			v, err = crdschema.FromJSON(obj.Object["spec"], k.schema.Spec, attrType)
		case "status":
			v, err = crdschema.FromJSON(obj.Object["status"], k.schema.Status, attrType)
		default:
			if p, ok := prior[name]; ok {
				v = p
			} else {
				v = tftypes.NewValue(attrType, nil)
			}
		}
		if err != nil {
			return tftypes.Value{}, fmt.Errorf("%s: %w", name, err)
		}
		attrs[name] = v
	}
	return tftypes.NewValue(typ, attrs), nil
}

// metadataValue keeps the configuration's labels or annotations, leaving
// out the system's. An empty map stays empty when the configuration said
// {}, and is null otherwise.
func metadataValue(typ tftypes.Type, m map[string]string, prior tftypes.Value) tftypes.Value {
	elems := map[string]tftypes.Value{}
	for k, v := range m {
		if !isSystemKey(k) {
			elems[k] = tftypes.NewValue(tftypes.String, v)
		}
	}
	if len(elems) == 0 && (prior.IsNull() || !prior.IsKnown()) {
		return tftypes.NewValue(typ, nil)
	}
	return tftypes.NewValue(typ, elems)
}

func isSystemKey(k string) bool {
	for _, p := range systemMetadataPrefixes {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

// desiredObject builds the object a plan declares, and its spec with
// crdschema.Unknown where the server decides.
func (k *Kind) desiredObject(plan map[string]tftypes.Value) (*unstructured.Unstructured, map[string]any, error) {
	var name string
	if err := plan["name"].As(&name); err != nil {
		return nil, nil, err
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(k.schema.GVK)
	u.SetName(name)
	for attr, set := range map[string]func(map[string]string){"labels": u.SetLabels, "annotations": u.SetAnnotations} {
		var m map[string]tftypes.Value
		if err := plan[attr].As(&m); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", attr, err)
		}
		if len(m) == 0 {
			continue
		}
		out := make(map[string]string, len(m))
		for key, v := range m {
			var s string
			if err := v.As(&s); err != nil {
				return nil, nil, fmt.Errorf("%s[%q]: %w", attr, key, err)
			}
			out[key] = s
		}
		set(out)
	}
	spec, err := crdschema.ToJSON(plan["spec"], k.schema.Spec)
	if err != nil {
		return nil, nil, fmt.Errorf("spec: %w", err)
	}
	specMap, _ := spec.(map[string]any)
	if specMap == nil {
		specMap = map[string]any{}
	}
	return u, specMap, nil
}
