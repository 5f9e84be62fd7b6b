// Package sandboxclient is the Go SDK for working in an Agent Sandbox: claim
// a sandbox from a warm pool or a template, run commands in it, move files in
// and out, forward its ports, and stop, start, list or delete it.
//
// Every call is made with the caller's own credentials (a kubeconfig or a
// rest.Config), so the API server decides what the caller may do: only a
// sandbox's owner may exec into it, read its files, forward its ports or read
// its logs. The `agentsandbox` CLI is built on this package.
package sandboxclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/kubescheme"
)

// Client works with sandboxes as one Kubernetes identity.
type Client struct {
	config *rest.Config
	client client.WithWatch
	kube   kubernetes.Interface

	userOnce sync.Once
	user     string

	// Notices, when set, hears once per pod that a sandbox has no agent
	// and its operations go through plain exec.
	Notices io.Writer
	// Waking, when set, hears the progress of a sandbox stopped for
	// idleness that an operation wakes before it goes on (WakeTimeout).
	Waking   func(Progress)
	sessions sessions
	activity activity
}

// New returns a client that acts with the credentials of cfg.
func New(cfg *rest.Config) (*Client, error) {
	cfg = rest.CopyConfig(cfg)
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: kubescheme.Scheme})
	if err != nil {
		return nil, fmt.Errorf("failed to create client: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to create client: %w", err)
	}
	return &Client{config: cfg, client: c, kube: kube}, nil
}

// NewFromKubeconfig loads credentials the way kubectl does: the file named by
// kubeconfig, else $KUBECONFIG, else ~/.kube/config, with context (when not
// empty) overriding the current context.
func NewFromKubeconfig(kubeconfig, context string) (*Client, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: context}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("failed to load kubeconfig: %w", err)
	}
	return New(cfg)
}

// Get returns the sandbox called name.
func (c *Client) Get(ctx context.Context, name string) (*v1.Sandbox, error) {
	sbx, err := c.getRaw(ctx, name)
	if err != nil {
		return nil, c.explain(ctx, name, "read", err)
	}
	return sbx, nil
}

// getRaw is Get with the API server's error as it came.
func (c *Client) getRaw(ctx context.Context, name string) (*v1.Sandbox, error) {
	sbx := &v1.Sandbox{}
	if err := c.client.Get(ctx, types.NamespacedName{Name: name}, sbx); err != nil {
		return nil, err
	}
	return sbx, nil
}

// ListOptions narrow a List. The API server filters (the Sandbox CRD
// declares these fields selectable) and hands the list out in pages, so a
// cluster of thousands of sandboxes is never one response.
type ListOptions struct {
	// Mine lists only the caller's own sandboxes.
	Mine bool
	// Owner, Template and Phase, when set, list only the sandboxes of that
	// owner, of that template (spec.templateRef) and in that phase.
	Owner, Template string
	Phase           v1.SandboxPhase
	// PageSize is how many sandboxes one request asks for; DefaultPageSize
	// when zero.
	PageSize int64
}

// DefaultPageSize is ListOptions' default: about 1 MiB of sandboxes a
// response.
const DefaultPageSize = 500

// List returns the sandboxes the caller may see that opts select, sorted
// by name. The pages come from one consistent snapshot of the API server:
// a sandbox created or deleted while the list is read is in it or not,
// never twice and never a page's worth short. When the snapshot expires
// before the last page (the API server keeps one for minutes), the list
// starts over from a new one.
func (c *Client) List(ctx context.Context, opts ListOptions) ([]v1.Sandbox, error) {
	owner := opts.Owner
	if opts.Mine {
		user := c.User(ctx)
		if user == "" {
			return nil, errors.New("the API server does not say who you are (selfsubjectreviews), so your own sandboxes cannot be told apart: list them all")
		}
		if owner != "" && owner != user {
			return nil, fmt.Errorf("your own sandboxes are %s's, not %s's: list everyone's to see another owner's", user, owner)
		}
		owner = user
	}
	selector := fields.Set{}
	if owner != "" {
		selector["spec.owner"] = owner
	}
	if opts.Template != "" {
		selector["spec.templateRef.name"] = opts.Template
	}
	if opts.Phase != "" {
		selector["status.phase"] = string(opts.Phase)
	}
	pageSize := opts.PageSize
	if pageSize <= 0 {
		pageSize = DefaultPageSize
	}
	var out []v1.Sandbox
	next := ""
	for {
		page := &v1.SandboxList{}
		err := c.client.List(ctx, page, client.MatchingFieldsSelector{Selector: selector.AsSelector()}, client.Limit(pageSize), client.Continue(next))
		if apierrors.IsResourceExpired(err) {
			out, next = nil, ""
			continue
		}
		if err != nil {
			return nil, c.explain(ctx, "", "list", err)
		}
		out = append(out, page.Items...)
		if next = page.Continue; next == "" {
			return out, nil
		}
	}
}

// Stop asks for the sandbox's pod to be deleted while its namespace and
// workspace stay; Start brings a stopped sandbox back. Neither waits: use
// WaitStopped or WaitReady.
func (c *Client) Stop(ctx context.Context, name string) error {
	return c.setState(ctx, name, v1.SandboxStopped)
}

// Start asks for a stopped sandbox to run again; see Stop. It counts as a
// use of the sandbox, so it also starts one stopped for idleness.
func (c *Client) Start(ctx context.Context, name string) error {
	return c.setState(ctx, name, v1.SandboxRunning)
}

func (c *Client) setState(ctx context.Context, name string, state v1.SandboxState) error {
	sbx := &v1.Sandbox{}
	sbx.Name = name
	body := fmt.Appendf(nil, `{"spec":{"state":%q}}`, state)
	if state == v1.SandboxRunning {
		body = fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}},"spec":{"state":%q}}`,
			v1.AnnotationLastActivity, time.Now().UTC().Format(time.RFC3339Nano), state)
	}
	patch := client.RawPatch(types.MergePatchType, body)
	if err := c.client.Patch(ctx, sbx, patch); err != nil {
		return c.explain(ctx, name, "change", err)
	}
	return nil
}

// Delete deletes the sandbox; its namespace, pod and workspace go with it
// (garbage collection finishes that shortly after Delete returns).
func (c *Client) Delete(ctx context.Context, name string) error {
	sbx := &v1.Sandbox{}
	sbx.Name = name
	if err := c.client.Delete(ctx, sbx); err != nil {
		return c.explain(ctx, name, "delete", err)
	}
	return nil
}

// User is the caller's identity as the API server sees it (what admission
// writes into spec.owner), or "" when the server will not say.
func (c *Client) User(ctx context.Context) string {
	c.userOnce.Do(func() {
		review, err := c.kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err == nil {
			c.user = review.Status.UserInfo.Username
		}
	})
	return c.user
}
