package declarations

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const pool = `apiVersion: agentsandbox.dev/v1alpha1
kind: NodePool
metadata:
  name: gvisor
spec:
  runtimeHandler: runsc
`

// brokenInputs are documents every GitSync must refuse, with what the error
// has to say; they also seed the fuzz target.
var brokenInputs = []struct {
	name, doc string
	want      []string
}{
	{"broken YAML", "apiVersion: agentsandbox.dev/v1alpha1\nkind: NodePool\nmetadata: [name: x\n", []string{"invalid YAML"}},
	{"unknown field", "apiVersion: agentsandbox.dev/v1alpha1\nkind: NodePool\nmetadata:\n  name: x\nspec:\n  runtimeHandler: runsc\n  runtimeHandlr: runsc\n",
		[]string{"line 14", `unknown field "spec.runtimeHandlr"`}},
	{"unknown field in a list item", "apiVersion: agentsandbox.dev/v1alpha1\nkind: NodePool\nmetadata:\n  name: x\nspec:\n  taints:\n  - key: a\n    efect: NoSchedule\n",
		[]string{"line 15", `unknown field "spec.taints[0].efect"`}},
	{"duplicate field", "apiVersion: agentsandbox.dev/v1alpha1\nkind: NodePool\nmetadata:\n  name: x\nspec:\n  runtimeHandler: a\n  runtimeHandler: b\n",
		[]string{"line 14", `"runtimeHandler" already defined at line 13`}},
	{"wrong type", "apiVersion: agentsandbox.dev/v1alpha1\nkind: WarmPool\nmetadata:\n  name: x\nspec:\n  replicas: three\n", []string{"WarmPool", "line 13", "spec.replicas"}},
	{"value its type's decoder refuses", "apiVersion: agentsandbox.dev/v1alpha1\nkind: Sandbox\nmetadata:\n  name: x\nspec:\n  templateRef: {name: t}\n  ttl: 3 days\n",
		[]string{"Sandbox", "line 14", `field "spec.ttl"`, `unknown unit`}},
	{"block mapping out of line", "apiVersion: agentsandbox.dev/v1alpha1\nkind: NodePool\nmetadata:\n  name: x\nspec:\n  runtimeHandler: runsc\n  nodeSelector:\n    a: b\n   c: d\n",
		[]string{"invalid YAML: line 16:"}},
	{"unclosed flow sequence", "apiVersion: agentsandbox.dev/v1alpha1\nkind: NodePool\nmetadata:\n  name: x\nspec:\n  taints: [\n  runtimeHandler: runsc\n",
		[]string{"invalid YAML: line 14:", "opens on line 13"}},
	{"unknown kind", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n", []string{`kind "ConfigMap" is not accepted`}},
	{"unknown kind of the group", "apiVersion: agentsandbox.dev/v1alpha1\nkind: Widget\nmetadata:\n  name: x\n", []string{`kind "Widget" is not accepted`}},
	{"namespaced", "apiVersion: agentsandbox.dev/v1alpha1\nkind: NodePool\nmetadata:\n  name: x\n  namespace: default\n", []string{"metadata.namespace must be unset"}},
	{"no name", "apiVersion: agentsandbox.dev/v1alpha1\nkind: NodePool\nspec: {}\n", []string{"metadata.name is required"}},
	{"status", "apiVersion: agentsandbox.dev/v1alpha1\nkind: NodePool\nmetadata:\n  name: x\nstatus: {}\n", []string{"status"}},
	{"scalar document", "just a string\n", []string{"must be a mapping"}},
	{"list document", "- a\n- b\n", []string{"must be a mapping"}},
}

func TestDecodeRefuses(t *testing.T) {
	for _, tc := range brokenInputs {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode("pools/bad.yaml", []byte(pool+"---\n"+tc.doc))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range append([]string{"pools/bad.yaml, document 2"}, tc.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestDecodeMultiDocument(t *testing.T) {
	data := "# leading comment only\n---\n" + pool + "---\n---\n" + strings.ReplaceAll(pool, "gvisor", "runc") + "...\n"
	decls, err := Decode("p.yaml", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(decls) != 2 || decls[0].Object.GetName() != "gvisor" || decls[1].Object.GetName() != "runc" {
		t.Fatalf("decoded %v", decls)
	}
	// As in YAML, a comment before the first "---" is no document of
	// its own; an empty one between two "---" is.
	if decls[0].Doc != 1 || decls[1].Doc != 3 {
		t.Errorf("document numbers %d, %d; want 1, 3", decls[0].Doc, decls[1].Doc)
	}
	// Only declared fields: applying must not own fields the author left out.
	if _, ok := decls[0].Object.Object["status"]; ok {
		t.Error("decoded object has a status")
	}
	if got := ID(decls[0].Object); got != "agentsandbox.dev_NodePool_gvisor" {
		t.Errorf("ID = %q", got)
	}
}

// A document may start on its "---" line, and no way of starting or
// ending one may lose it: every declaration in the stream is decoded.
func TestDecodeEveryDocumentOfTheStream(t *testing.T) {
	flow := "--- {apiVersion: agentsandbox.dev/v1alpha1, kind: NodePool, metadata: {name: flow}, spec: {runtimeHandler: runsc}}\n"
	data := flow + "--- # a comment on the marker line\n" + strings.ReplaceAll(pool, "gvisor", "second") + "...\n---\n" + strings.ReplaceAll(pool, "gvisor", "third")
	decls, err := Decode("p.yaml", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range decls {
		names = append(names, fmt.Sprintf("%s@%d", d.Object.GetName(), d.Doc))
	}
	if got := strings.Join(names, " "); got != "flow@1 second@2 third@3" {
		t.Errorf("decoded %s, want flow@1 second@2 third@3", got)
	}

	// An error in a document that starts on its marker line names the
	// file's line.
	_, err = Decode("p.yaml", []byte(pool+"--- {apiVersion: agentsandbox.dev/v1alpha1, kind: NodePool, metadata: {name: x},\n  spec: {runtimeHandlr: runsc}}\n"))
	if err == nil || !strings.Contains(err.Error(), "document 2") || !strings.Contains(err.Error(), "line 8") || !strings.Contains(err.Error(), "spec.runtimeHandlr") {
		t.Errorf("unknown field in a flow document: %v", err)
	}
}

func TestReadDir(t *testing.T) {
	root := t.TempDir()
	write := func(name, content string) {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("deploy/b/pool.yml", pool)
	write("deploy/a.yaml", strings.ReplaceAll(pool, "gvisor", "runc"))
	write("deploy/README.md", "not yaml")
	write("other/x.yaml", "kind: Junk\n")

	decls, err := ReadDir(root, "./deploy")
	if err != nil {
		t.Fatal(err)
	}
	if len(decls) != 2 || decls[0].File != "a.yaml" || decls[1].File != "b/pool.yml" {
		t.Fatalf("ReadDir = %+v", decls)
	}

	write("deploy/c.yaml", pool)
	if _, err := ReadDir(root, "deploy"); err == nil || !strings.Contains(err.Error(), `NodePool "gvisor" is declared twice (also in b/pool.yml, document 1)`) {
		t.Errorf("duplicate: %v", err)
	}
	if _, err := ReadDir(root, "missing"); err == nil || !strings.Contains(err.Error(), `path "missing": not found`) {
		t.Errorf("missing path: %v", err)
	}
	if _, err := ReadDir(root, "../etc"); err == nil || !strings.Contains(err.Error(), "outside the repository") {
		t.Errorf("escaping path: %v", err)
	}
	if err := os.Symlink(t.TempDir(), filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"link", "link/sub"} {
		if err := os.MkdirAll(filepath.Join(root, p), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadDir(root, p); err == nil || !strings.Contains(err.Error(), `goes through a symbolic link`) {
			t.Errorf("path %s through a symbolic link: %v", p, err)
		}
	}
	if err := os.Remove(filepath.Join(root, "deploy", "c.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/hostname", filepath.Join(root, "deploy", "z.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadDir(root, "deploy"); err == nil || !strings.Contains(err.Error(), "z.yaml: symbolic links are not followed") {
		t.Errorf("file that is a symbolic link: %v", err)
	}
}

// FuzzDecode: no input makes the decoder panic, and whatever it accepts is
// an accepted kind with a name.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(pool))
	for _, tc := range brokenInputs {
		f.Add([]byte(tc.doc))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		decls, err := Decode("f.yaml", data)
		if err != nil {
			return
		}
		for _, d := range decls {
			if d.Object.GetName() == "" || d.Object.GetAPIVersion() != "agentsandbox.dev/v1alpha1" {
				t.Errorf("accepted %v", d.Object.Object)
			}
		}
	})
}
