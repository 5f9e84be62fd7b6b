// Package floor_test measures what a warm claim's four API writes cost on
// their own: the client's Sandbox create, the member namespace's
// conditional update, the owner's RoleBinding applied and the Sandbox's
// status patch, one after another as the claim path sends them, with no
// controller running and no watch between them. No controller that makes
// these writes in this order can claim faster than this on the same
// cluster, so bench/ compares its claim latency with it. It is a package
// of its own because bench/ runs the controllers, which would reconcile
// the sandboxes it creates.
//
//	make bench (go test -run '^$' -bench ClaimWrites -benchtime 100x ./bench/floor/)
package floor_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/latency"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/apply"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
)

const owner = "bench@example.com"

// BenchmarkClaimWrites sends a warm claim's four writes per operation, at 1
// and 20 parallel clients, against namespaces made beforehand as the pool
// would. It reports their latency together and, for the 20 clients, the
// claims a second the API server sustains: by Little's law 20 claims in
// flight wait at least 20 divided by that rate.
func BenchmarkClaimWrites(b *testing.B) {
	c := testcluster.Get(b).Client
	ctx := context.Background()
	for _, clients := range []int{1, 20} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			testcluster.Get(b).WaitNoTerminatingNamespaces(b)
			members := newMembers(b, c, b.N)
			start := time.Now()
			latency.Run(b, clients, func() time.Duration {
				ns := <-members
				s := &v1.Sandbox{
					ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("floor")},
					Spec:       v1.SandboxSpec{WarmPoolRef: &v1.LocalObjectReference{Name: "floor"}, Owner: owner},
				}
				begin := time.Now()
				if err := claimWrites(ctx, c, s, ns); err != nil {
					b.Error(err)
				}
				took := time.Since(begin)
				// The namespace goes with the sandbox, by garbage
				// collection, after the benchmark.
				b.Cleanup(func() { _ = c.Delete(context.Background(), s) })
				return took
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "claims/s")
		})
	}
}

// claimWrites is what a warm claim of ns by s writes, in the claim path's
// order and shape.
func claimWrites(ctx context.Context, c client.Client, s *v1.Sandbox, ns *corev1.Namespace) error {
	if err := c.Create(ctx, s); err != nil {
		return err
	}
	ns.Labels[v1.LabelMember] = v1.MemberClaimed
	ns.Labels[v1.LabelSandbox] = s.Name
	ns.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: v1.GroupVersion.String(), Kind: "Sandbox", Name: s.Name, UID: s.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}
	// An update carries the resourceVersion read: the claim's precondition.
	if err := c.Update(ctx, ns); err != nil {
		return err
	}
	if err := apply.Object(ctx, c, &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: "sandbox-owner", Namespace: ns.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: environment.OwnerClusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: owner}},
	}); err != nil {
		return err
	}
	before := s.DeepCopy()
	now := metav1.Now()
	s.Status = v1.SandboxStatus{
		Phase: v1.SandboxPhaseRunning, Namespace: ns.Name, PodName: environment.PodName, PodIP: "10.0.0.1",
		LaunchType: v1.LaunchWarm, RequestedAt: &s.CreationTimestamp, ClaimedAt: &now, ReadyAt: &now,
		ObservedGeneration: s.Generation,
	}
	conditions.MarkTrue(s, v1.ReadyCondition, v1.ReasonPodReady, "the sandbox pod is Ready")
	return c.Status().Patch(ctx, s, client.MergeFrom(before))
}

// newMembers creates n namespaces to claim and waits until the controller
// manager has given each its default ServiceAccount, so its reaction to
// them does not load the API server while the claims are measured.
func newMembers(b *testing.B, c client.Client, n int) chan *corev1.Namespace {
	ctx := context.Background()
	prefix := testcluster.Name("floor")
	members := make(chan *corev1.Namespace, n)
	var creates errgroup.Group
	creates.SetLimit(20)
	for i := range n {
		creates.Go(func() error {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
				Name:   fmt.Sprintf("%s-%d", prefix, i),
				Labels: map[string]string{v1.LabelMember: v1.MemberAvailable, "bench": prefix},
			}}
			if err := c.Create(ctx, ns); err != nil {
				return err
			}
			members <- ns
			return nil
		})
	}
	if err := creates.Wait(); err != nil {
		b.Fatal(err)
	}
	testcluster.Eventually(b, "the members' default ServiceAccounts", func() (bool, string) {
		accounts := &corev1.ServiceAccountList{}
		if err := c.List(ctx, accounts, client.MatchingFields{"metadata.name": "default"}); err != nil {
			return false, err.Error()
		}
		have := 0
		for _, sa := range accounts.Items {
			if strings.HasPrefix(sa.Namespace, prefix+"-") {
				have++
			}
		}
		return have == n, fmt.Sprintf("%d of %d", have, n)
	})
	return members
}
