package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/echoprovider"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/reconciletest"
)

// TestMain runs the acceptance tests with OpenTofu from the tools step and
// the reconciler running in-process, the way `make test` and CI run them.
// Against a cluster that runs its own reconciler (a kind cluster with
// config/ deployed), set AGENTSANDBOX_TEST_RECONCILER=external.
func TestMain(m *testing.M) {
	if err := openTofuEnvironment(); err != nil {
		fmt.Fprintln(os.Stderr, "acceptance tests:", err)
		os.Exit(1)
	}
	if os.Getenv("AGENTSANDBOX_TEST_RECONCILER") == "external" {
		os.Exit(m.Run())
	}
	reconciletest.Main(m, func(mgr ctrl.Manager) error { return reconcile.SetupControllers(mgr) })
}

// openTofuEnvironment points terraform-plugin-testing at the pinned OpenTofu
// unless the environment names another binary. TF_ACC is set so that no
// acceptance test is ever skipped for lack of it.
func openTofuEnvironment() error {
	if os.Getenv("TF_ACC_TERRAFORM_PATH") == "" {
		dir, err := testcluster.ToolBin("tofu")
		if err != nil {
			return err
		}
		os.Setenv("TF_ACC_TERRAFORM_PATH", filepath.Join(dir, "tofu"))
	}
	// The user's CLI configuration (dev_overrides, mirrors) has no place in
	// a test run: an empty one keeps it out.
	cliConfig := filepath.Join(os.TempDir(), "agentsandbox-acc.tofurc")
	if err := os.WriteFile(cliConfig, nil, 0o600); err != nil {
		return err
	}
	os.Setenv("TF_CLI_CONFIG_FILE", cliConfig)
	for k, v := range map[string]string{
		"TF_ACC": "1",
		// OpenTofu resolves providers under registry.opentofu.org/hashicorp.
		"TF_ACC_PROVIDER_NAMESPACE": "hashicorp",
		"TF_ACC_PROVIDER_HOST":      "registry.opentofu.org",
	} {
		if os.Getenv(k) == "" {
			os.Setenv(k, v)
		}
	}
	return nil
}

// factories serve the provider in-process; echo exposes ephemeral values
// to state checks.
var factories = map[string]func() (tfprotov6.ProviderServer, error){
	"agentsandbox": Server("test"),
	"echo":         echoprovider.NewProviderServer(),
}

// providerConfig connects to the test cluster.
func providerConfig(t *testing.T) string {
	return fmt.Sprintf("provider \"agentsandbox\" {\n  config_path = %q\n}\n", testcluster.Get(t).Kubeconfig)
}

// live reads an object as the admin; nil when it does not exist.
func live(t *testing.T, typeName, name string) *unstructured.Unstructured {
	t.Helper()
	k, err := kindOf(typeName)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(k.schema.GVK)
	err = testcluster.Get(t).Client.Get(context.Background(), client.ObjectKey{Name: name}, u)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("get %s %s: %v", typeName, name, err)
	}
	return u
}

// patchOutOfBand changes an object the way kubectl edit would: an update by
// another field manager.
func patchOutOfBand(t *testing.T, typeName, name, mergePatch string) {
	t.Helper()
	u := live(t, typeName, name)
	if u == nil {
		t.Fatalf("%s %s does not exist", typeName, name)
	}
	if err := testcluster.Get(t).Client.Patch(context.Background(), u,
		client.RawPatch("application/merge-patch+json", []byte(mergePatch)), client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatalf("patch %s %s: %v", typeName, name, err)
	}
}

// deleteOutOfBand deletes an object and waits until it is gone.
func deleteOutOfBand(t *testing.T, typeName, name string) {
	t.Helper()
	u := live(t, typeName, name)
	if u == nil {
		t.Fatalf("%s %s does not exist", typeName, name)
	}
	if err := testcluster.Get(t).Client.Delete(context.Background(), u); client.IgnoreNotFound(err) != nil {
		t.Fatalf("delete %s %s: %v", typeName, name, err)
	}
	testcluster.Eventually(t, typeName+" "+name+" gone", func() (bool, string) {
		return live(t, typeName, name) == nil, "still there"
	})
}
