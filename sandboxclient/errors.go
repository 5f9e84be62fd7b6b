package sandboxclient

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
)

// NotFoundError says a sandbox does not exist (or no longer does).
type NotFoundError struct {
	Name string
}

func (e *NotFoundError) Error() string { return fmt.Sprintf("sandbox %s not found", e.Name) }

// IsNotFound reports whether err says a sandbox does not exist.
func IsNotFound(err error) bool {
	var nf *NotFoundError
	return errors.As(err, &nf) || apierrors.IsNotFound(err)
}

// ClaimRefusedError says a claim cannot be made as asked, for a reason the
// caller can fix: its warm pool or template does not exist (Missing), or a
// sandbox of its name does (Taken).
type ClaimRefusedError struct {
	Missing, Taken bool
	message        string
}

func (e *ClaimRefusedError) Error() string { return e.message }

// ForbiddenError says the API server refused the caller: for a sandbox's
// pod, namespace or files that means the caller is not its owner.
type ForbiddenError struct {
	// Name of the sandbox; empty for a request about no one sandbox (list).
	Name string
	// Action is what was refused, e.g. "exec in".
	Action string
	// User is the caller's identity, when the server says it.
	User string
	// Owner is the sandbox's owner, when the caller may read it.
	Owner string
	// Err is the API server's answer.
	Err error
}

func (e *ForbiddenError) Error() string {
	who := "you"
	if e.User != "" {
		who = fmt.Sprintf("you (user %s)", e.User)
	}
	what := "sandboxes"
	if e.Name != "" {
		what = "sandbox " + e.Name
	}
	msg := fmt.Sprintf("%s may not %s %s", who, e.Action, what)
	if e.Owner != "" && e.Owner != e.User {
		msg += fmt.Sprintf(": you are not its owner (%s), and only the owner gets in", e.Owner)
	}
	return msg + " [" + apiMessage(e.Err) + "]"
}

func (e *ForbiddenError) Unwrap() error { return e.Err }

// NotReadyError says a sandbox exists but has no running pod to work in.
type NotReadyError struct {
	Name  string
	Phase v1.SandboxPhase
	// Message is the Ready condition's message: what the sandbox waits for.
	Message string
}

func (e *NotReadyError) Error() string {
	phase := e.Phase
	if phase == "" {
		phase = "unknown"
	}
	msg := fmt.Sprintf("sandbox %s is not ready (phase %s)", e.Name, phase)
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.Phase == v1.SandboxPhaseStopped {
		msg += "; start it first"
	}
	return msg
}

// explain turns an API error about sandbox name into one of this package's
// errors, naming the sandbox, the caller and the refused action.
func (c *Client) explain(ctx context.Context, name, action string, err error) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err) && name != "":
		return &NotFoundError{Name: name}
	case apierrors.IsForbidden(err):
		fe := &ForbiddenError{Name: name, Action: action, User: c.User(ctx), Err: err}
		if name != "" {
			// The owner is readable by every sandbox user; when it is not,
			// the message simply leaves it out.
			if sbx, getErr := c.getRaw(ctx, name); getErr == nil {
				fe.Owner = sbx.Spec.Owner
			}
		}
		return fe
	}
	return err
}

// apiMessage is the API server's own message without client-go's prefixes.
func apiMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Message
	}
	return strings.TrimSpace(err.Error())
}
