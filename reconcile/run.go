package reconcile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/config"
)

// apiWaitLog is how often a reconciler waiting for the API server says so.
const apiWaitLog = 5 * time.Second

// errLeaderElectionLost is the manager's error when its lease could not be
// renewed (controller-runtime gives it no type of its own).
const errLeaderElectionLost = "leader election lost"

// Run runs the reconciler until ctx ends, through API outages: it waits for
// the API server before it builds a manager (which needs discovery), and
// when leadership is lost (the lease could not be renewed, as during an
// outage) it waits until every controller of that manager has stopped,
// then waits for the API again and campaigns anew with a new manager, in
// the same process. Kubernetes' own controllers and kube-scheduler wait in
// the same way; exiting instead would put the Deployment in
// CrashLoopBackOff, whose delays grow to five minutes after the API is
// back. Run returns an error only for what waiting cannot mend: a
// manager that cannot be built while the API server answers (a missing
// CRD, no rights), or a controller that fails. It serves the endpoints
// of served for its whole life, across its managers.
func Run(ctx context.Context, cfg *rest.Config, opts ManagerOptions, served Endpoints, controllers Options) error {
	log := ctrl.Log.WithName("run")
	identity, err := leaderIdentity()
	if err != nil {
		return err
	}
	// Whether the API server is heard: with leader election, through the
	// lease's requests, which leader and standby alike send every retry
	// period; without, through every request the reconciler sends.
	heard := &contact{of: "the leader election's requests"}
	if !opts.LeaderElection {
		heard = &contact{of: "the reconciler's requests"}
		cfg = rest.CopyConfig(cfg)
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return contactTransport{next: rt, contact: heard} })
	}
	ready := newReadiness(cfg.Host, heard, cmp.Or(opts.RenewDeadline, defaultRenewDeadline))
	endpoints, err := serveEndpoints(served, ready)
	if err != nil {
		return err
	}
	defer endpoints.close()
	for {
		if err := waitForAPI(ctx, cfg, ready); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		mgr, err := newElectedManager(cfg, opts, identity, heard)
		if err == nil {
			tracked := &trackingManager{Manager: mgr}
			if err = SetupControllers(tracked, controllers); err == nil {
				ready.running(mgr.GetCache())
				err = mgr.Start(ctx)
				// Only once every controller (and so every reconcile in
				// flight) has stopped may another manager campaign.
				ready.waitFor("the controllers of the last manager to stop")
				tracked.wait()
			}
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && err.Error() == errLeaderElectionLost:
			log.Info("lost the leader lease (the API server did not answer in time); every controller has stopped, campaigning again")
			continue
		case err != nil && !apiAnswers(ctx, cfg):
			log.Info("the API server went away while the manager started; waiting for it again", "error", err.Error())
			continue
		}
		if err == nil {
			return errors.New("the manager stopped on its own")
		}
		return err
	}
}

// leaderIdentity names this process in the leader Lease, once for all its
// managers: a manager built after an outage that finds the Lease still
// naming this process renews it at once, where a new name would wait out
// the lease duration first (client-go trusts no remote clock).
func leaderIdentity() (string, error) {
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("failed to name this replica for leader election: %w", err)
	}
	return host + "_" + string(uuid.NewUUID()), nil
}

// defaultRenewDeadline is controller-runtime's, for a zero RenewDeadline.
const defaultRenewDeadline = 10 * time.Second

// newElectedManager is NewManager with the leader Lease held under the
// process's identity, its requests' outcomes recorded in leases.
func newElectedManager(cfg *rest.Config, opts ManagerOptions, identity string, leases *contact) (ctrl.Manager, error) {
	if !opts.LeaderElection {
		return NewManager(cfg, opts)
	}
	// As controller-runtime does: a single hung request must not cost the
	// lease, so the lock's requests time out within the renew deadline.
	lockCfg := rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election")
	lockCfg.Timeout = max(cmp.Or(opts.RenewDeadline, defaultRenewDeadline)/2, time.Second)
	kube, err := kubernetes.NewForConfig(lockCfg)
	if err != nil {
		return nil, err
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, opts.LeaderElectionNamespace, LeaderElectionID,
		kube.CoreV1(), kube.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: identity})
	if err != nil {
		return nil, fmt.Errorf("failed to make the leader election lock: %w", err)
	}
	opts.leaderLock = contactLock{Interface: lock, contact: leases}
	return NewManager(cfg, opts)
}

