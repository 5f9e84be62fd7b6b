package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// The tools' inputs and outputs. The JSON schemas an agent sees are
// derived from these: a field without omitempty is required.

type sandboxRef struct {
	Sandbox string `json:"sandbox" jsonschema:"name of the sandbox"`
}

// Template is a template a sandbox can be created from.
type Template struct {
	Name    string `json:"name"`
	Image   string `json:"image"`
	Ready   bool   `json:"ready"`
	Message string `json:"message,omitempty" jsonschema:"why the template is not ready"`
}

// WarmPool keeps sandboxes of a template started, to be claimed at once.
type WarmPool struct {
	Name          string `json:"name"`
	Template      string `json:"template"`
	Replicas      int32  `json:"replicas"`
	ReadyReplicas int32  `json:"ready_replicas"`
	Ready         bool   `json:"ready"`
	Message       string `json:"message,omitempty" jsonschema:"why the pool is not ready"`
}

type listTemplatesOut struct {
	Templates []Template `json:"templates"`
	WarmPools []WarmPool `json:"warm_pools"`
}

type listSandboxesIn struct {
	All bool `json:"all,omitempty" jsonschema:"every sandbox you may see, not only your own"`
}

// Sandbox describes one sandbox.
type Sandbox struct {
	Name       string `json:"name"`
	Owner      string `json:"owner"`
	Template   string `json:"template,omitempty"`
	WarmPool   string `json:"warm_pool,omitempty"`
	State      string `json:"state" jsonschema:"Running or Stopped, as asked for"`
	Phase      string `json:"phase" jsonschema:"where the sandbox is: Pending, Starting, Running, Stopping, Stopped, Failed, Deleting"`
	Ready      bool   `json:"ready"`
	Message    string `json:"message,omitempty" jsonschema:"why the sandbox is not ready: what it waits for, or the scheduler's or the kubelet's words when no node takes or starts it"`
	LaunchType string `json:"launch_type,omitempty" jsonschema:"Warm (claimed from a pool) or Cold"`
	Expires    string `json:"expires,omitempty" jsonschema:"when the cluster deletes the sandbox (RFC 3339)"`
	Workspace  string `json:"workspace,omitempty" jsonschema:"where the workspace is mounted in the sandbox: the file tools' paths and run_command's workdir start there"`
}

type sandboxList struct {
	Sandboxes []Sandbox `json:"sandboxes"`
}

type createIn struct {
	Template string `json:"template,omitempty" jsonschema:"template to start the sandbox from"`
	WarmPool string `json:"warm_pool,omitempty" jsonschema:"warm pool to claim a started sandbox from"`
	Name     string `json:"name,omitempty" jsonschema:"name of the sandbox (lowercase letters, digits and '-'); generated when unset"`
	Lifetime string `json:"lifetime,omitempty" jsonschema:"how long the sandbox may live, e.g. 30m or 2h; the server's limit when unset"`
}

type runIn struct {
	Sandbox        string   `json:"sandbox" jsonschema:"name of the sandbox"`
	Command        []string `json:"command" jsonschema:"the program and its arguments, not run through a shell"`
	Stdin          string   `json:"stdin,omitempty" jsonschema:"text given to the command on its standard input"`
	Workdir        string   `json:"workdir,omitempty" jsonschema:"directory to run in, e.g. src (relative to the workspace) or /tmp; the image's default when unset"`
	TimeoutSeconds int      `json:"timeout_seconds,omitempty" jsonschema:"stop waiting for the command after this many seconds (default 300)"`
	OutputEncoding string   `json:"output_encoding,omitempty" jsonschema:"text (default) or base64: how stdout and stderr are returned; output that is not UTF-8 text comes as base64 whatever this says"`
}

