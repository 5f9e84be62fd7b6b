package sandboxclient

import (
	"context"
	"io"

	corev1 "k8s.io/api/core/v1"
)

// LogOptions select the part of the sandbox's log to read.
type LogOptions struct {
	// Follow keeps streaming until ctx ends or the pod stops.
	Follow bool
	// TailLines, when positive, starts that many lines from the end.
	TailLines int64
}

// Logs streams the sandbox container's log (its main process's output) to w.
func (c *Client) Logs(ctx context.Context, name string, w io.Writer, opts LogOptions) error {
	t, err := c.resolveRunning(ctx, name, "read the logs of")
	if err != nil {
		return err
	}
	podOpts := &corev1.PodLogOptions{Container: t.container, Follow: opts.Follow}
	if opts.TailLines > 0 {
		podOpts.TailLines = &opts.TailLines
	}
	stream, err := c.kube.CoreV1().Pods(t.namespace).GetLogs(t.pod, podOpts).Stream(ctx)
	if err != nil {
		return c.explain(ctx, name, "read the logs of", err)
	}
	defer func() { _ = stream.Close() }()
	_, err = io.Copy(w, stream)
	return err
}
