// Package isolationcheck attacks a template's sandboxes from inside, with
// the caller's own rights, and reports what held: egress to the node, its
// kubelet and NodePort range, the cloud metadata address, the API server,
// another sandbox over IPv4 and IPv6, DNS, the moment a sandbox starts, the
// process limit, the workspace's size, and what the code sees of itself
// (user, capabilities, seccomp, token, the node's processes, the kernel).
//
// What a template should allow comes from the template itself and the
// reconciler's default exceptions (environment.EgressAllows); what it does
// allow is observed by the probes of package probe, copied into the
// sandboxes. Nothing here reads what a sandbox's owner may not: the check
// proves what a developer's or an agent's code can do, as they can.
package isolationcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/isolationcheck/probe"
	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// Options say what to check and how.
type Options struct {
	// Template is the SandboxTemplate whose sandboxes are attacked; or
	// Pool, a WarmPool whose members are claimed (warm, as agents get
	// them) and whose template is judged.
	Template, Pool string
	// Unreachable are more destinations (host:port) the sandboxes must not
	// reach: a database of the platform, a node-local service.
	Unreachable []string
	// Resolvers are more DNS servers (IP or IP:port, port 53 by default)
	// the sandboxes' code might ask besides those of its resolv.conf: a
	// node-local DNS cache, say.
	Resolvers []string
	// MaxProcesses is how many processes a sandbox may start before the
	// check calls its process limit missing (default DefaultMaxProcesses).
	MaxProcesses int
	// Probe is the probe binary (cmd/sandbox-gate) for the sandboxes' nodes.
	Probe []byte
	// ReadyTimeout bounds each wait for a sandbox to be Ready (default 5m).
	ReadyTimeout time.Duration
	// Progress, when set, hears each step.
	Progress func(string)
}

// DefaultMaxProcesses is Options.MaxProcesses's default: far more than
// agent code needs, far fewer than a node has (32,768 by default).
const DefaultMaxProcesses = 4096

// listenPort is where the second sandbox listens for the first.
const listenPort = 47123

// probePath is where the probe binary goes, inside the workspace.
const probePath = ".agentsandbox-probe"

// Run starts two sandboxes from the template, probes from inside them,
// deletes them, and reports. The error is for a check that could not run
// at all (the template is missing, a sandbox never became Ready); a
// report with failed rows is not an error.
func Run(ctx context.Context, sdk *sandboxclient.Client, reader client.Reader, opts Options) (*Report, error) {
	if opts.MaxProcesses <= 0 {
		opts.MaxProcesses = DefaultMaxProcesses
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 5 * time.Minute
	}
	if opts.Progress == nil {
		opts.Progress = func(string) {}
	}
	resolvers, err := resolverAddresses(opts.Resolvers)
	if err != nil {
		return nil, err
	}
	opts.Resolvers = resolvers
	c := &check{sdk: sdk, opts: opts}
	if err := c.readTemplate(ctx, reader); err != nil {
		return nil, err
	}
	defer c.cleanUp()
	if err := c.start(ctx); err != nil {
		return nil, err
	}
	report := &Report{Template: c.opts.Template, Pool: c.opts.Pool, Runtime: c.runtime(), Sandboxes: []string{c.a.name, c.b.name}}
	rows, err := c.probe(ctx)
	report.Rows = rows
	return report, err
}

// check is one run.
type check struct {
	sdk      *sandboxclient.Client
	opts     Options
	template *v1.SandboxTemplate
	// handler is the template's node pool's runtime handler ("" without a
	// pool: the cluster's default runtime).
	handler string
	// a attacks; b is the other sandbox a must not reach.
	a, b *sandbox
	mu   sync.Mutex
	made []string
}

// sandbox is one of the check's sandboxes, with the probe copied in.
type sandbox struct {
	name, workspace string
	facts           probe.Facts
}

func (c *check) readTemplate(ctx context.Context, reader client.Reader) error {
	if (c.opts.Template == "") == (c.opts.Pool == "") {
		return errors.New("name exactly one of a template and a warm pool")
	}
	if c.opts.Pool != "" {
		pool := &v1.WarmPool{}
		if err := reader.Get(ctx, client.ObjectKey{Name: c.opts.Pool}, pool); err != nil {
			return fmt.Errorf("reading warm pool %s: %w", c.opts.Pool, err)
		}
		c.opts.Template = pool.Spec.TemplateRef.Name
	}
	c.template = &v1.SandboxTemplate{}
	if err := reader.Get(ctx, client.ObjectKey{Name: c.opts.Template}, c.template); err != nil {
		return fmt.Errorf("reading template %s: %w", c.opts.Template, err)
	}
	if ref := c.template.Spec.NodePoolRef; ref != nil {
		pool := &v1.NodePool{}
		if err := reader.Get(ctx, client.ObjectKey{Name: ref.Name}, pool); err != nil {
			return fmt.Errorf("reading node pool %s of template %s: %w", ref.Name, c.opts.Template, err)
		}
		c.handler = pool.Spec.RuntimeHandler
	}
	return nil
}