// CommandResult is what a command did.
type CommandResult struct {
	ExitCode      int    `json:"exit_code" jsonschema:"the command's exit status (128+N when signal N killed it, as a shell reports it); -1 when it timed out"`
	Stdout        string `json:"stdout"`
	Stderr        string `json:"stderr"`
	StdoutDropped int64  `json:"stdout_dropped" jsonschema:"bytes of stdout beyond the output limit, not returned"`
	StderrDropped int64  `json:"stderr_dropped" jsonschema:"bytes of stderr beyond the output limit, not returned"`
	// StdoutEncoding and StderrEncoding are base64 when the stream is
	// returned so, absent for text.
	StdoutEncoding string `json:"stdout_encoding,omitempty" jsonschema:"base64 when stdout is returned as base64 (asked for, or not UTF-8 text); absent for text"`
	StderrEncoding string `json:"stderr_encoding,omitempty" jsonschema:"base64 when stderr is returned as base64 (asked for, or not UTF-8 text); absent for text"`
	TimedOut       bool   `json:"timed_out"`
	Signal         string `json:"signal,omitempty" jsonschema:"the signal that killed the command, without SIG (KILL, TERM), when the node says so"`
	Note           string `json:"note,omitempty" jsonschema:"what the result does not say by itself: a command waited out may still be running"`
}

// encodings a file's content may be given or returned in.
const (
	encodingText   = "text"
	encodingBase64 = "base64"
)

type writeIn struct {
	Sandbox  string `json:"sandbox" jsonschema:"name of the sandbox"`
	Path     string `json:"path" jsonschema:"file path relative to the workspace"`
	Content  string `json:"content"`
	Encoding string `json:"encoding,omitempty" jsonschema:"text (default) or base64"`
}

type writeOut struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

type readIn struct {
	Sandbox  string `json:"sandbox" jsonschema:"name of the sandbox"`
	Path     string `json:"path" jsonschema:"file path relative to the workspace"`
	Encoding string `json:"encoding,omitempty" jsonschema:"text (default) or base64"`
}

type readOut struct {
	Path     string `json:"path"`
	Content  string `json:"content"`
	Encoding string `json:"encoding" jsonschema:"base64 when asked for, or when the file is not UTF-8 text"`
	Bytes    int64  `json:"bytes"`
}

type listFilesIn struct {
	Sandbox string `json:"sandbox" jsonschema:"name of the sandbox"`
	Path    string `json:"path,omitempty" jsonschema:"directory relative to the workspace (default: the workspace)"`
}

type listFilesOut struct {
	Entries []sandboxclient.DirEntry `json:"entries"`
}

type deleteOut struct {
	Deleted string `json:"deleted"`
}

// File is one file run_once writes before the command runs.
type File struct {
	Path     string `json:"path" jsonschema:"file path relative to the workspace"`
	Content  string `json:"content"`
	Encoding string `json:"encoding,omitempty" jsonschema:"text (default) or base64"`
}

type runOnceIn struct {
	Template       string   `json:"template,omitempty" jsonschema:"template to start the sandbox from"`
	WarmPool       string   `json:"warm_pool,omitempty" jsonschema:"warm pool to claim a started sandbox from"`
	Files          []File   `json:"files,omitempty" jsonschema:"files to write into the workspace first"`
	Command        []string `json:"command" jsonschema:"the program and its arguments, not run through a shell"`
	Stdin          string   `json:"stdin,omitempty" jsonschema:"text given to the command on its standard input"`
	Workdir        string   `json:"workdir,omitempty" jsonschema:"directory to run in, relative to the workspace or absolute; the image's default when unset"`
	TimeoutSeconds int      `json:"timeout_seconds,omitempty" jsonschema:"stop the command after this many seconds (default 300)"`
	OutputEncoding string   `json:"output_encoding,omitempty" jsonschema:"text (default) or base64: how stdout and stderr are returned; output that is not UTF-8 text comes as base64 whatever this says"`
}

type runOnceOut struct {
	Sandbox string `json:"sandbox" jsonschema:"the sandbox the command ran in, deleted since"`
	CommandResult
}

