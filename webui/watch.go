package webui

import (
	"context"
	"errors"
	"strings"
	"sync"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/kubescheme"
)

// A kind is one kind of object the page shows, followed with one watch that
// every open page shares: a page left open for an hour costs the API server
// one watch per kind, however many tabs show it.
type kind struct {
	// name is how the page speaks of it ("sandboxes").
	name string
	// list is an empty list of the kind, for the cache and the probe.
	list client.ObjectList
	// obj is an empty object of the kind, for the cache's informer.
	obj client.Object
	// probe lists at most one object as the informer would: in the
	// namespace and with the field selector the cache is configured with.
	probe []client.ListOption
}

// metadataOnly is a kind whose objects the page only needs to know exist
// (the admission policies): the cache keeps their metadata alone.
func metadataOnly(name string, gvk schema.GroupVersionKind) kind {
	return kind{name: name, obj: metadataObject(gvk), list: metadataList(gvk)}
}

func metadataObject(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadata {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	return obj
}

func metadataList(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadataList {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	return list
}

// Kind names, for the page and the installation checks.
const (
	kindSandboxes = "sandboxes"
	kindTemplates = "sandbox templates"
	kindWarmPools = "warm pools"
	kindNodePools = "node pools"
	kindGitSyncs  = "Git syncs"
	kindCRDs      = "custom resource definitions"
	kindLease     = "the reconciler's Lease"
)

// leaseNameField selects the reconciler's Lease by name.
const leaseNameField = "metadata.name"

// admissionKinds are the kinds config/admission installs, which the page
// checks by name.
var admissionKinds = []schema.GroupVersionKind{
	admissionv1.SchemeGroupVersion.WithKind("ValidatingAdmissionPolicy"),
	admissionv1.SchemeGroupVersion.WithKind("ValidatingAdmissionPolicyBinding"),
	admissionv1.SchemeGroupVersion.WithKind("MutatingAdmissionPolicy"),
	admissionv1.SchemeGroupVersion.WithKind("MutatingAdmissionPolicyBinding"),
}

func kinds() []kind {
	ks := []kind{
		{name: kindSandboxes, list: &v1.SandboxList{}, obj: &v1.Sandbox{}},
		{name: kindTemplates, list: &v1.SandboxTemplateList{}, obj: &v1.SandboxTemplate{}},
		{name: kindWarmPools, list: &v1.WarmPoolList{}, obj: &v1.WarmPool{}},
		{name: kindNodePools, list: &v1.NodePoolList{}, obj: &v1.NodePool{}},
		{name: kindGitSyncs, list: &v1.GitSyncList{}, obj: &v1.GitSync{}},
		{name: kindCRDs, list: &apiextensionsv1.CustomResourceDefinitionList{}, obj: &apiextensionsv1.CustomResourceDefinition{}},
		{name: kindLease, list: &coordinationv1.LeaseList{}, obj: &coordinationv1.Lease{}, probe: []client.ListOption{
			client.InNamespace(v1.SystemNamespace), client.MatchingFields{leaseNameField: v1.ReconcilerLease},
		}},
	}
	for _, gvk := range admissionKinds {
		ks = append(ks, metadataOnly(gvk.Kind, gvk))
	}
	return ks
}

// access is what the caller may see of a kind.
type access struct {
	// Watching: the kind is followed and its objects are in the cache.
	Watching bool
	// Missing: the API server does not serve the kind (its CRD is not
	// installed).
	Missing bool
	// err is why the kind is not followed: the API server's words when it
	// refused the caller, or the error of the probe. Empty while probing.
	Err string
}

// missingCRD is the access of a kind whose CRD is not installed.
var missingCRD = access{Missing: true, Err: "not served by the API server (its CustomResourceDefinition is not installed)"}

// hub follows every kind with the caller's identity and tells subscribers
// when anything changed; the page renders from its cache, so no browser
// request reaches the API server to read.
type hub struct {
	cache  cache.Cache
	direct client.WithWatch
	kinds  []kind
	// crdOf names the CRD of each of this API's kinds.
	crdOf map[string]string

	mu     sync.Mutex
	access map[string]access
	subs   map[*subscription]struct{}
	// probing is set while a re-probe runs; probeAgain asks for one more
	// after it.
	probing, probeAgain bool
	cacheCtx            context.Context
}

func newHub(cfg *rest.Config, crds []*apiextensionsv1.CustomResourceDefinition) (*hub, error) {
	c, err := cache.New(cfg, cache.Options{
		Scheme: kubescheme.Scheme,
		ByObject: map[client.Object]cache.ByObject{
			&coordinationv1.Lease{}: {
				Namespaces: map[string]cache.Config{v1.SystemNamespace: {}},
				Field:      fields.OneTermEqualSelector(leaseNameField, v1.ReconcilerLease),
			},
			// A cluster may have hundreds of CRDs with large schemas; the
			// page needs only this API's.
			&apiextensionsv1.CustomResourceDefinition{}: {Transform: keepOwnCRDs},
		},
		DefaultTransform: cache.TransformStripManagedFields(),
	})
	if err != nil {
		return nil, err
	}
	direct, err := client.NewWithWatch(cfg, client.Options{Scheme: kubescheme.Scheme})
	if err != nil {
		return nil, err
	}
	h := &hub{cache: c, direct: direct, kinds: kinds(), crdOf: map[string]string{}, access: map[string]access{},
		subs: map[*subscription]struct{}{}}
	for _, k := range h.kinds {
		gvk, err := apiutil.GVKForObject(k.obj, kubescheme.Scheme)
		if err != nil {
			return nil, err
		}
		for _, c := range crds {
			if c.Spec.Group == gvk.Group && c.Spec.Names.Kind == gvk.Kind {
				h.crdOf[k.name] = c.Name
			}
		}
	}
	return h, nil
}

// keepOwnCRDs drops the spec of every CRD but this API's.
func keepOwnCRDs(obj any) (any, error) {
	if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok && crd.Spec.Group != v1.GroupVersion.Group {
		crd.Spec = apiextensionsv1.CustomResourceDefinitionSpec{}
		crd.ManagedFields = nil
	}
	return obj, nil
}

// start runs the cache until ctx ends and follows every kind the caller may
// watch.
func (h *hub) start(ctx context.Context) {
	h.cacheCtx = ctx
	go func() { _ = h.cache.Start(ctx) }()
	h.probeAll(ctx)
}

// probeAll asks the API server, once for each kind, whether the caller may
// list and watch it, and follows or stops following it accordingly. It runs
// at start and again when one of this API's CRDs changes, so installing the
// CRDs while the page is open brings their kinds onto it.
func (h *hub) probeAll(ctx context.Context) {
	// Side by side: a probe's watch can wait about 100 ms for the API
	// server's cache to be current, and there are eleven kinds.
	found := make([]access, len(h.kinds))
	var probes sync.WaitGroup
	for i, k := range h.kinds {
		probes.Go(func() { found[i] = h.probe(ctx, k) })
	}
	probes.Wait()
	for i, k := range h.kinds {
		a := found[i]
		h.mu.Lock()
		before := h.access[k.name]
		h.access[k.name] = a
		h.mu.Unlock()
		switch {
		case a.Watching && !before.Watching:
			h.follow(ctx, k)
		case !a.Watching && before.Watching:
			_ = h.cache.RemoveInformer(ctx, k.obj)
		}
	}
	h.notify(everyKind)
}

func (h *hub) probe(ctx context.Context, k kind) access {
	list := k.list.DeepCopyObject().(client.ObjectList)
	err := h.direct.List(ctx, list, append([]client.ListOption{client.Limit(1)}, k.probe...)...)
	if err == nil {
		var w watch.Interface
		if w, err = h.direct.Watch(ctx, list, k.probe...); err == nil {
			w.Stop()
		}
	}
	switch {
	case err == nil:
		return access{Watching: true}
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		return missingCRD
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return access{Err: status.Status().Message}
	}
	return access{Err: strings.TrimSpace(err.Error())}
}

// follow starts the kind's informer and subscribes to its changes.
func (h *hub) follow(ctx context.Context, k kind) {
	informer, err := h.cache.GetInformer(ctx, k.obj, cache.BlockUntilSynced(false))
	if err != nil {
		h.mu.Lock()
		h.access[k.name] = access{Err: err.Error()}
		h.mu.Unlock()
		return
	}
	var handler toolscache.ResourceEventHandler = toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { h.notify(k.name) },
		UpdateFunc: func(any, any) { h.notify(k.name) },
		DeleteFunc: func(any) { h.notify(k.name) },
	}
	if k.name == kindCRDs {
		handler = h.crdHandler()
	}
	if _, err := informer.AddEventHandler(handler); err != nil {
		h.mu.Lock()
		h.access[k.name] = access{Err: err.Error()}
		h.mu.Unlock()
	}
}

// crdHandler re-probes when one of this API's CRDs changes in a way that can
// change a probe's answer: it appears, goes, or starts or stops serving. The
// CRDs of the informer's first list were probed already at start, unless
// one was missing then; other updates (a status heartbeat, a label) would
// only cost the API server a round of probes.
func (h *hub) crdHandler() toolscache.ResourceEventHandler {
	own := func(obj any) (*apiextensionsv1.CustomResourceDefinition, bool) {
		if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
		return crd, ok && strings.HasSuffix(crd.Name, "."+v1.GroupVersion.Group)
	}
	return toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initialList bool) {
			if crd, ok := own(obj); ok && (!initialList || !h.followsKindOf(crd.Name)) {
				h.reprobe()
			}
			h.notify(kindCRDs)
		},
		UpdateFunc: func(oldObj, obj any) {
			before, _ := own(oldObj)
			if crd, ok := own(obj); ok && before != nil && serving(before) != serving(crd) {
				h.reprobe()
			}
			h.notify(kindCRDs)
		},
		DeleteFunc: func(obj any) {
			if _, ok := own(obj); ok {
				h.reprobe()
			}
			h.notify(kindCRDs)
		},
	}
}

