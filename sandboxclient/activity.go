package sandboxclient

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// activity reports the use of sandboxes to the reconciler, which stops a
// sandbox nobody uses for its idle timeout (lifecycle.idleTimeout). The
// report is a coarse record on the Sandbox (v1.AnnotationLastActivity),
// written when an operation begins or while one is in flight, at most
// once per reportInterval: a sandbox without an idle timeout costs no
// write at all, and none costs a write per command.
type activity struct {
	mu   sync.Mutex
	uses map[string]*use
}

// use is what the client knows of one sandbox's use.
type use struct {
	// every is the report interval; zero while the sandbox has no idle
	// timeout (or none was read yet).
	every time.Duration
	// reported is when the last report was sent.
	reported time.Time
	// inFlight counts operations under way (InUse); while there are any,
	// a ticker reports every interval.
	inFlight int
	stop     chan struct{}
}

// reportInterval is a quarter of the idle timeout, so the record is never
// more than that behind, between a second and a minute.
func reportInterval(idle *v1.IdleStatus) time.Duration {
	if idle == nil || idle.Timeout.Duration <= 0 {
		return 0
	}
	return min(max(idle.Timeout.Duration/4, time.Second), time.Minute)
}

func (a *activity) useOf(name string) *use {
	if a.uses == nil {
		a.uses = map[string]*use{}
	}
	u := a.uses[name]
	if u == nil {
		u = &use{}
		a.uses[name] = u
	}
	return u
}

// observe learns a sandbox's idle timeout from what was read of it.
func (c *Client) observe(sbx *v1.Sandbox) {
	c.activity.mu.Lock()
	defer c.activity.mu.Unlock()
	c.activity.useOf(sbx.Name).every = reportInterval(sbx.Status.Idle)
}

// used records that the sandbox is used now, reporting it when the last
// report is an interval old.
func (c *Client) used(name string) {
	c.activity.mu.Lock()
	defer c.activity.mu.Unlock()
	c.reportIfDue(name, c.activity.useOf(name), time.Now())
}

// reportIfDue sends a report in the background when one is due; the
// caller holds the lock.
func (c *Client) reportIfDue(name string, u *use, now time.Time) {
	if u.every == 0 || now.Sub(u.reported) < u.every {
		return
	}
	u.reported = now
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// A lost report costs at most an early stop, which the next use
		// undoes; the operation itself must not fail for it.
		_ = c.reportActivity(ctx, name, now)
	}()
}

// InUse records an operation on the sandbox that lasts (a command, an
// attached terminal, a forwarded connection): the sandbox counts as used
// until done is called, however long that is. Exec and the port-forwards
// call it themselves; callers that attach to a session's terminal or
// process directly call it around the attach.
func (c *Client) InUse(name string) (done func()) {
	c.activity.mu.Lock()
	defer c.activity.mu.Unlock()
	u := c.activity.useOf(name)
	c.reportIfDue(name, u, time.Now())
	u.inFlight++
	if u.inFlight == 1 {
		u.stop = make(chan struct{})
		go c.reportWhileInUse(name, u, u.stop)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			c.activity.mu.Lock()
			defer c.activity.mu.Unlock()
			u.inFlight--
			if u.inFlight == 0 {
				close(u.stop)
			}
		})
	}
}

// reportWhileInUse reports every second that a report is due, until stop.
func (c *Client) reportWhileInUse(name string, u *use, stop <-chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			c.activity.mu.Lock()
			c.reportIfDue(name, u, now)
			c.activity.mu.Unlock()
		}
	}
}

// reportActivity writes the activity record. It is the owner's own
// Sandbox (admission refuses anyone else's), and an annotation does not
// change the spec, so nothing restarts for it.
func (c *Client) reportActivity(ctx context.Context, name string, at time.Time) error {
	sbx := &v1.Sandbox{}
	sbx.Name = name
	patch := client.RawPatch(types.MergePatchType,
		fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, v1.AnnotationLastActivity, at.UTC().Format(time.RFC3339Nano)))
	if err := c.client.Patch(ctx, sbx, patch); err != nil {
		return c.explain(ctx, name, "record the use of", err)
	}
	return nil
}

// WakeTimeout is how long an operation on a sandbox stopped for idleness
// waits for it to run again.
const WakeTimeout = 5 * time.Minute

// wake starts a sandbox stopped for idleness again, by recording its use
// (the reconciler starts an idle-stopped sandbox used after its stop), and
// waits for it to be Ready, telling Waking how it goes. A sandbox whose
// template says lifecycle.wakeOnConnect: false is not woken.
func (c *Client) wake(ctx context.Context, sbx *v1.Sandbox) (*v1.Sandbox, error) {
	idle := sbx.Status.Idle
	if idle != nil && !idle.WakeOnConnect {
		return nil, &NotReadyError{Name: sbx.Name, Phase: sbx.Status.Phase,
			Message: fmt.Sprintf("it stopped after %s without use, and its template's lifecycle.wakeOnConnect is false, so using it does not start it", idle.Timeout.Duration)}
	}
	// After the stop by the reconciler's clock, even where this machine's
	// runs behind it.
	at := time.Now()
	if stopped := sbx.Status.StoppedAt; stopped != nil && !at.After(stopped.Time) {
		at = stopped.Add(time.Second)
	}
	if err := c.reportActivity(ctx, sbx.Name, at); err != nil {
		return nil, err
	}
	c.activity.mu.Lock()
	c.activity.useOf(sbx.Name).reported = time.Now()
	c.activity.mu.Unlock()
	if c.Waking != nil {
		c.Waking(Progress{Name: sbx.Name, Phase: sbx.Status.Phase, Reason: v1.ReasonIdleTimeout, Message: "waking the sandbox, stopped for idleness"})
	}
	return c.WaitReady(ctx, sbx.Name, WakeTimeout, c.Waking)
}