func (t *tools) listTemplates(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, listTemplatesOut, error) {
	out := listTemplatesOut{Templates: []Template{}, WarmPools: []WarmPool{}}
	templates := &v1.SandboxTemplateList{}
	if err := t.kube.List(ctx, templates); err != nil {
		return nil, out, fmt.Errorf("listing templates: %w", err)
	}
	for _, tpl := range templates.Items {
		ready, why := readiness(&tpl)
		out.Templates = append(out.Templates, Template{Name: tpl.Name, Image: tpl.Spec.Image, Ready: ready, Message: why})
	}
	pools := &v1.WarmPoolList{}
	if err := t.kube.List(ctx, pools); err != nil {
		return nil, out, fmt.Errorf("listing warm pools: %w", err)
	}
	for _, p := range pools.Items {
		ready, why := readiness(&p)
		out.WarmPools = append(out.WarmPools, WarmPool{Name: p.Name, Template: p.Spec.TemplateRef.Name,
			Replicas: p.Status.Replicas, ReadyReplicas: p.Status.ReadyReplicas, Ready: ready, Message: why})
	}
	return nil, out, nil
}

// readiness is whether an object is ready (v1alpha1.Readiness, as
// Terraform and GitOps judge it), and why not when it is not.
func readiness(obj v1.Judged) (ready bool, why string) {
	r := obj.Readiness()
	if r.Ready {
		return true, ""
	}
	return false, r.Message
}

func (t *tools) listSandboxes(ctx context.Context, _ *mcp.CallToolRequest, in listSandboxesIn) (*mcp.CallToolResult, sandboxList, error) {
	out := sandboxList{Sandboxes: []Sandbox{}}
	list, err := t.sdk.List(ctx, sandboxclient.ListOptions{Mine: !in.All})
	if err != nil {
		return nil, out, err
	}
	for i := range list {
		out.Sandboxes = append(out.Sandboxes, describe(&list[i]))
	}
	return nil, out, nil
}

func (t *tools) createSandbox(ctx context.Context, _ *mcp.CallToolRequest, in createIn) (*mcp.CallToolResult, Sandbox, error) {
	sbx, err := t.create(ctx, in)
	if err != nil {
		return nil, Sandbox{}, err
	}
	out := describe(sbx)
	if out.Workspace, err = t.sdk.Workspace(ctx, sbx.Name); err != nil {
		return nil, out, err
	}
	return nil, out, nil
}

// create claims a sandbox with the server's lifetime rules and waits for it
// to be Ready; one that does not become Ready is deleted again.
func (t *tools) create(ctx context.Context, in createIn) (*v1.Sandbox, error) {
	if (in.Template == "") == (in.WarmPool == "") {
		return nil, errors.New("set exactly one of template and warm_pool (list_templates shows both)")
	}
	lifetime := t.opts.Lifetime
	if in.Lifetime != "" {
		d, err := time.ParseDuration(in.Lifetime)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("lifetime %q is not a duration such as 30m or 2h", in.Lifetime)
		}
		if d > t.opts.Lifetime {
			return nil, fmt.Errorf("lifetime %s is longer than this server allows (%s)", in.Lifetime, t.opts.Lifetime)
		}
		lifetime = d
	}
	sbx, err := t.sdk.Claim(ctx, sandboxclient.ClaimOptions{
		Template: in.Template, Pool: in.WarmPool, Name: in.Name, TTL: lifetime, Wait: t.opts.ReadyTimeout,
	})
	if err != nil {
		if sbx != nil && sbx.Name != "" {
			// Not ready: nothing of a failed call stays behind.
			if delErr := t.sdk.Delete(context.WithoutCancel(ctx), sbx.Name); delErr == nil {
				return nil, fmt.Errorf("%w (sandbox %s deleted again)", err, sbx.Name)
			}
		}
		return nil, err
	}
	return sbx, nil
}

func (t *tools) runCommand(ctx context.Context, _ *mcp.CallToolRequest, in runIn) (*mcp.CallToolResult, CommandResult, error) {
	res, err := t.run(ctx, in)
	return nil, res, err
}