// crdGrace is how long an API server that answers may go on not serving
// a kind of this API before the reconciler gives up: an API server that
// has just started serves the CRDs a few seconds after it answers, and
// one that serves none after this long has them not installed.
const crdGrace = 30 * time.Second

// waitForAPI returns once the API server answers and serves every kind of
// this API, or with an error naming the CRDs it has not served for
// crdGrace, or ctx's error. Meanwhile /readyz says what it waits for, and
// it logs that every apiWaitLog.
func waitForAPI(ctx context.Context, cfg *rest.Config, ready *readiness) error {
	var unservedSince time.Time
	check := func() (waitingFor string, err error) {
		unserved, err := unservedCRDs(cfg)
		switch {
		case err != nil:
			unservedSince = time.Time{}
			return fmt.Sprintf("the API server at %s: %v", cfg.Host, err), nil
		case len(unserved) == 0:
			return "", nil
		case unservedSince.IsZero():
			unservedSince = time.Now()
		case time.Since(unservedSince) > crdGrace:
			return "", fmt.Errorf("the API server at %s does not serve %s: install the CRDs (config/crd, kubectl apply --server-side -k config/) before starting the reconciler",
				cfg.Host, strings.Join(unserved, ", "))
		}
		return "the API server at " + cfg.Host + " to serve " + strings.Join(unserved, ", "), nil
	}
	waitingFor, err := check()
	if waitingFor == "" || err != nil {
		return err
	}
	ready.waitFor(waitingFor)
	log := ctrl.Log.WithName("run")
	start, lastLog := time.Now(), time.Time{}
	for delay := 200 * time.Millisecond; ; delay = min(2*delay, 2*time.Second) {
		if time.Since(lastLog) >= apiWaitLog {
			log.Info("waiting before starting the controllers", "for", waitingFor, "waited", time.Since(start).Round(time.Second).String())
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		now, err := check()
		if now == "" || err != nil {
			if err == nil {
				log.Info("the API server answers and serves every kind", "waited", time.Since(start).Round(time.Second).String())
			}
			return err
		}
		waitingFor = now
		ready.waitFor(waitingFor)
	}
}

// unservedCRDs names the CRDs of config/crd whose kinds the API server
// does not serve; an error means it did not answer.
func unservedCRDs(cfg *rest.Config) ([]string, error) {
	crds, err := config.CRDs()
	if err != nil {
		return nil, err
	}
	probe := rest.CopyConfig(cfg)
	probe.Timeout = 2 * time.Second
	dc, err := discovery.NewDiscoveryClientForConfig(probe)
	if err != nil {
		return nil, err
	}
	served := map[string]bool{}
	resources, err := dc.ServerResourcesForGroupVersion(v1.GroupVersion.String())
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, err
	default:
		for _, r := range resources.APIResources {
			served[r.Name] = true
		}
	}
	var unserved []string
	for _, crd := range crds {
		if !served[crd.Spec.Names.Plural] {
			unserved = append(unserved, crd.Name)
		}
	}
	return unserved, nil
}

// apiAnswers tells whether the API server answers discovery now.
func apiAnswers(ctx context.Context, cfg *rest.Config) bool { return probeAPI(ctx, cfg) == nil }

// probeAPI asks the API server for its version, with a short timeout.
func probeAPI(ctx context.Context, cfg *rest.Config) error {
	probe := rest.CopyConfig(cfg)
	probe.Timeout = 2 * time.Second
	dc, err := discovery.NewDiscoveryClientForConfig(probe)
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	_, err = dc.ServerVersion()
	return err
}

// trackingManager counts the runnables the controllers add (the
// controllers themselves), so that Run can wait for every one to have
// stopped: a manager that lost its lease returns from Start without
// waiting for them.
type trackingManager struct {
	manager.Manager
	running sync.WaitGroup
}

func (m *trackingManager) Add(r manager.Runnable) error {
	return m.Manager.Add(&trackedRunnable{Runnable: r, running: &m.running})
}

func (m *trackingManager) wait() { m.running.Wait() }

// trackedRunnable is a runnable whose Start the trackingManager counts. It
// keeps the runnable's need for leader election, which decides when the
// manager starts it.
type trackedRunnable struct {
	manager.Runnable
	running *sync.WaitGroup
}

func (r *trackedRunnable) Start(ctx context.Context) error {
	r.running.Add(1)
	defer r.running.Done()
	return r.Runnable.Start(ctx)
}

func (r *trackedRunnable) NeedLeaderElection() bool {
	if le, ok := r.Runnable.(manager.LeaderElectionRunnable); ok {
		return le.NeedLeaderElection()
	}
	return true
}
