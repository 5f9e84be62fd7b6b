package v1alpha1_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// TestMalformedObjectsAreInvalidNotForbidden posts objects no schema
// accepts, as raw JSON (a typed client cannot send them) with strict field
// validation, as kubectl does: as an admin, and as a developer whose RBAC
// lets them create sandboxes. The API server must answer 400 or 422 naming
// the field; a 403 comes only where the caller is really not allowed, never
// from an admission policy that tripped over the object before the schema
// saw it.
func TestMalformedObjectsAreInvalidNotForbidden(t *testing.T) {
	t.Parallel()
	cluster := testcluster.Get(t)
	developer := testcluster.Name("typo") + "@example.com"
	cluster.BindUsers(t, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: developer})

	cases := []struct {
		name string
		// kind is the resource (plural) posted to; spec is the JSON of the
		// object's spec, or "" for none.
		kind, spec string
		// as is who posts: "" is the admin.
		as string
		// status is the HTTP status wanted, and say what its message must
		// contain: for 400 and 422 the path of the field.
		status int
		say    string
	}{
		{"sandbox with a warm pool reference as a string", "sandboxes", `{"warmPoolRef":"python"}`, "", 422, "spec.warmPoolRef"},
		{"sandbox with a warm pool reference as a string, by a developer", "sandboxes", `{"warmPoolRef":"python"}`, developer, 422, "spec.warmPoolRef"},
		{"sandbox without spec", "sandboxes", "", developer, 422, "spec: Required value"},
		{"sandbox with spec a string", "sandboxes", `"python"`, developer, 422, "spec: Invalid value"},
		{"sandbox with owner a number", "sandboxes", `{"templateRef":{"name":"python"},"owner":5}`, developer, 422, "spec.owner"},
		{"sandbox with an env list as a string", "sandboxes", `{"templateRef":{"name":"python"},"env":"A=1"}`, developer, 422, "spec.env"},
		{"sandbox with an unknown field", "sandboxes", `{"templateRef":{"name":"python"},"warmpoolRef":{"name":"python"}}`, developer, 400, `unknown field "spec.warmpoolRef"`},
		{"sandbox for someone else, by a developer", "sandboxes", `{"templateRef":{"name":"python"},"owner":"someone-else@example.com"}`, developer, 403, "belongs to someone-else@example.com"},
		{"warm pool without spec", "warmpools", "", "", 422, "spec: Required value"},
		{"warm pool with replicas a string", "warmpools", `{"templateRef":{"name":"python"},"replicas":"three"}`, "", 422, "spec.replicas"},
		{"warm pool with an unknown field", "warmpools", `{"templateRef":{"name":"python"},"size":3}`, "", 400, `unknown field "spec.size"`},
		{"warm pool, by a developer", "warmpools", `{"templateRef":{"name":"python"},"replicas":"three"}`, developer, 403, "cannot create resource \"warmpools\""},
		{"template without spec", "sandboxtemplates", "", "", 422, "spec: Required value"},
		{"template with image a number", "sandboxtemplates", `{"image":3}`, "", 422, "spec.image"},
		{"template with resources a string", "sandboxtemplates", `{"image":"python:3.12","resources":"2 CPUs"}`, "", 422, "spec.resources"},
		{"template with an unknown field", "sandboxtemplates", `{"image":"python:3.12","imagePolicy":"Always"}`, "", 400, `unknown field "spec.imagePolicy"`},
		{"node pool without spec", "nodepools", "", "", 422, "spec: Required value"},
		{"node pool with a node selector as a list", "nodepools", `{"runtimeHandler":"runsc","nodeSelector":["pool=gvisor"]}`, "", 422, "spec.nodeSelector"},
		{"node pool with an unknown field", "nodepools", `{"runtimeHandler":"runsc","nodeSelector":{"pool":"gvisor"},"handler":"runsc"}`, "", 400, `unknown field "spec.handler"`},
		{"git sync without spec", "gitsyncs", "", "", 422, "spec: Required value"},
		{"git sync with an interval as a number", "gitsyncs", `{"url":"https://example.com/repo.git","interval":60}`, "", 422, "spec.interval"},
		{"git sync with a ref as a string", "gitsyncs", `{"url":"https://example.com/repo.git","ref":"main"}`, "", 422, "spec.ref"},
		{"git sync with an unknown field", "gitsyncs", `{"url":"https://example.com/repo.git","branch":"main"}`, "", 400, `unknown field "spec.branch"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			status, message := post(t, cluster.Config, tc.as, tc.kind, testcluster.Name("malformed"), tc.spec)
			if status != tc.status || !strings.Contains(message, tc.say) {
				t.Errorf("got %d %q; want %d saying %q", status, message, tc.status, tc.say)
			}
			if strings.Contains(message, "policy") && tc.status != http.StatusForbidden {
				t.Errorf("an admission policy answered a malformed object: %s", message)
			}
		})
	}
}

// post creates an object of kind (plural) named name with the raw spec ("":
// none), as user ("": the admin), and returns the HTTP status and the
// message of the API server's answer.
func post(t *testing.T, admin *rest.Config, user, kind, name, spec string) (int, string) {
	t.Helper()
	cfg := rest.CopyConfig(admin)
	if user != "" {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{"sandboxes": "Sandbox", "warmpools": "WarmPool", "sandboxtemplates": "SandboxTemplate", "nodepools": "NodePool", "gitsyncs": "GitSync"}
	body := fmt.Sprintf(`{"apiVersion":%q,"kind":%q,"metadata":{"name":%q}`, v1.GroupVersion.String(), kinds[kind], name)
	if spec != "" {
		body += `,"spec":` + spec
	}
	body += "}"
	url := fmt.Sprintf("%s/apis/%s/%s?fieldValidation=Strict", strings.TrimSuffix(cfg.Host, "/"), v1.GroupVersion.String(), kind)
	resp, err := hc.Post(url, "application/json", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode < 300 {
		t.Cleanup(func() { deleteRaw(t, hc, url, name) })
	}
	var status metav1.Status
	if err := json.Unmarshal(answer, &status); err != nil || status.Message == "" {
		return resp.StatusCode, string(answer)
	}
	return resp.StatusCode, status.Message
}

// deleteRaw deletes what post created by mistake.
func deleteRaw(t *testing.T, hc *http.Client, collection, name string) {
	base, _, _ := strings.Cut(collection, "?")
	req, err := http.NewRequestWithContext(context.Background(), http.MethodDelete, base+"/"+name, nil)
	if err != nil {
		t.Error(err)
		return
	}
	if resp, err := hc.Do(req); err == nil {
		_ = resp.Body.Close()
	}
}
