package sandbox

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/environment"
)

func TestLifetimePrecedence(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	tpl := &v1.SandboxTemplate{Spec: v1.SandboxTemplateSpec{Lifecycle: &v1.Lifecycle{
		TTL: &metav1.Duration{Duration: time.Hour}, ShutdownPolicy: v1.ShutdownPolicyDelete,
	}}}
	sbx := &v1.Sandbox{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: created}}
	if lt := lifetimeOf(sbx, tpl); !lt.end.Equal(&metav1.Time{Time: created.Add(time.Hour)}) || lt.policy != v1.ShutdownPolicyDelete {
		t.Errorf("template default: %v %s", lt.end, lt.policy)
	}
	sbx.Spec.TTL = &metav1.Duration{Duration: time.Minute}
	sbx.Spec.ShutdownPolicy = v1.ShutdownPolicyStop
	lt := lifetimeOf(sbx, tpl)
	if !lt.end.Equal(&metav1.Time{Time: created.Add(time.Minute)}) || lt.policy != v1.ShutdownPolicyStop {
		t.Errorf("sandbox ttl: %v %s", lt.end, lt.policy)
	}
	if expired, left := lt.expired(created.Add(30 * time.Second)); expired || left != 30*time.Second {
		t.Errorf("half-way: expired %v left %v", expired, left)
	}
	if expired, _ := lt.expired(created.Add(time.Minute)); !expired {
		t.Error("not expired at the end")
	}
	if lt := lifetimeOf(&v1.Sandbox{}, nil); lt.end != nil || lt.policy != v1.ShutdownPolicyStop {
		t.Errorf("no lifetime: %v %s", lt.end, lt.policy)
	}
}

func TestRecoverLaunch(t *testing.T) {
	claimedAt := "2026-11-29T18:00:00.5Z"
	warm := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Labels:      map[string]string{v1.LabelMember: v1.MemberClaimed},
		Annotations: map[string]string{v1.AnnotationClaimedAt: claimedAt},
	}}
	sbx := &v1.Sandbox{}
	recoverLaunch(sbx, warm)
	if sbx.Status.LaunchType != v1.LaunchWarm || sbx.Status.ClaimedAt == nil || sbx.Status.ClaimedAt.UTC().Format(time.RFC3339Nano) != claimedAt {
		t.Errorf("warm recovery: %+v", sbx.Status)
	}
	sbx = &v1.Sandbox{Spec: v1.SandboxSpec{WarmPoolRef: &v1.LocalObjectReference{Name: "python"}}}
	recoverLaunch(sbx, &corev1.Namespace{})
	if sbx.Status.LaunchType != v1.LaunchCold || !strings.Contains(sbx.Status.LaunchMessage, "python") {
		t.Errorf("cold recovery: %+v", sbx.Status)
	}
}

// TestNamespaceIdentity: a namespace is a sandbox's by its controller
// reference's UID, never by its name, and an environment left by an
// earlier Sandbox of the same name is told from anyone else's namespace.
func TestNamespaceIdentity(t *testing.T) {
	sbx := &v1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "x", UID: "new"}}
	earlier := &v1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "x", UID: "old"}}
	pool := &v1.WarmPool{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "pool"}}
	ns := func(labels map[string]string, owner *metav1.OwnerReference) *corev1.Namespace {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sandbox-x", Labels: labels}}
		if owner != nil {
			n.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		return n
	}
	ours := map[string]string{v1.LabelManagedBy: v1.ManagedByValue, v1.LabelSandbox: "x"}
	withUID := func(uid string) map[string]string {
		l := maps.Clone(ours)
		l[v1.LabelSandboxUID] = uid
		return l
	}
	ref := func(kind string, obj metav1.Object) *metav1.OwnerReference {
		r := environment.ControllerRef(kind, obj)
		return &r
	}
	for _, tc := range []struct {
		name        string
		ns          *corev1.Namespace
		owns, stale bool
	}{
		{"created for this sandbox", ns(withUID("new"), ref("Sandbox", sbx)), true, false},
		{"created by an earlier version, without the UID label", ns(ours, ref("Sandbox", sbx)), true, false},
		{"an administrator's", ns(map[string]string{"team": "platform"}, nil), false, false},
		{"forged labels, no owner", ns(map[string]string{"team": "platform", v1.LabelSandboxUID: "new"}, nil), false, false},
		{"an unclaimed warm member", ns(map[string]string{v1.LabelManagedBy: v1.ManagedByValue, v1.LabelMember: v1.MemberAvailable}, ref("WarmPool", pool)), false, false},
		{"an earlier sandbox's, owner reference stripped by an orphaning delete", ns(withUID("old"), nil), false, true},
		{"an earlier sandbox's, still owned by it", ns(withUID("old"), ref("Sandbox", earlier)), false, true},
		{"a UID label that is not the owner's", ns(withUID("old"), ref("Sandbox", sbx)), false, false},
	} {
		if got := ownsNamespace(tc.ns, sbx); got != tc.owns {
			t.Errorf("%s: ownsNamespace = %v, want %v", tc.name, got, tc.owns)
		}
		if got := leftBehind(tc.ns, sbx); got != tc.stale {
			t.Errorf("%s: leftBehind = %v, want %v", tc.name, got, tc.stale)
		}
	}
}

