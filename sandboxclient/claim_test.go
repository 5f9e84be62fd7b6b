package sandboxclient_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// TestClaimFromPool claims from an empty pool (a cold start, said so) and
// from a full one (warm), hearing progress while waiting.
func TestClaimFromPool(t *testing.T) {
	t.Parallel()
	alice := newUsers(t, "alice")[0]
	tpl, _ := newTemplate(t)
	admin := testcluster.Get(t).Client
	ctx := context.Background()
	pool := &v1.WarmPool{
		ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("sdk")},
		Spec:       v1.WarmPoolSpec{TemplateRef: v1.LocalObjectReference{Name: tpl.Name}, Replicas: ptr.To[int32](0)},
	}
	if err := admin.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(ctx, pool) })

	if _, err := alice.client.Claim(ctx, sandboxclient.ClaimOptions{Pool: "no-such-pool"}); err == nil || err.Error() != "warm pool no-such-pool not found" {
		t.Errorf("claim from a missing pool: %v", err)
	}

	var steps []sandboxclient.Progress
	cold := claim(t, alice, sandboxclient.ClaimOptions{Pool: pool.Name, Progress: func(p sandboxclient.Progress) { steps = append(steps, p) }})
	if cold.Status.LaunchType != v1.LaunchCold || !strings.Contains(cold.Status.LaunchMessage, "WarmPool "+pool.Name) {
		t.Errorf("claim from an empty pool: launch %s %q", cold.Status.LaunchType, cold.Status.LaunchMessage)
	}
	if !strings.HasPrefix(cold.Name, pool.Name+"-") {
		t.Errorf("generated name %q does not start with the pool's", cold.Name)
	}
	if len(steps) == 0 || steps[len(steps)-1].Phase != v1.SandboxPhaseRunning {
		t.Errorf("progress %+v does not end Running", steps)
	}

	if err := admin.Patch(ctx, pool, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":1}}`))); err != nil {
		t.Fatal(err)
	}
	testcluster.Eventually(t, "a Ready member", func() (bool, string) {
		got := &v1.WarmPool{}
		err := admin.Get(ctx, client.ObjectKeyFromObject(pool), got)
		return err == nil && got.Status.ReadyReplicas == 1, fmt.Sprintf("%d ready, err %v", got.Status.ReadyReplicas, err)
	})
	warm := claim(t, alice, sandboxclient.ClaimOptions{Pool: pool.Name})
	if warm.Status.LaunchType != v1.LaunchWarm {
		t.Errorf("claim from a full pool: launch %s %q", warm.Status.LaunchType, warm.Status.LaunchMessage)
	}
}