// run runs a command with its output capped. A command that ran to its end
// is a result whatever its exit code; one that timed out is a result with
// timed_out set.
func (t *tools) run(ctx context.Context, in runIn) (CommandResult, error) {
	if len(in.Command) == 0 || in.Command[0] == "" {
		return CommandResult{}, errors.New("command is empty: give the program and its arguments, e.g. [\"python3\", \"main.py\"]")
	}
	if err := checkEncoding(in.OutputEncoding); err != nil {
		return CommandResult{}, fmt.Errorf("output_encoding: %w", err)
	}
	timeout := defaultCommandTimeout
	if in.TimeoutSeconds > 0 {
		timeout = time.Duration(in.TimeoutSeconds) * time.Second
	}
	command := in.Command
	if in.Workdir != "" && !path.IsAbs(in.Workdir) {
		// Where write_file put proj/main.py, workdir proj finds it.
		workspace, err := t.sdk.Workspace(ctx, in.Sandbox)
		if err != nil {
			return CommandResult{}, err
		}
		in.Workdir = path.Join(workspace, in.Workdir)
	}
	if in.Workdir != "" {
		// sh changes directory and then becomes the command: the
		// directory is an argument, never part of a script.
		command = append([]string{"sh", "-c", `cd -- "$1" && shift && exec "$@"`, "sh", in.Workdir}, command...)
	}
	stdout, stderr := &capped{limit: t.opts.OutputLimit}, &capped{limit: t.opts.OutputLimit}
	opts := sandboxclient.ExecOptions{Command: command, Stdout: stdout, Stderr: stderr, Timeout: timeout}
	if in.Stdin != "" {
		opts.Stdin = strings.NewReader(in.Stdin)
	}
	code, err := t.sdk.Exec(ctx, in.Sandbox, opts)
	asked := in.OutputEncoding == encodingBase64
	res := CommandResult{ExitCode: code}
	// Encoded before the counts are read: a cut character is counted.
	res.Stdout, res.StdoutEncoding = stdout.encoded(asked)
	res.Stderr, res.StderrEncoding = stderr.encoded(asked)
	res.StdoutDropped, res.StderrDropped = stdout.dropped, stderr.dropped
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		res.ExitCode, res.TimedOut = -1, true
		res.Note = fmt.Sprintf("stopped waiting after %s; the command may still be running in the sandbox "+
			"(ending the wait does not kill it on every container runtime): check with another command", timeout)
		return res, nil
	}
	if killed, ok := errors.AsType[*sandboxclient.KilledError](err); ok {
		res.Signal = killed.Signal
		return res, nil
	}
	return res, err
}

func (t *tools) writeFile(ctx context.Context, _ *mcp.CallToolRequest, in writeIn) (*mcp.CallToolResult, writeOut, error) {
	n, err := t.write(ctx, in.Sandbox, File{Path: in.Path, Content: in.Content, Encoding: in.Encoding})
	return nil, writeOut{Path: in.Path, Bytes: n}, err
}

func (t *tools) write(ctx context.Context, sandbox string, f File) (int64, error) {
	data, err := decode(f.Content, f.Encoding)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", f.Path, err)
	}
	write := func() error {
		return t.sdk.WriteFile(ctx, sandbox, f.Path, bytes.NewReader(data), int64(len(data)), sandboxclient.FileOptions{})
	}
	// An agent writes a project's files without making their directories
	// first: a missing directory is made, as mkdir -p would, and the write
	// tried again. The first try costs nothing extra when it exists.
	err = write()
	if errors.Is(err, fs.ErrNotExist) {
		if err = t.makeDirs(ctx, sandbox, path.Dir(f.Path)); err == nil {
			err = write()
		}
	}
	return int64(len(data)), err
}

