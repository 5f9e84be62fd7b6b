// Package floor_test measures what a warm claim's API writes cost on their
// own (internal/testharness/claimfloor): the client's Sandbox create, the
// create of the owner's RoleBinding in the member (which is the claim) and
// the Sandbox's status patch, one after another as the claim path sends
// them, with no controller running. No controller that makes these writes
// in this order can claim faster than this on the same cluster, so bench/
// compares its claim latency with it. The claim's earlier sequence of four
// writes (the member namespace's conditional update as the claim, then the
// binding applied) is measured beside it, as the floor the three-write
// claim lowered. It is a package of its own so that no controller runs
// beside it; bench's ClaimAgainstFloor sends the same writes beside the
// controllers, hidden from them, one floor claim beside each real one.
//
//	make bench (go test -run '^$' -bench ClaimWrites -benchtime 100x ./bench/floor/)
package floor_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/apirequests"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/claimfloor"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/latency"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/apply"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
)

// BenchmarkClaimWrites sends a warm claim's writes per operation, the
// claim's three (writes=3) and the earlier four (writes=4), at 1 and 20
// parallel clients, against namespaces made beforehand as the pool would.
// It reports their latency together and, for the 20 clients, the claims a
// second the API server sustains: by Little's law 20 claims in flight wait
// at least 20 divided by that rate. writes=3+watch adds the two watch
// events no controller-made claim goes without: the Sandbox's create seen
// before the claim is written, and its Ready status seen after.
// writes=3+watches=2 sees them as a controller-made claim's are seen: on a
// controller's watch of every Sandbox and its client's, so that each event
// reaches two watchers (claimfloor.Watching); writes=3+watch has one watch
// of the Sandbox by name serve both, which no controller can.
// writes=3+watch+relabel also relabels the member once Ready is written,
// as the claim did off its path before its relabel waited for claims to
// pause: its latency is not waited for, but its load on the API server
// lands on the claims that follow. writes=3+watch+informers runs, beside
// the claims, the informers the controllers keep, with nothing
// reconciled: the watch events about each claim that any controller
// claiming from its cache is sent and decodes.
func BenchmarkClaimWrites(b *testing.B) {
	cluster := testcluster.Get(b)
	c := cluster.Client
	floor := claimfloor.New(b, nil)
	for _, sequence := range []struct {
		name      string
		send      claimfloor.Send
		watches   int
		relabel   bool
		informers bool
	}{
		{"writes=3", claimfloor.Writes, 0, false, false},
		{"writes=3+watch", claimfloor.Writes, 1, false, false},
		{"writes=3+watches=2", claimfloor.Writes, 2, false, false},
		{"writes=3+watch+relabel", claimfloor.Writes, 1, true, false},
		{"writes=3+watch+informers", claimfloor.Writes, 1, false, true},
		{"writes=4", fourWriteClaim, 0, false, false},
	} {
		for _, clients := range []int{1, 20} {
			b.Run(fmt.Sprintf("%s/clients=%d", sequence.name, clients), func(b *testing.B) {
				cluster.WaitNoTerminatingNamespaces(b)
				members := floor.Members(b, b.N)
				if sequence.informers {
					controllerInformers(b, claimfloor.AsReconciler(cluster.Config), c.Scheme())
				}
				var relabels *errgroup.Group
				if sequence.relabel {
					relabels = &errgroup.Group{}
				}
				op := func() time.Duration { return floor.Op(b, members, sequence.send) }
				switch sequence.watches {
				case 1:
					op = func() time.Duration { return floor.WatchedOp(b, members, relabels) }
				case 2:
					watching := floor.Watch(b)
					defer watching.Close()
					op = func() time.Duration { return watching.Op(b, members) }
				}
				requests := apirequests.Take(b, cluster.Config)
				start := time.Now()
				latency.Run(b, clients, op)
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "claims/s")
				apirequests.Report(b, cluster.Config, requests, "claim")
				if relabels != nil {
					if err := relabels.Wait(); err != nil {
						b.Error(err)
					}
				}
			})
		}
	}
}

// fourWriteClaim is the claim's earlier sequence: the member namespace's
// update conditional on its resourceVersion was the claim, and the owner's
// binding was applied after it.
func fourWriteClaim(ctx context.Context, w claimfloor.Writers, s *v1.Sandbox, ns *corev1.Namespace) error {
	if err := w.Client.Create(ctx, s); err != nil {
		return err
	}
	// An update carries the resourceVersion read: the claim's precondition.
	if err := w.Controller.Update(ctx, environment.ClaimedNamespace(ns, s, time.Now())); err != nil {
		return err
	}
	binding := environment.ForSandbox(s, ns.Name, &v1.SandboxTemplate{}, nil, nil).RoleBinding()
	binding.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind("RoleBinding"))
	if err := apply.Object(ctx, w.Controller, binding); err != nil {
		return err
	}
	return claimfloor.ReadyStatus(ctx, w.Controller, s, ns)
}

// controllerInformers starts, until b's run ends, the informers the
// controllers keep (reconcile.CacheOptions, and the kinds they watch
// besides), synced, as the reconciler's service account.
func controllerInformers(b *testing.B, cfg *rest.Config, scheme *runtime.Scheme) {
	opts := reconcile.CacheOptions()
	opts.Scheme = scheme
	informers, err := cache.New(cfg, opts)
	if err != nil {
		b.Fatal(err)
	}
	kinds := []client.Object{&v1.WarmPool{}, &v1.NodePool{}, &v1.GitSync{}, &corev1.Service{}, &nodev1.RuntimeClass{}}
	for obj := range opts.ByObject {
		kinds = append(kinds, obj)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	for _, obj := range kinds {
		if _, err := informers.GetInformer(ctx, obj); err != nil {
			b.Fatal(err)
		}
	}
	go func() { _ = informers.Start(ctx) }()
	if !informers.WaitForCacheSync(ctx) {
		b.Fatal("the controllers' informers did not sync")
	}
}
