// Package claimfloor sends a warm claim's API writes with no controller:
// the client's Sandbox create, the create of the owner's RoleBinding in
// the member (which is the claim) and the Sandbox's status patch, one after
// another as the claim path sends them. No controller that makes these
// writes in this order can claim faster on the same cluster, so the
// benchmarks compare claim latency with it: bench/floor on its own, and
// bench's ClaimAgainstFloor one floor claim beside each real one.
package claimfloor

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/reconciletest"
)

// Owner is who the floor's sandboxes are for.
const Owner = "bench@example.com"

// Writers are the clients a claim's writes come from: the Sandbox's create
// from its user's, the rest from the controller's. Labels go on every
// object the floor writes, beside those a claim's objects carry.
type Writers struct {
	Client, Controller client.Client
	Labels             map[string]string
}

// Send writes one claim of ns by s.
type Send func(context.Context, Writers, *v1.Sandbox, *corev1.Namespace) error

// Floor sends claims' writes to the test cluster.
type Floor struct {
	writers Writers
	watcher client.WithWatch
}

// New is a Floor whose objects carry objectLabels.
func New(b *testing.B, objectLabels map[string]string) *Floor {
	cluster := testcluster.Get(b)
	c := cluster.Client
	watcher, err := client.NewWithWatch(cluster.Config, client.Options{Scheme: c.Scheme()})
	if err != nil {
		b.Fatal(err)
	}
	reconciler, err := client.New(AsReconciler(cluster.Config), client.Options{Scheme: c.Scheme()})
	if err != nil {
		b.Fatal(err)
	}
	return &Floor{writers: Writers{Client: c, Controller: reconciler, Labels: objectLabels}, watcher: watcher}
}

// AsReconciler is cfg as the reconciler's service account. The controller's
// writes are sent with it, as the reconciler sends them in bench
// (reconciletest), so that the API server authorizes them as it does the
// claim's.
func AsReconciler(cfg *rest.Config) *rest.Config {
	return testcluster.AsServiceAccount(cfg, v1.SystemNamespace, reconciletest.ServiceAccountName)
}

// Op is one claim of a member from members by send, timed from the
// Sandbox's create until send returns. The Sandbox and the member are
// deleted when b ends.
func (f *Floor) Op(b *testing.B, members <-chan *corev1.Namespace, send Send) time.Duration {
	return f.op(b, members, func(*v1.Sandbox) (Send, func(), error) { return send, func() {}, nil })
}

// WatchedOp is Op with the claim's writes sent as a controller and its
// client see them, on a watch of its Sandbox opened before the clock
// starts: the claim is written once the watch has delivered the Sandbox's
// create, and it is done once the watch has delivered its Ready status,
// the two watch events no controller-made claim goes without. With
// relabels, the member is relabelled for the sandbox once Ready is
// written, in relabels, not waited for.
func (f *Floor) WatchedOp(b *testing.B, members <-chan *corev1.Namespace, relabels *errgroup.Group) time.Duration {
	return f.op(b, members, func(s *v1.Sandbox) (Send, func(), error) {
		events, err := f.watcher.Watch(context.Background(), &v1.SandboxList{}, client.MatchingFields{"metadata.name": s.Name})
		if err != nil {
			return nil, nil, err
		}
		return watched(events.ResultChan(), events.ResultChan(), relabels), events.Stop, nil
	})
}

// Watching sends the Floor's claims as WatchedOp does, but seen as a
// controller and its client see a controller-made claim: each on a watch
// of its own of every Sandbox the Floor writes, opened once (Floor.Watch).
// The controller's watch cannot be one of the claim's Sandbox by name, as
// WatchedOp's is, since no controller knows a Sandbox's name before its
// create; nor is it the client's, which waits for Ready. So each event of
// the claim reaches two watchers, as a claim's reach the reconciler's
// informer and its client's watch. WatchedOp, its one watch by name
// serving both, sends less than any controller can.
type Watching struct {
	floor              *Floor
	controller, client *router
}

// Watch opens the controller's and the client's watches of the Floor's
// Sandboxes. Close them before any other of the Floor's calls is timed,
// or they watch those too.
func (f *Floor) Watch(b *testing.B) *Watching {
	open := func() *router {
		events, err := f.watcher.Watch(context.Background(), &v1.SandboxList{}, client.MatchingLabels(f.writers.Labels))
		if err != nil {
			b.Fatal(err)
		}
		return newRouter(events)
	}
	return &Watching{floor: f, controller: open(), client: open()}
}

// Op is one claim of a member from members, timed from the Sandbox's
// create until the client's watch has delivered its Ready status; the
// claim is written once the controller's watch has delivered the create.
func (w *Watching) Op(b *testing.B, members <-chan *corev1.Namespace) time.Duration {
	return w.floor.op(b, members, func(s *v1.Sandbox) (Send, func(), error) {
		created, ready := w.controller.expect(s.Name), w.client.expect(s.Name)
		stop := func() {
			w.controller.forget(s.Name)
			w.client.forget(s.Name)
		}
		return watched(created, ready, nil), stop, nil
	})
}

// Close stops both watches.
func (w *Watching) Close() {
	w.controller.events.Stop()
	w.client.events.Stop()
}

// router hands each event of a watch to the call waiting for its Sandbox.
type router struct {
	events watch.Interface

	mu      sync.Mutex
	waiters map[string]chan watch.Event
}

