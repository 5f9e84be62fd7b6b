package webui_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// TestClaimMistakesAreTheUsers: a new sandbox from a template or pool that
// does not exist, or under a name that is taken, is the user's mistake:
// answered 4xx with what to fix, not 502 as if the server had failed.
func TestClaimMistakesAreTheUsers(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	alice := c.Developers(t, "alice")[0]
	base := serve(t, alice.Config)
	page, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(page.Body)
	_ = page.Body.Close()
	token := csrfToken(t, body)

	ctx := context.Background()
	tpl := &v1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("mistake")}, Spec: v1.SandboxTemplateSpec{Image: "python:3.12"}}
	taken := &v1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("taken")},
		Spec: v1.SandboxSpec{TemplateRef: &v1.LocalObjectReference{Name: tpl.Name}, Owner: alice.Name}}
	for _, obj := range []client.Object{tpl, taken} {
		if err := c.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Client.Delete(ctx, obj) })
	}

	for _, tc := range []struct {
		from, name string
		code       int
		says       string
	}{
		{"template/no-such-template", "", http.StatusUnprocessableEntity, "template no-such-template not found"},
		{"pool/no-such-pool", "", http.StatusUnprocessableEntity, "warm pool no-such-pool not found"},
		{"template/" + tpl.Name, taken.Name, http.StatusConflict, "sandbox " + taken.Name + " already exists"},
	} {
		form, _ := json.Marshal(map[string]string{"from": tc.from, "name": tc.name})
		req, _ := http.NewRequest(http.MethodPost, base+"/api/sandboxes", strings.NewReader(string(form)))
		req.Header.Set("Origin", base)
		req.Header.Set("X-CSRF-Token", token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		var answer struct{ Error string }
		_ = json.Unmarshal(data, &answer)
		if resp.StatusCode != tc.code || answer.Error != tc.says {
			t.Errorf("new sandbox from %s named %q: %d %s; want %d %q", tc.from, tc.name, resp.StatusCode, data, tc.code, tc.says)
		}
	}
}
