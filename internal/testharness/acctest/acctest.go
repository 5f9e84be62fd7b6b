// Package acctest is what the acceptance tests of the provider, its
// resources and data sources share: OpenTofu from the tools step, the
// reconciler running in-process, the provider served in-process, and reads
// and writes of objects as the cluster's admin.
package acctest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/echoprovider"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/provider"
	"github.com/agentsandbox/terraform-provider-agentsandbox/provider/engine"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/reconciletest"
)

// Main runs a package's acceptance tests with OpenTofu from the tools step
// and the reconciler running in-process, the way `make test` and CI run
// them; call it from TestMain. Against a cluster that runs its own
// reconciler (a kind cluster with config/ deployed), set
// AGENTSANDBOX_TEST_RECONCILER=external.
func Main(m *testing.M) {
	if err := openTofuEnvironment(); err != nil {
		fmt.Fprintln(os.Stderr, "acceptance tests:", err)
		os.Exit(1)
	}
	if os.Getenv("AGENTSANDBOX_TEST_RECONCILER") == "external" {
		os.Exit(m.Run())
	}
	reconciletest.Main(m, func(mgr ctrl.Manager) error { return reconcile.SetupControllers(mgr, reconcile.Options{}) })
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

// Factories serve the provider in-process; echo exposes ephemeral values
// to state checks.
var Factories = map[string]func() (tfprotov6.ProviderServer, error){
	"agentsandbox": provider.Server("test"),
	"echo":         echoprovider.NewProviderServer(),
}

// ProviderConfig connects to the test cluster.
func ProviderConfig(t *testing.T) string {
	return fmt.Sprintf("provider \"agentsandbox\" {\n  config_path = %q\n}\n", testcluster.Get(t).Kubeconfig)
}

// Live reads an object of a Terraform type ("warm_pool") as the admin;
// nil when it does not exist.
func Live(t *testing.T, typeName, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kindOf(t, typeName).GVK())
	err := testcluster.Get(t).Client.Get(context.Background(), client.ObjectKey{Name: name}, u)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("get %s %s: %v", typeName, name, err)
	}
	return u
}

// PatchOutOfBand changes an object the way kubectl edit would: an update by
// another field manager.
func PatchOutOfBand(t *testing.T, typeName, name, mergePatch string) {
	t.Helper()
	u := Live(t, typeName, name)
	if u == nil {
		t.Fatalf("%s %s does not exist", typeName, name)
	}
	if err := testcluster.Get(t).Client.Patch(context.Background(), u,
		client.RawPatch("application/merge-patch+json", []byte(mergePatch)), client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatalf("patch %s %s: %v", typeName, name, err)
	}
}

// DeleteOutOfBand deletes an object as kubectl delete --cascade=foreground
// would and waits until it is gone. Foreground, so what the object owned
// (a pool's member namespaces) is gone too: a later check that a destroy
// left nothing behind must not find this delete's stragglers.
func DeleteOutOfBand(t *testing.T, typeName, name string) {
	t.Helper()
	u := Live(t, typeName, name)
	if u == nil {
		t.Fatalf("%s %s does not exist", typeName, name)
	}
	if err := testcluster.Get(t).Client.Delete(context.Background(), u,
		client.PropagationPolicy(metav1.DeletePropagationForeground)); client.IgnoreNotFound(err) != nil {
		t.Fatalf("delete %s %s: %v", typeName, name, err)
	}
	testcluster.Eventually(t, typeName+" "+name+" gone", func() (bool, string) {
		return Live(t, typeName, name) == nil, "still there"
	})
}

// kindOf is the kind of a Terraform type.
func kindOf(t *testing.T, typeName string) *engine.Kind {
	for _, k := range engine.Kinds {
		if k.TypeName == typeName {
			return k
		}
	}
	t.Fatalf("no resource type agentsandbox_%s", typeName)
	return nil
}

// Gone fails when the object is still there after a destroy.
func Gone(t *testing.T, typeName, name string) error {
	if Live(t, typeName, name) != nil {
		return fmt.Errorf("%s %s still exists after destroy", typeName, name)
	}
	return nil
}

// NamespacesLabelled lists the namespaces carrying a label.
func NamespacesLabelled(t *testing.T, key, value string) []string {
	var list corev1.NamespaceList
	if err := testcluster.Get(t).Client.List(context.Background(), &list, client.MatchingLabels{key: value}); err != nil {
		t.Fatalf("list namespaces: %v", err)
	}
	var names []string
	for _, ns := range list.Items {
		var owners []string
		for _, o := range ns.OwnerReferences {
			owners = append(owners, o.Kind+"/"+o.Name)
		}
		names = append(names, fmt.Sprintf("namespace/%s (owners %v, member %s, deleting since %v)",
			ns.Name, owners, ns.Labels[v1.LabelMember], ns.DeletionTimestamp))
	}
	return names
}
