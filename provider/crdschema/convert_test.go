package crdschema

import (
	"encoding/json"
	"math/big"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// port is a small object field as the CRDs have them: a name in snake case
// for Terraform and camel case in JSON, a number, a flag and a map.
var port = &Field{Name: "port", JSON: "port", Type: Object, Fields: []*Field{
	{Name: "container_port", JSON: "containerPort", Type: Int},
	{Name: "name", JSON: "name", Type: String},
	{Name: "host_network", JSON: "hostNetwork", Type: Bool},
	{Name: "labels", JSON: "labels", Type: Map, Elem: &Field{Type: String}},
}}

var portType = tftypes.Object{AttributeTypes: map[string]tftypes.Type{
	"container_port": tftypes.Number, "name": tftypes.String, "host_network": tftypes.Bool,
	"labels": tftypes.Map{ElementType: tftypes.String},
}}

var portsField = &Field{Name: "ports", JSON: "ports", Type: List, Elem: port}
var portsType = tftypes.List{ElementType: portType}

func portValue(containerPort int64, name any, labels map[string]tftypes.Value) tftypes.Value {
	l := tftypes.NewValue(tftypes.Map{ElementType: tftypes.String}, nil)
	if labels != nil {
		l = tftypes.NewValue(tftypes.Map{ElementType: tftypes.String}, labels)
	}
	return tftypes.NewValue(portType, map[string]tftypes.Value{
		"container_port": tftypes.NewValue(tftypes.Number, new(big.Float).SetInt64(containerPort)),
		"name":           tftypes.NewValue(tftypes.String, name),
		"host_network":   tftypes.NewValue(tftypes.Bool, nil),
		"labels":         l,
	})
}

// TestToJSON: Terraform's values become the API server's JSON: names in
// camel case, nulls left out of objects, unknowns marked Unknown (the
// server decides them), numbers as integers.
func TestToJSON(t *testing.T) {
	unknownName := tftypes.NewValue(tftypes.String, tftypes.UnknownValue)
	list := tftypes.NewValue(portsType, []tftypes.Value{
		portValue(8888, "jupyter", map[string]tftypes.Value{"team": tftypes.NewValue(tftypes.String, "a")}),
		tftypes.NewValue(portType, map[string]tftypes.Value{
			"container_port": tftypes.NewValue(tftypes.Number, new(big.Float).SetInt64(22)),
			"name":           unknownName,
			"host_network":   tftypes.NewValue(tftypes.Bool, true),
			"labels":         tftypes.NewValue(tftypes.Map{ElementType: tftypes.String}, nil),
		}),
	})
	got, err := ToJSON(list, portsField)
	if err != nil {
		t.Fatal(err)
	}
	want := []any{
		map[string]any{"containerPort": int64(8888), "name": "jupyter", "labels": map[string]any{"team": "a"}},
		map[string]any{"containerPort": int64(22), "name": Unknown, "hostNetwork": true},
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b unknown) bool { return true })); diff != "" {
		t.Errorf("ToJSON (-want +got):\n%s", diff)
	}
	if got, err := ToJSON(tftypes.NewValue(portsType, tftypes.UnknownValue), portsField); err != nil || got != Unknown {
		t.Errorf("an unknown list: %v, %v; want Unknown", got, err)
	}
	if got, err := ToJSON(tftypes.NewValue(portsType, nil), portsField); err != nil || got != nil {
		t.Errorf("a null list: %v, %v; want nil", got, err)
	}
}

// TestFromJSON: what the server stores becomes Terraform's value of the
// schema's type: absent fields null, numbers in string fields (a quantity
// written as 2) their string, integers from any JSON number form.
func TestFromJSON(t *testing.T) {
	stored := []any{
		map[string]any{"containerPort": json.Number("8888"), "name": "jupyter", "labels": map[string]any{"team": "a"}},
		map[string]any{"containerPort": float64(22), "name": int64(2)},
	}
	got, err := FromJSON(stored, portsField, portsType)
	if err != nil {
		t.Fatal(err)
	}
	want := tftypes.NewValue(portsType, []tftypes.Value{
		portValue(8888, "jupyter", map[string]tftypes.Value{"team": tftypes.NewValue(tftypes.String, "a")}),
		portValue(22, "2", nil),
	})
	if !got.Equal(want) {
		t.Errorf("FromJSON:\n got %s\nwant %s", got, want)
	}
	// Back again: the round trip keeps what was stored.
	back, err := ToJSON(got, portsField)
	if err != nil || len(back.([]any)) != 2 || back.([]any)[1].(map[string]any)["name"] != "2" {
		t.Errorf("round trip: %v, %v", back, err)
	}
}

// TestFromJSONNamesWhatItCannotRead: a stored value of the wrong shape is
// an error naming the field and the type, not a silent null.
func TestFromJSONNamesWhatItCannotRead(t *testing.T) {
	_, err := FromJSON([]any{map[string]any{"containerPort": "eighty"}}, portsField, portsType)
	if err == nil || !strings.Contains(err.Error(), "[0]") || !strings.Contains(err.Error(), "containerPort") ||
		!strings.Contains(err.Error(), "cannot read string") {
		t.Errorf("a string where a number belongs: %v", err)
	}
	if _, err := FromJSON(map[string]any{}, portsField, portsType); err == nil {
		t.Error("an object where a list belongs was read")
	}
}