// source is where the check's sandboxes come from.
func (c *check) source() string {
	if c.opts.Pool != "" {
		return "warm pool " + c.opts.Pool
	}
	return "template " + c.opts.Template
}

func (c *check) runtime() string {
	if c.handler == "" {
		return "the cluster's default runtime"
	}
	return "runtime handler " + c.handler
}

// start claims the two sandboxes at once and copies the probe into both.
func (c *check) start(ctx context.Context) error {
	c.opts.Progress("starting two sandboxes from " + c.source())
	boxes := make([]*sandbox, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range boxes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			boxes[i], errs[i] = c.startOne(ctx)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	c.a, c.b = boxes[0], boxes[1]
	return nil
}

func (c *check) startOne(ctx context.Context) (*sandbox, error) {
	claim := sandboxclient.ClaimOptions{Template: c.opts.Template, Wait: c.opts.ReadyTimeout}
	if c.opts.Pool != "" {
		claim = sandboxclient.ClaimOptions{Pool: c.opts.Pool, Wait: c.opts.ReadyTimeout}
	}
	claim.Progress = func(p sandboxclient.Progress) {
		c.opts.Progress(fmt.Sprintf("sandbox %s: %s %s", p.Name, orRequested(p.Phase), p.Message))
	}
	sbx, err := c.sdk.Claim(ctx, claim)
	if sbx != nil {
		c.mu.Lock()
		c.made = append(c.made, sbx.Name)
		c.mu.Unlock()
	}
	if err != nil {
		return nil, fmt.Errorf("a sandbox of %s did not start: %w", c.source(), err)
	}
	s := &sandbox{name: sbx.Name}
	return s, c.copyProbe(ctx, s)
}

// copyProbe puts the probe into s's workspace.
func (c *check) copyProbe(ctx context.Context, s *sandbox) error {
	workspace, err := c.sdk.Workspace(ctx, s.name)
	if err != nil {
		return err
	}
	if workspace == "" {
		return fmt.Errorf("sandbox %s has no workspace to copy the probe into", s.name)
	}
	s.workspace = workspace
	err = c.sdk.WriteFile(ctx, s.name, probePath, bytes.NewReader(c.opts.Probe), int64(len(c.opts.Probe)),
		sandboxclient.FileOptions{Mode: 0o755, Limit: int64(len(c.opts.Probe))})
	if err != nil {
		return fmt.Errorf("copying the probe into sandbox %s: %w", s.name, err)
	}
	return nil
}

func orRequested(phase v1.SandboxPhase) string {
	if phase == "" {
		return "requested"
	}
	return string(phase)
}

// cleanUp deletes the sandboxes and waits until they are gone, even after
// the check's context ended: nothing of the check is left behind.
func (c *check) cleanUp() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c.opts.Progress(fmt.Sprintf("deleting sandboxes %v", c.made))
	for _, name := range c.made {
		if err := c.sdk.Delete(ctx, name); err != nil && !sandboxclient.IsNotFound(err) {
			c.opts.Progress(fmt.Sprintf("deleting sandbox %s: %v (delete it yourself)", name, err))
		}
	}
	for _, name := range c.made {
		for {
			_, err := c.sdk.Get(ctx, name)
			if sandboxclient.IsNotFound(err) {
				break
			}
			if ctx.Err() != nil {
				c.opts.Progress(fmt.Sprintf("sandbox %s is not gone after 2 minutes (agentsandbox get %s says why)", name, name))
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
}

// run runs the probe in s with args and returns its stdout, stderr and
// exit code.
func (c *check) run(ctx context.Context, s *sandbox, args ...string) (stdout, stderr string, code int, err error) {
	var out, errOut bytes.Buffer
	code, err = c.sdk.Exec(ctx, s.name, sandboxclient.ExecOptions{
		Command: s.command(args...), Stdout: &out, Stderr: &errOut, Timeout: 2 * time.Minute,
	})
	return out.String(), errOut.String(), code, err
}

// command is the probe's command line in s.
func (s *sandbox) command(args ...string) []string {
	return append([]string{path.Join(s.workspace, probePath), probe.Command}, args...)
}

// runJSON runs a probe that must succeed and decodes its output into v.
func (c *check) runJSON(ctx context.Context, s *sandbox, v any, args ...string) error {
	stdout, stderr, code, err := c.run(ctx, s, args...)
	if err != nil {
		return fmt.Errorf("probe %s in sandbox %s: %w", args[0], s.name, err)
	}
	if code != 0 {
		return fmt.Errorf("probe %s in sandbox %s exited %d: %s", args[0], s.name, code, strings.TrimSpace(stderr))
	}
	if err := json.Unmarshal([]byte(stdout), v); err != nil {
		return fmt.Errorf("probe %s in sandbox %s printed %q: %w", args[0], s.name, stdout, err)
	}
	return nil
}

func itoa(n int) string { return strconv.Itoa(n) }