// followsKindOf says whether the kind the CRD named serves is followed.
func (h *hub) followsKindOf(crdName string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for name, crd := range h.crdOf {
		if crd == crdName {
			return h.access[name].Watching
		}
	}
	return false
}

// serving is what of a CRD decides whether its kind can be listed: whether
// it is established and which versions it serves.
func serving(crd *apiextensionsv1.CustomResourceDefinition) string {
	var s strings.Builder
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			s.WriteString(string(c.Status))
		}
	}
	for _, v := range crd.Spec.Versions {
		if v.Served {
			s.WriteString(" " + v.Name)
		}
	}
	return s.String()
}

// reprobe runs probeAll in the background, one at a time. A change that
// arrives while one runs asks for another after it: that probe may have
// asked the API server before the change (a CRD established a moment
// after its kind was probed), and nothing else would look again.
func (h *hub) reprobe() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.probing {
		h.probeAgain = true
		return
	}
	h.probing = true
	go func() {
		for {
			h.probeAll(h.cacheCtx)
			h.mu.Lock()
			again := h.probeAgain
			h.probing, h.probeAgain = again, false
			h.mu.Unlock()
			if !again {
				return
			}
		}
	}()
}

// accessOf is what the caller may see of the kind named.
func (h *hub) accessOf(name string) access {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.access[name]
}

