package apply

import "testing"

func TestContains(t *testing.T) {
	have := map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"a": "1", "b": "2"}, "uid": "x"},
		"spec":     map[string]any{"ports": []any{map[string]any{"port": int64(53), "protocol": "UDP"}}, "replicas": int64(1)},
	}
	cases := []struct {
		name string
		want map[string]any
		ok   bool
	}{
		{"subset", map[string]any{"metadata": map[string]any{"labels": map[string]any{"a": "1"}}}, true},
		{"server defaults ignored", map[string]any{"spec": map[string]any{"ports": []any{map[string]any{"port": int64(53)}}}}, true},
		{"changed value", map[string]any{"spec": map[string]any{"replicas": int64(2)}}, false},
		{"missing label", map[string]any{"metadata": map[string]any{"labels": map[string]any{"c": "3"}}}, false},
		{"list length differs", map[string]any{"spec": map[string]any{"ports": []any{map[string]any{}, map[string]any{}}}}, false},
		{"empty list against absent", map[string]any{"spec": map[string]any{"egress": []any{}}}, true},
		{"absent map", map[string]any{"data": map[string]any{"k": "v"}}, false},
	}
	for _, tc := range cases {
		if got := Contains(have, tc.want); got != tc.ok {
			t.Errorf("%s: Contains = %v, want %v", tc.name, got, tc.ok)
		}
	}
}