// TestRankForSandbox: claims of different sandboxes start at different
// members, and two views of the pool that differ by members other than a
// sandbox's first choice agree on it.
func TestRankForSandbox(t *testing.T) {
	var pool []string
	for i := range 20 {
		pool = append(pool, fmt.Sprintf("sandbox-wp-python-%08x", i*7919))
	}
	firsts := map[string]bool{}
	for i := range 40 {
		sandbox := fmt.Sprintf("burst-%d", i)
		ranked := slices.Clone(pool)
		rankForSandbox(ranked, sandbox)
		first := ranked[0]
		firsts[first] = true
		for drop := 1; drop < len(ranked); drop++ {
			// Another reconciler's cache, missing one member.
			view := slices.Delete(slices.Clone(pool), slices.Index(pool, ranked[drop]), slices.Index(pool, ranked[drop])+1)
			slices.Reverse(view)
			rankForSandbox(view, sandbox)
			if view[0] != first {
				t.Fatalf("sandbox %s: first choice %s without %s, %s with it", sandbox, view[0], ranked[drop], first)
			}
		}
	}
	if len(firsts) < 10 {
		t.Errorf("40 sandboxes' claims start at %d of 20 members, want them spread over at least 10", len(firsts))
	}
}

// TestAvailableMembersFollowEvents: the names a claim ranks are the
// namespaces an available member of the pool, by its label or its
// controller, as environment.MemberOf tells; a member leaves them when it
// is claimed, starts being deleted or is gone.
func TestAvailableMembersFollowEvents(t *testing.T) {
	pool := &v1.WarmPool{ObjectMeta: metav1.ObjectMeta{Name: "python", UID: "pool"}}
	earlier := &v1.WarmPool{ObjectMeta: metav1.ObjectMeta{Name: "python", UID: "earlier"}}
	member := func(name string, labels map[string]string, controller *v1.WarmPool) *corev1.Namespace {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelMember: v1.MemberAvailable}}}
		maps.Copy(ns.Labels, labels)
		if controller != nil {
			ns.OwnerReferences = []metav1.OwnerReference{environment.ControllerRef(v1.KindWarmPool, controller)}
		}
		return ns
	}
	labelled := member("labelled", map[string]string{v1.LabelWarmPoolUID: "pool"}, nil)
	owned := member("owned", nil, earlier)
	both := member("both", map[string]string{v1.LabelWarmPoolUID: "pool"}, earlier)
	other := member("other", map[string]string{v1.LabelWarmPoolUID: "another"}, nil)
	a := newAvailableMembers()
	follow := a.follow()
	for _, ns := range []*corev1.Namespace{labelled, owned, both, other} {
		if !follow.Create(event.CreateEvent{Object: ns}) {
			t.Fatalf("the create of %s was filtered out", ns.Name)
		}
	}
	want := func(uid types.UID, names ...string) {
		t.Helper()
		got := a.of(uid)
		slices.Sort(got)
		slices.Sort(names)
		if !slices.Equal(got, names) {
			t.Errorf("available members of %s = %v, want %v", uid, got, names)
		}
		for _, n := range got {
			ns := map[string]*corev1.Namespace{"labelled": labelled, "owned": owned, "both": both, "other": other}[n]
			if p := map[types.UID]*v1.WarmPool{"pool": pool, "earlier": earlier}[uid]; p != nil && !environment.MemberOf(ns, p) {
				t.Errorf("%s is listed for %s, which environment.MemberOf denies", n, uid)
			}
		}
	}
	want(pool.UID, "labelled", "both")
	want(earlier.UID, "owned", "both")
	want("another", "other")

	claimed := labelled.DeepCopy()
	claimed.Labels[v1.LabelMember] = v1.MemberClaimed
	follow.Update(event.UpdateEvent{ObjectOld: labelled, ObjectNew: claimed})
	deleting := both.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	follow.Update(event.UpdateEvent{ObjectOld: both, ObjectNew: deleting})
	follow.Delete(event.DeleteEvent{Object: other})
	want(pool.UID)
	want(earlier.UID, "owned")
	want("another")
	if len(a.pools) != 1 {
		t.Errorf("pools with no available member are kept: %v", a.pools)
	}
}

