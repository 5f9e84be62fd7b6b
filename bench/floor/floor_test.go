// Package floor_test measures what a warm claim's API writes cost on their
// own: the client's Sandbox create, the create of the owner's RoleBinding
// in the member (which is the claim) and the Sandbox's status patch, one
// after another as the claim path sends them, with no controller running
// and no watch between them. No controller that makes these writes in this
// order can claim faster than this on the same cluster, so bench/ compares
// its claim latency with it. The claim's earlier sequence of four writes
// (the member namespace's conditional update as the claim, then the
// binding applied) is measured beside it, as the floor the three-write
// claim lowered. It is a package of its own because bench/ runs the
// controllers, which would reconcile the sandboxes it creates.
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
	nodev1 "k8s.io/api/node/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/apirequests"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/latency"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/apply"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/reconciletest"
)

const owner = "bench@example.com"

// BenchmarkClaimWrites sends a warm claim's writes per operation, the
// claim's three (writes=3) and the earlier four (writes=4), at 1 and 20
// parallel clients, against namespaces made beforehand as the pool would.
// It reports their latency together and, for the 20 clients, the claims a
// second the API server sustains: by Little's law 20 claims in flight wait
// at least 20 divided by that rate. writes=3+watch adds the two watch
// events no controller-made claim goes without: the Sandbox's create seen
// before the claim is written, and its Ready status seen after.
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
	watcher, err := client.NewWithWatch(cluster.Config, client.Options{Scheme: c.Scheme()})
	if err != nil {
		b.Fatal(err)
	}
	// The controller's writes are sent as the reconciler sends them in
	// bench/ (reconciletest): as its service account, so that the API
	// server authorizes them as it does the claim's.
	asReconciler := rest.CopyConfig(cluster.Config)
	asReconciler.Impersonate = rest.ImpersonationConfig{UserName: reconciletest.ServiceAccount, Groups: reconciletest.ServiceAccountGroups}
	reconciler, err := client.New(asReconciler, client.Options{Scheme: c.Scheme()})
	if err != nil {
		b.Fatal(err)
	}
	w := writers{client: c, controller: reconciler}
	ctx := context.Background()
	for _, sequence := range []struct {
		name      string
		send      func(context.Context, writers, *v1.Sandbox, *corev1.Namespace) error
		watched   bool
		relabel   bool
		informers bool
	}{
		{"writes=3", claimWrites, false, false, false},
		{"writes=3+watch", claimWrites, true, false, false},
		{"writes=3+watch+relabel", claimWrites, true, true, false},
		{"writes=3+watch+informers", claimWrites, true, false, true},
		{"writes=4", fourWriteClaim, false, false, false},
	} {
		for _, clients := range []int{1, 20} {
			b.Run(fmt.Sprintf("%s/clients=%d", sequence.name, clients), func(b *testing.B) {
				testcluster.Get(b).WaitNoTerminatingNamespaces(b)
				members := newMembers(b, c, b.N)
				if sequence.informers {
					controllerInformers(b, asReconciler, c.Scheme())
				}
				var relabels *errgroup.Group
				if sequence.relabel {
					relabels = &errgroup.Group{}
				}
				requests := apirequests.Take(b, cluster.Config)
				start := time.Now()
				latency.Run(b, clients, func() time.Duration {
					ns := <-members
					s := &v1.Sandbox{
						ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("floor")},
						Spec:       v1.SandboxSpec{WarmPoolRef: &v1.LocalObjectReference{Name: "floor"}, Owner: owner},
					}
					send := sequence.send
					if sequence.watched {
						events, err := watcher.Watch(ctx, &v1.SandboxList{}, client.MatchingFields{"metadata.name": s.Name})
						if err != nil {
							b.Error(err)
							return 0
						}
						defer events.Stop()
						send = watchedClaim(events, relabels)
					}
					begin := time.Now()
					if err := send(ctx, w, s, ns); err != nil {
						b.Error(err)
					}
					took := time.Since(begin)
					b.Cleanup(func() {
						_ = c.Delete(context.Background(), s)
						_ = c.Delete(context.Background(), ns)
					})
					return took
				})
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

// watchedClaim is claimWrites as a controller and its client see them:
// the claim is written once the watch has delivered the Sandbox's create,
// and it is done once the watch has delivered its Ready status. With
// relabels, the member is relabelled for the sandbox once Ready is
// written, in relabels, not waited for.
func watchedClaim(events watch.Interface, relabels *errgroup.Group) func(context.Context, writers, *v1.Sandbox, *corev1.Namespace) error {
	seen := func(s *v1.Sandbox, ready bool) error {
		for e := range events.ResultChan() {
			if got, ok := e.Object.(*v1.Sandbox); ok && conditions.IsTrue(got, v1.ReadyCondition) == ready {
				return nil
			}
		}
		return fmt.Errorf("the watch of sandbox %s ended", s.Name)
	}
	return func(ctx context.Context, w writers, s *v1.Sandbox, ns *corev1.Namespace) error {
		if err := w.client.Create(ctx, s); err != nil {
			return err
		}
		if err := seen(s, false); err != nil {
			return err
		}
		if err := w.controller.Create(ctx, environment.ClaimBinding(ns, s, time.Now())); err != nil {
			return err
		}
		if err := readyStatus(ctx, w.controller, s, ns); err != nil {
			return err
		}
		if relabels != nil {
			relabels.Go(func() error {
				return w.controller.Patch(ctx, environment.ClaimedNamespace(ns, s, time.Now()), client.MergeFrom(ns))
			})
		}
		return seen(s, true)
	}
}

// claimWrites is what a warm claim of ns by s writes, in the claim path's
// order and shape: the Sandbox's create, the claim (the owner's binding
// created) and the status that says Ready. The member's relabel follows
// Ready and is not on the path.
func claimWrites(ctx context.Context, w writers, s *v1.Sandbox, ns *corev1.Namespace) error {
	if err := w.client.Create(ctx, s); err != nil {
		return err
	}
	if err := w.controller.Create(ctx, environment.ClaimBinding(ns, s, time.Now())); err != nil {
		return err
	}
	return readyStatus(ctx, w.controller, s, ns)
}

// fourWriteClaim is the claim's earlier sequence: the member namespace's
// update conditional on its resourceVersion was the claim, and the owner's
// binding was applied after it.
func fourWriteClaim(ctx context.Context, w writers, s *v1.Sandbox, ns *corev1.Namespace) error {
	if err := w.client.Create(ctx, s); err != nil {
		return err
	}
	// An update carries the resourceVersion read: the claim's precondition.
	if err := w.controller.Update(ctx, environment.ClaimedNamespace(ns, s, time.Now())); err != nil {
		return err
	}
	binding := environment.ForSandbox(s, ns.Name, &v1.SandboxTemplate{}, nil, nil).RoleBinding()
	binding.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind("RoleBinding"))
	if err := apply.Object(ctx, w.controller, binding); err != nil {
		return err
	}
	return readyStatus(ctx, w.controller, s, ns)
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

// writers are the clients a claim's writes come from: the Sandbox's
// create from its user's, the rest from the controller's.
type writers struct {
	client, controller client.Client
}

// readyStatus is the status patch that says s is Ready in ns.
func readyStatus(ctx context.Context, c client.Client, s *v1.Sandbox, ns *corev1.Namespace) error {
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
// manager has given each its default ServiceAccount and root CA ConfigMap,
// so its reaction to them does not load the API server while the claims
// are measured.
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
				Labels: map[string]string{v1.LabelMember: v1.MemberAvailable, v1.LabelWarmPool: "floor", "bench": prefix},
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
	waitInEach(b, c, prefix, n, &corev1.ServiceAccountList{}, "default")
	waitInEach(b, c, prefix, n, &corev1.ConfigMapList{}, "kube-root-ca.crt")
	return members
}

// waitInEach waits until each of the n namespaces named prefix-i holds an
// object of list's kind named name, as the controller manager makes in
// every new namespace.
func waitInEach(b *testing.B, c client.Client, prefix string, n int, list client.ObjectList, name string) {
	testcluster.Eventually(b, "an object named "+name+" in each member", func() (bool, string) {
		if err := c.List(context.Background(), list, client.MatchingFields{"metadata.name": name}); err != nil {
			return false, err.Error()
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return false, err.Error()
		}
		have := 0
		for _, item := range items {
			if obj, ok := item.(client.Object); ok && strings.HasPrefix(obj.GetNamespace(), prefix+"-") {
				have++
			}
		}
		return have == n, fmt.Sprintf("%d of %d", have, n)
	})
}