func newRouter(events watch.Interface) *router {
	r := &router{events: events, waiters: map[string]chan watch.Event{}}
	go func() {
		for e := range events.ResultChan() {
			r.deliver(e)
		}
		// Ended: whoever waits is told so, by a closed channel.
		r.mu.Lock()
		defer r.mu.Unlock()
		for name, ch := range r.waiters {
			close(ch)
			delete(r.waiters, name)
		}
		r.waiters = nil
	}()
	return r
}

// expect is the events of the Sandbox name from now on.
func (r *router) expect(name string) <-chan watch.Event {
	// Two events reach a call (the create and the Ready status); room for
	// more keeps a late one from blocking the watch.
	ch := make(chan watch.Event, 8)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.waiters == nil {
		close(ch)
		return ch
	}
	r.waiters[name] = ch
	return ch
}

func (r *router) forget(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.waiters, name)
}

func (r *router) deliver(e watch.Event) {
	s, ok := e.Object.(*v1.Sandbox)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case r.waiters[s.Name] <- e:
	default:
	}
}

// op times the Send that sender gives for a new Sandbox claiming a member,
// stopping what sender started once it returned.
func (f *Floor) op(b *testing.B, members <-chan *corev1.Namespace, sender func(*v1.Sandbox) (Send, func(), error)) time.Duration {
	ns := <-members
	s := &v1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("floor"), Labels: maps.Clone(f.writers.Labels)},
		Spec:       v1.SandboxSpec{WarmPoolRef: &v1.LocalObjectReference{Name: "floor"}, Owner: Owner},
	}
	b.Cleanup(func() {
		// Admission gives a Sandbox the controller's finalizer at create,
		// and no controller here removes it: the controller's writer
		// does, as the controller would.
		ctx := context.Background()
		_ = f.writers.Controller.Patch(ctx, s, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
		_ = f.writers.Client.Delete(ctx, s)
		_ = f.writers.Client.Delete(ctx, ns)
	})
	send, stop, err := sender(s)
	if err != nil {
		b.Error(err)
		return 0
	}
	defer stop()
	begin := time.Now()
	if err := send(context.Background(), f.writers, s, ns); err != nil {
		b.Error(err)
	}
	return time.Since(begin)
}

// watched is Writes as a controller and its client see them: the claim is
// written once created has delivered the Sandbox's create, and it is done
// once ready has delivered its Ready status (WatchedOp, Watching).
func watched(created, ready <-chan watch.Event, relabels *errgroup.Group) Send {
	seen := func(events <-chan watch.Event, s *v1.Sandbox, isReady bool) error {
		for e := range events {
			if got, ok := e.Object.(*v1.Sandbox); ok && conditions.IsTrue(got, v1.ReadyCondition) == isReady {
				return nil
			}
		}
		return fmt.Errorf("the watch of sandbox %s ended", s.Name)
	}
	return func(ctx context.Context, w Writers, s *v1.Sandbox, ns *corev1.Namespace) error {
		if err := w.Client.Create(ctx, s); err != nil {
			return err
		}
		if err := seen(created, s, false); err != nil {
			return err
		}
		if err := claim(ctx, w, s, ns); err != nil {
			return err
		}
		if relabels != nil {
			relabels.Go(func() error {
				return w.Controller.Patch(ctx, environment.ClaimedNamespace(ns, s, time.Now()), client.MergeFrom(ns))
			})
		}
		return seen(ready, s, true)
	}
}

// Writes are what a warm claim of ns by s writes, in the claim path's
// order and shape: the Sandbox's create, the claim (the owner's binding
// created) and the status that says Ready. The member's relabel follows
// Ready and is not on the path.
func Writes(ctx context.Context, w Writers, s *v1.Sandbox, ns *corev1.Namespace) error {
	if err := w.Client.Create(ctx, s); err != nil {
		return err
	}
	return claim(ctx, w, s, ns)
}

// claim is the controller's part of Writes: the owner's binding created
// in ns, then the status that says Ready.
func claim(ctx context.Context, w Writers, s *v1.Sandbox, ns *corev1.Namespace) error {
	binding := environment.ClaimBinding(ns, s, time.Now())
	maps.Copy(binding.Labels, w.Labels)
	if err := w.Controller.Create(ctx, binding); err != nil {
		return err
	}
	return ReadyStatus(ctx, w.Controller, s, ns)
}

// ReadyStatus is the status patch that says s is Ready in ns.
func ReadyStatus(ctx context.Context, c client.Client, s *v1.Sandbox, ns *corev1.Namespace) error {
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

// Members creates n namespaces to claim, labelled as a pool's members and
// with the Floor's labels, and waits until the controller manager has
// given each its default ServiceAccount and root CA ConfigMap, so its
// reaction to them does not load the API server while claims are
// measured.
func (f *Floor) Members(b *testing.B, n int) chan *corev1.Namespace {
	c := f.writers.Client
	prefix := testcluster.Name("floor")
	members := make(chan *corev1.Namespace, n)
	var creates errgroup.Group
	creates.SetLimit(20)
	for i := range n {
		creates.Go(func() error {
			labels := map[string]string{v1.LabelMember: v1.MemberAvailable, v1.LabelWarmPool: "floor", "bench": prefix}
			maps.Copy(labels, f.writers.Labels)
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Labels: labels}}
			if err := c.Create(context.Background(), ns); err != nil {
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