// makeDirs makes dir and its missing parents in the workspace.
func (t *tools) makeDirs(ctx context.Context, sandbox, dir string) error {
	if dir == "." || dir == "/" {
		return nil
	}
	info, err := t.sdk.Stat(ctx, sandbox, dir)
	switch {
	case err == nil && info.Type == "dir":
		return nil
	case err == nil:
		return fmt.Errorf("%s is a %s, not a directory", dir, info.Type)
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if err := t.makeDirs(ctx, sandbox, path.Dir(dir)); err != nil {
		return err
	}
	if err := t.sdk.MakeDir(ctx, sandbox, dir, 0); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

func (t *tools) readFile(ctx context.Context, _ *mcp.CallToolRequest, in readIn) (*mcp.CallToolResult, readOut, error) {
	if err := checkEncoding(in.Encoding); err != nil {
		return nil, readOut{}, err
	}
	var buf bytes.Buffer
	n, err := t.sdk.ReadFile(ctx, in.Sandbox, in.Path, &buf, sandboxclient.FileOptions{})
	if err != nil {
		return nil, readOut{}, err
	}
	out := readOut{Path: in.Path, Bytes: n, Encoding: encodingText, Content: buf.String()}
	if in.Encoding == encodingBase64 || !utf8.Valid(buf.Bytes()) {
		out.Encoding, out.Content = encodingBase64, base64.StdEncoding.EncodeToString(buf.Bytes())
	}
	return nil, out, nil
}

func (t *tools) listFiles(ctx context.Context, _ *mcp.CallToolRequest, in listFilesIn) (*mcp.CallToolResult, listFilesOut, error) {
	dir := in.Path
	if dir == "" {
		dir = "."
	}
	entries, err := t.sdk.ListDir(ctx, in.Sandbox, dir)
	if entries == nil {
		entries = []sandboxclient.DirEntry{}
	}
	return nil, listFilesOut{Entries: entries}, err
}

func (t *tools) stopSandbox(ctx context.Context, _ *mcp.CallToolRequest, in sandboxRef) (*mcp.CallToolResult, Sandbox, error) {
	if err := t.sdk.Stop(ctx, in.Sandbox); err != nil {
		return nil, Sandbox{}, err
	}
	sbx, err := t.sdk.WaitStopped(ctx, in.Sandbox, t.opts.ReadyTimeout, nil)
	if err != nil {
		return nil, Sandbox{}, err
	}
	return nil, describe(sbx), nil
}

func (t *tools) startSandbox(ctx context.Context, _ *mcp.CallToolRequest, in sandboxRef) (*mcp.CallToolResult, Sandbox, error) {
	if err := t.sdk.Start(ctx, in.Sandbox); err != nil {
		return nil, Sandbox{}, err
	}
	sbx, err := t.sdk.WaitReady(ctx, in.Sandbox, t.opts.ReadyTimeout, nil)
	if err != nil {
		return nil, Sandbox{}, err
	}
	return nil, describe(sbx), nil
}

func (t *tools) deleteSandbox(ctx context.Context, _ *mcp.CallToolRequest, in sandboxRef) (*mcp.CallToolResult, deleteOut, error) {
	if err := t.sdk.Delete(ctx, in.Sandbox); err != nil {
		return nil, deleteOut{}, err
	}
	return nil, deleteOut{Deleted: in.Sandbox}, nil
}

func (t *tools) runOnce(ctx context.Context, _ *mcp.CallToolRequest, in runOnceIn) (_ *mcp.CallToolResult, out runOnceOut, err error) {
	// Inputs are checked before anything is created.
	if len(in.Command) == 0 || in.Command[0] == "" {
		return nil, runOnceOut{}, errors.New("command is empty: give the program and its arguments, e.g. [\"python3\", \"main.py\"]")
	}
	for _, f := range in.Files {
		if _, err := decode(f.Content, f.Encoding); err != nil {
			return nil, runOnceOut{}, fmt.Errorf("files: %s: %w", f.Path, err)
		}
	}
	sbx, err := t.create(ctx, createIn{Template: in.Template, WarmPool: in.WarmPool})
	if err != nil {
		return nil, runOnceOut{}, err
	}
	out.Sandbox = sbx.Name
	// Deleted however the call ends, cancelled or not.
	defer func() {
		if delErr := t.sdk.Delete(context.WithoutCancel(ctx), sbx.Name); delErr != nil && !sandboxclient.IsNotFound(delErr) && err == nil {
			err = fmt.Errorf("the command ran, but deleting sandbox %s failed: %w", sbx.Name, delErr)
		}
	}()
	for _, f := range in.Files {
		if _, err = t.write(ctx, sbx.Name, f); err != nil {
			return nil, out, err
		}
	}
	out.CommandResult, err = t.run(ctx, runIn{Sandbox: sbx.Name, Command: in.Command, Stdin: in.Stdin,
		Workdir: in.Workdir, TimeoutSeconds: in.TimeoutSeconds, OutputEncoding: in.OutputEncoding})
	return nil, out, err
}

// describe is what the tools say about a sandbox.
func describe(sbx *v1.Sandbox) Sandbox {
	s := Sandbox{Name: sbx.Name, Owner: sbx.Spec.Owner, State: string(sbx.Spec.State), Phase: string(sbx.Status.Phase),
		Ready: sbx.Usable(), LaunchType: string(sbx.Status.LaunchType)}
	if !s.Ready {
		s.Message = sbx.Readiness().Message
	}
	if s.State == "" {
		s.State = string(v1.SandboxRunning)
	}
	if ref := sbx.Spec.TemplateRef; ref != nil {
		s.Template = ref.Name
	}
	if ref := sbx.Spec.WarmPoolRef; ref != nil {
		s.WarmPool = ref.Name
	}
	if at := sbx.Status.ShutdownAt; at != nil {
		s.Expires = at.UTC().Format(time.RFC3339)
	}
	return s
}

func checkEncoding(encoding string) error {
	if encoding != "" && encoding != encodingText && encoding != encodingBase64 {
		return fmt.Errorf("encoding %q: use text or base64", encoding)
	}
	return nil
}

func decode(content, encoding string) ([]byte, error) {
	if err := checkEncoding(encoding); err != nil {
		return nil, err
	}
	if encoding != encodingBase64 {
		return []byte(content), nil
	}
	data, err := base64.StdEncoding.DecodeString(content)
	if err != nil {
		return nil, fmt.Errorf("content is not base64: %w", err)
	}
	return data, nil
}

// capped keeps the first limit bytes written to it and counts the rest.
type capped struct {
	buf     bytes.Buffer
	limit   int
	dropped int64
}

func (c *capped) Write(p []byte) (int, error) {
	room := min(max(c.limit-c.buf.Len(), 0), len(p))
	c.buf.Write(p[:room])
	c.dropped += int64(len(p) - room)
	return len(p), nil
}

// encoded is what was kept, as text, or as base64 (and encodingBase64)
// when asked for or when it is not UTF-8 text.
func (c *capped) encoded(base64Asked bool) (string, string) {
	if base64Asked || !utf8.Valid(c.trimmed()) {
		return base64.StdEncoding.EncodeToString(c.buf.Bytes()), encodingBase64
	}
	return c.text(), ""
}

// trimmed is what was kept without a character the cap cut in two.
func (c *capped) trimmed() []byte {
	kept := c.buf.Bytes()
	if c.dropped == 0 {
		return kept
	}
	start := len(kept) - 1
	for start > 0 && len(kept)-start < utf8.UTFMax && !utf8.RuneStart(kept[start]) {
		start--
	}
	if start >= 0 && utf8.RuneStart(kept[start]) && !utf8.FullRune(kept[start:]) {
		return kept[:start]
	}
	return kept
}

// text is what was kept; when the cap cut a UTF-8 character in two, its
// first bytes are dropped too (and counted), so the text stays valid.
func (c *capped) text() string {
	kept := c.trimmed()
	c.dropped += int64(c.buf.Len() - len(kept))
	return string(kept)
}
