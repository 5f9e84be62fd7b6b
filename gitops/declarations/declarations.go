// Package declarations reads the agentsandbox.dev objects a directory
// declares: every *.yaml and *.yml file below it, each possibly holding
// several documents, decoded strictly so a typo is an error naming the file,
// document, line and field instead of a field silently dropped.
package declarations

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// Kinds are the kinds a GitSync applies: the API's, in apply order.
// Anything else is refused: the reconciler's RBAC covers these kinds only,
// and Git should not become a way around the admission rules that guard
// namespaces, pods and RBAC.
var Kinds = v1.Kinds

// Declaration is one object and where it was declared.
type Declaration struct {
	// Object holds exactly the fields the document sets, so applying it
	// owns no field the author left out.
	Object *unstructured.Unstructured
	// File is the path relative to the directory read; Doc counts the
	// documents of the file from 1.
	File string
	Doc  int
}

// Where is "file, document n", the location errors name.
func (d Declaration) Where() string { return fmt.Sprintf("%s, document %d", d.File, d.Doc) }

// ID is group_kind_name, the inventory key of a cluster-scoped object.
func ID(obj *unstructured.Unstructured) string {
	gvk := obj.GroupVersionKind()
	return gvk.Group + "_" + gvk.Kind + "_" + obj.GetName()
}

// ReadDir reads the declarations below root (a checkout) and path inside
// it. Files are read in lexical order, so errors and results are stable.
func ReadDir(root, path string) ([]Declaration, error) {
	dir := filepath.Join(root, filepath.FromSlash(path))
	if rel, err := filepath.Rel(root, dir); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, fmt.Errorf("path %q is outside the repository", path)
	}
	// A path through a symbolic link could lead out of the checkout, or
	// read as an empty directory, which prunes everything: refused.
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, err
	}
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("path %q: not found in the repository", path)
	}
	if rel, _ := filepath.Rel(root, dir); realDir != filepath.Join(realRoot, rel) {
		return nil, fmt.Errorf("path %q goes through a symbolic link, which is not followed", path)
	}
	info, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("path %q is not a directory", path)
	}
	var files []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	var out []Declaration
	seen := map[string]string{}
	for _, f := range files {
		rel, _ := filepath.Rel(dir, f)
		rel = filepath.ToSlash(rel)
		if d, err := os.Lstat(f); err == nil && d.Mode()&fs.ModeSymlink != 0 {
			return nil, fmt.Errorf("%s: symbolic links are not followed", rel)
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		decls, err := Decode(rel, data)
		if err != nil {
			return nil, err
		}
		for _, d := range decls {
			id := ID(d.Object)
			if prev, ok := seen[id]; ok {
				return nil, fmt.Errorf("%s: %s %q is declared twice (also in %s)", d.Where(), d.Object.GetKind(), d.Object.GetName(), prev)
			}
			seen[id] = d.Where()
		}
		out = append(out, decls...)
	}
	return out, nil
}

// Decode splits the YAML file named file into documents and decodes each.
// Empty documents (comments only, say) are skipped but still counted, so
// document numbers match what an editor shows.
func Decode(file string, data []byte) ([]Declaration, error) {
	docs, err := splitDocuments(data)
	if err != nil {
		return nil, fmt.Errorf("%s, %w", file, err)
	}
	var out []Declaration
	for i, doc := range docs {
		if doc.empty {
			continue
		}
		obj, err := decodeDocument(doc)
		if err != nil {
			return nil, fmt.Errorf("%s, document %d: %w", file, i+1, err)
		}
		out = append(out, Declaration{Object: obj, File: file, Doc: i + 1})
	}
	return out, nil
}

// decodeDocument checks one document against the Go types of the API, as
// strictly as the API server would with fieldValidation=Strict, and returns
// it as the author wrote it.
func decodeDocument(doc document) (*unstructured.Unstructured, error) {
	raw, firstLine := doc.text, doc.line
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("invalid YAML: %w", err)
	}
	var m map[string]any
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(js, &m); err != nil || m == nil || doc.keys < 0 {
		return nil, errors.New("a document must be a mapping with apiVersion, kind, metadata and spec")
	}
	// The text given to the converter is the document the stream decoder
	// found, and nothing of it may be lost on the way.
	if len(m) != doc.keys {
		return nil, fmt.Errorf("line %d: the document has %d top-level fields, of which only %d could be read", firstLine, doc.keys, len(m))
	}
	u := &unstructured.Unstructured{Object: m}
	gvk := u.GroupVersionKind()
	if gvk.GroupVersion() != v1.GroupVersion || !slices.Contains(Kinds, gvk.Kind) {
		return nil, fmt.Errorf("apiVersion %q kind %q is not accepted: a GitSync applies only %s kinds %s",
			u.GetAPIVersion(), u.GetKind(), v1.GroupVersion, strings.Join(Kinds, ", "))
	}
	typed, err := scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	strictErrs, err := sigsjson.UnmarshalStrict(js, typed)
	if err != nil {
		msg := err.Error()
		if fieldInError.FindStringSubmatch(msg) == nil {
			// A type's own decoder (a duration's, a quantity's) names
			// no field: find the one that fails on its own.
			if path := failingField(gvk, m, nil); path != "" {
				msg = fmt.Sprintf("field %q: %s", path, msg)
			}
		}
		return nil, fmt.Errorf("%s: %s", gvk.Kind, withLine(raw, firstLine, msg))
	}
	if len(strictErrs) > 0 {
		msgs := make([]string, len(strictErrs))
		for i, e := range strictErrs {
			msgs[i] = withLine(raw, firstLine, e.Error())
		}
		return nil, fmt.Errorf("%s: %s", gvk.Kind, strings.Join(msgs, "; "))
	}
	if u.GetName() == "" {
		return nil, fmt.Errorf("%s: metadata.name is required", gvk.Kind)
	}
	if u.GetNamespace() != "" {
		return nil, fmt.Errorf("%s %q: metadata.namespace must be unset: the kind is cluster-scoped", gvk.Kind, u.GetName())
	}
	if _, ok := m["status"]; ok {
		return nil, fmt.Errorf("%s %q: status is written by the reconciler and cannot be declared", gvk.Kind, u.GetName())
	}
	return u, nil
}

// scheme knows the Go types of the accepted kinds.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := v1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()
