package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/agentsandbox/terraform-provider-agentsandbox/provider/crdschema"
)

// TestMissingCRDNamesTheInstallStep: the error a client gives when the
// cluster does not know the kind tells the user how to install it, and
// still wraps the original.
func TestMissingCRDNamesTheInstallStep(t *testing.T) {
	k, err := WarmPool.loaded()
	if err != nil {
		t.Fatal(err)
	}
	noMatch := &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "agentsandbox.dev", Kind: "WarmPool"}, SearchedVersions: []string{"v1alpha1"}}
	err = objects{kind: k}.explain(noMatch, "apply", "python")
	for _, want := range []string{`warm pool "python"`, "CRDs are not installed", "kubectl apply --server-side -k config/"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	var target *meta.NoKindMatchError
	if !errors.As(err, &target) {
		t.Errorf("the original error is not wrapped: %v", err)
	}
}

// TestRemovals: what another writer added to a spec is removed; values the
// server decides (unknown in the plan) and unchanged lists are left alone.
func TestRemovals(t *testing.T) {
	desired := map[string]any{
		"image": "a", "owner": crdschema.Unknown, "env": []any{"x"},
		"network": map[string]any{"clusterDNS": true},
	}
	live := map[string]any{
		"image": "a", "owner": "alice", "env": []any{"x", "y"}, "workingDir": "/tmp",
		"network": map[string]any{"clusterDNS": true, "egress": []any{}},
	}
	patch, extra := removals(desired, live)
	if !extra {
		t.Fatal("no removals found")
	}
	want := "map[env:[x] network:map[egress:<nil>] workingDir:<nil>]"
	if got := fmt.Sprint(patch); got != want {
		t.Errorf("patch = %s, want %s", got, want)
	}
	if _, extra := removals(desired, map[string]any{"image": "b", "owner": "alice", "env": []any{"z"}}); extra {
		t.Error("removals found in a spec with nothing extra")
	}
}

// TestRemovalsCases: what the merge patch of removals holds, case by case.
func TestRemovalsCases(t *testing.T) {
	for name, tc := range map[string]struct {
		desired, live map[string]any
		want          string // fmt of the patch; "" for none
	}{
		"nothing extra": {
			map[string]any{"a": "x"}, map[string]any{"a": "y"}, "",
		},
		"a key another writer added": {
			map[string]any{"a": "x"}, map[string]any{"a": "x", "b": 1}, "map[b:<nil>]",
		},
		"a key deep inside": {
			map[string]any{"n": map[string]any{"m": map[string]any{"k": 1}}},
			map[string]any{"n": map[string]any{"m": map[string]any{"k": 1, "extra": 2}}},
			"map[n:map[m:map[extra:<nil>]]]",
		},
		"an unknown object is the server's": {
			map[string]any{"n": crdschema.Unknown}, map[string]any{"n": map[string]any{"k": 1}}, "",
		},
		"a list that gained elements goes back to the declared ones": {
			map[string]any{"l": []any{}}, map[string]any{"l": []any{"x"}}, "map[l:[]]",
		},
		"a list of the same length is left to the apply": {
			map[string]any{"l": []any{"x"}}, map[string]any{"l": []any{"y"}}, "",
		},
		"a map where the declaration has a scalar": {
			map[string]any{"v": "s"}, map[string]any{"v": map[string]any{"k": 1}}, "",
		},
	} {
		patch, extra := removals(tc.desired, tc.live)
		got := ""
		if extra {
			got = fmt.Sprint(patch)
		}
		if got != tc.want {
			t.Errorf("%s: patch %q, want %q", name, got, tc.want)
		}
	}
}