// list fills list from the cache when the kind is followed; otherwise it
// returns the kind's access for the page to explain.
func (h *hub) list(ctx context.Context, name string, list client.ObjectList, opts ...client.ListOption) (access, error) {
	a := h.accessOf(name)
	switch crd := h.crdState(ctx, name); {
	case a.Watching && crd == crdDeleted:
		// Probe again, to stop the informer of a kind no longer served.
		h.reprobe()
		a = missingCRD
	case a.Missing && crd == crdEstablished:
		// Installed since the last probe answered: probe until the API
		// server serves it too.
		h.reprobe()
	}
	if !a.Watching {
		return a, nil
	}
	return a, h.cache.List(ctx, list, opts...)
}

// crdStatus is what the cached CRDs say of one of this API's kinds.
type crdStatus int

const (
	// crdUnknown: not one of this API's kinds, or the caller may not read
	// CRDs.
	crdUnknown crdStatus = iota
	crdDeleted
	crdPending
	crdEstablished
)

// crdState tells whether the CRD of one of this API's kinds is deleted or
// established, as far as the cache knows. A probe made as a deletion or an
// installation completes can be answered as before it (the API server
// serves a kind, and stops serving it, a moment after its CRD changes), so
// the CRDs the cache holds decide when to look again.
func (h *hub) crdState(ctx context.Context, name string) crdStatus {
	crdName, ok := h.crdOf[name]
	if !ok || !h.accessOf(kindCRDs).Watching {
		return crdUnknown
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	switch err := h.cache.Get(ctx, client.ObjectKey{Name: crdName}, crd); {
	case apierrors.IsNotFound(err):
		return crdDeleted
	case err != nil:
		return crdUnknown
	}
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return crdEstablished
		}
	}
	return crdPending
}

// everyKind is a change to tell of as a change of every kind: the kinds
// followed changed.
const everyKind = ""

// subscription is one stream's view of the hub's changes: the kinds that
// changed since it last took them, and a signal that some did.
type subscription struct {
	signal  chan struct{}
	mu      sync.Mutex
	changed map[string]bool
}

// take returns the kinds that changed since the last take (everyKind
// among them for all), and forgets them.
func (s *subscription) take() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := s.changed
	s.changed = map[string]bool{}
	return changed
}

// subscribe returns a subscription to every change, and what ends it.
func (h *hub) subscribe() (*subscription, func()) {
	sub := &subscription{signal: make(chan struct{}, 1), changed: map[string]bool{}}
	h.mu.Lock()
	h.subs[sub] = struct{}{}
	h.mu.Unlock()
	return sub, func() {
		h.mu.Lock()
		delete(h.subs, sub)
		h.mu.Unlock()
	}
}

// notify tells every subscription that objects of kind changed.
func (h *hub) notify(kind string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for sub := range h.subs {
		sub.mu.Lock()
		sub.changed[kind] = true
		sub.mu.Unlock()
		select {
		case sub.signal <- struct{}{}:
		default:
		}
	}
}