// TestHeldRelabelsWokenOncePaused: once this process has claimed nothing
// for relabelQuiet, the sandboxes whose relabels it holds are woken, each
// once, and none whose relabel was written; not before.
func TestHeldRelabelsWokenOncePaused(t *testing.T) {
	t.Parallel()
	m := newMemory()
	woken := make(chan string, 10)
	m.wakeWith(func(sandbox string) { woken <- sandbox })
	claim := func(name string) time.Time {
		sbx := &v1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name)}}
		now := time.Now()
		m.claimed(sbx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "member-" + name}}, now, now)
		return now
	}
	claim("held")
	claim("relabelled")
	m.noteRelabelled(&v1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "relabelled", UID: "relabelled"}}, time.Now())
	time.Sleep(relabelQuiet / 2)
	last := claim("later")
	var got []string
	for len(got) < 2 {
		select {
		case name := <-woken:
			if since := time.Since(last); since < relabelQuiet {
				t.Errorf("%s woken %v after the last claim, before claims paused for %v", name, since, relabelQuiet)
			}
			got = append(got, name)
		case <-time.After(3 * relabelQuiet):
			t.Fatalf("woken %v within %v of the last claim; want held and later", got, 3*relabelQuiet)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"held", "later"}) {
		t.Errorf("woken %v, want [held later]", got)
	}
	select {
	case name := <-woken:
		t.Errorf("%s woken again, or a relabel written was woken", name)
	case <-time.After(relabelQuiet + 200*time.Millisecond):
	}
}

// TestRelabelHeldThenTrusted: a claim's relabel is held until this
// process has claimed nothing for relabelQuiet, or for relabelHoldMax after
// the claim in a steady stream; meanwhile, and for relabelTrust after the
// relabel is written, a cache that shows the member as a member is
// explained, for that sandbox (by UID) and that namespace only.
func TestRelabelHeldThenTrusted(t *testing.T) {
	m := newMemory()
	sbx := &v1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "agent", UID: "uid-1"}}
	member := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sandbox-wp-python-1"}}
	if !m.take(member.Name, sbx.Name) {
		t.Fatal("a free member could not be taken")
	}
	at := time.Now()
	m.claimed(sbx, member, at, at)
	if _, wait, held := m.heldRelabel(sbx, at); !held || wait != relabelHoldMax {
		t.Errorf("right after its claim: held %v, due in %v; want held, due in %v (the pause in claims wakes it sooner)", held, wait, relabelHoldMax)
	}
	if !m.relabelAhead(sbx, member.Name, at) {
		t.Error("a held relabel does not explain the cache")
	}
	other := &v1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "other", UID: "uid-3"}}
	for _, claimAt := range []time.Duration{800 * time.Millisecond, 9900 * time.Millisecond} {
		m.claimed(other, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sandbox-wp-python-9"}}, at.Add(claimAt), at.Add(claimAt))
	}
	if _, wait, held := m.heldRelabel(sbx, at.Add(9950*time.Millisecond)); !held || wait != 50*time.Millisecond {
		t.Errorf("amid claims, 50 ms before relabelHoldMax: held %v, due in %v; want due in 50ms", held, wait)
	}
	if _, wait, held := m.heldRelabel(sbx, at.Add(relabelHoldMax)); !held || wait != 0 {
		t.Errorf("amid claims, relabelHoldMax after the claim: held %v, due in %v; want due now", held, wait)
	}
	quiet := newMemory()
	quiet.claimed(sbx, member, at, at)
	quiet.claimed(other, member, at.Add(800*time.Millisecond), at.Add(800*time.Millisecond))
	if _, wait, _ := quiet.heldRelabel(sbx, at.Add(900*time.Millisecond)); wait != relabelHoldMax-900*time.Millisecond {
		t.Errorf("a claim 0.8 s after: due in %v, want %v (relabelHoldMax after the claim)", wait, relabelHoldMax-900*time.Millisecond)
	}
	if _, wait, _ := quiet.heldRelabel(sbx, at.Add(1800*time.Millisecond)); wait != 0 {
		t.Errorf("a second after the last claim: due in %v, want now", wait)
	}

	written := at.Add(relabelHoldMax)
	m.noteRelabelled(sbx, written)
	if _, _, held := m.heldRelabel(sbx, written); held {
		t.Error("a relabel written is still held")
	}
	if !m.relabelAhead(sbx, member.Name, written.Add(time.Second)) {
		t.Error("a relabel written a second ago not trusted")
	}
	if m.relabelAhead(sbx, member.Name, written.Add(relabelTrust)) {
		t.Errorf("a relabel still trusted %v after it was written", relabelTrust)
	}
	if m.relabelAhead(sbx, "sandbox-wp-python-2", written) {
		t.Error("trusted a relabel of another namespace")
	}
	recreated := &v1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "agent", UID: "uid-2"}}
	if m.relabelAhead(recreated, member.Name, written) {
		t.Error("trusted the relabel for a Sandbox of the same name made since")
	}
	if m.take(member.Name, "other") {
		t.Error("another claim took the member while its claim is remembered")
	}
	m.forgetClaim(sbx.Name)
	if m.relabelAhead(sbx, member.Name, written) || !m.take(member.Name, "other") {
		t.Error("the claim is remembered after it was forgotten")
	}
}
