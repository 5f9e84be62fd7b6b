// Package mcpserver offers sandboxes to coding agents as Model Context
// Protocol tools: list templates and sandboxes, create one, run commands,
// move files, stop, start and delete it, or do it all in one run_once call.
//
// Every tool acts with the process's own Kubernetes identity through
// sandboxclient, the same calls the CLI makes: RBAC and the admission
// policies decide as they do for kubectl, and a refusal comes back as a
// tool error carrying the API server's words. No tool takes a kubeconfig or
// a token, so an agent cannot choose whom it acts as.
package mcpserver

import (
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// Options tune the server.
type Options struct {
	// Version is reported to clients.
	Version string
	// Lifetime is the TTL of every sandbox the server creates when the
	// agent asks for none, and the most it may ask for: an agent that
	// crashes or forgets leaves nothing running for longer.
	Lifetime time.Duration
	// OutputLimit caps each of a command's stdout and stderr, in bytes;
	// what is dropped is counted in the result.
	OutputLimit int
	// ReadyTimeout bounds the wait for a created or started sandbox.
	ReadyTimeout time.Duration
}

// Defaults for the zero Options fields.
const (
	DefaultLifetime     = time.Hour
	DefaultOutputLimit  = 64 << 10
	DefaultReadyTimeout = 5 * time.Minute
	// defaultCommandTimeout bounds a command whose call names none.
	defaultCommandTimeout = 5 * time.Minute
)

// tools is the state the tool handlers share.
type tools struct {
	sdk  *sandboxclient.Client
	kube client.Client
	opts Options
}

// New returns the MCP server with every tool, acting through sdk (sandbox
// operations) and kube (reading templates and warm pools), both of the
// same identity.
func New(sdk *sandboxclient.Client, kube client.Client, opts Options) *mcp.Server {
	if opts.Lifetime <= 0 {
		opts.Lifetime = DefaultLifetime
	}
	if opts.OutputLimit <= 0 {
		opts.OutputLimit = DefaultOutputLimit
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = DefaultReadyTimeout
	}
	t := &tools{sdk: sdk, kube: kube, opts: opts}
	s := mcp.NewServer(&mcp.Implementation{Name: "agentsandbox", Title: "Agent Sandbox", Version: opts.Version}, &mcp.ServerOptions{
		Instructions: "Isolated sandboxes on a Kubernetes cluster for running code. Create one from a template " +
			"(list_templates) or claim one from a warm pool, run commands and move files in its workspace, and delete it " +
			"when done; run_once does all of it in one call and always deletes the sandbox. Every sandbox has a lifetime " +
			fmt.Sprintf("(at most %s) after which the cluster deletes it.", opts.Lifetime),
	})
	mcp.AddTool(s, &mcp.Tool{Name: "list_templates", Description: "List the sandbox templates and warm pools " +
		"sandboxes can be created from, with whether each is ready."}, t.listTemplates)
	mcp.AddTool(s, &mcp.Tool{Name: "list_sandboxes", Description: "List your sandboxes (all those you may see " +
		"with all=true): name, state, phase, template or warm pool, expiry."}, t.listSandboxes)
	mcp.AddTool(s, &mcp.Tool{Name: "create_sandbox", Description: "Create a sandbox from a template, or claim one " +
		"from a warm pool (faster), and wait until it is ready. Set exactly one of template and warm_pool."}, t.createSandbox)
	mcp.AddTool(s, &mcp.Tool{Name: "run_command", Description: "Run a command in a sandbox (not through a shell: " +
		"pass [\"sh\", \"-c\", \"...\"] for one) and return its exit code, stdout and stderr. Output beyond the limit " +
		"is dropped and the number of bytes dropped is reported."}, t.runCommand)
	mcp.AddTool(s, &mcp.Tool{Name: "write_file", Description: "Write a file in a sandbox's workspace, replacing it " +
		"once every byte arrived. Paths are relative to the workspace and may not leave it; missing directories are " +
		"made."}, t.writeFile)
	mcp.AddTool(s, &mcp.Tool{Name: "read_file", Description: "Read a file of a sandbox's workspace, as text or " +
		"base64 (binary content is always returned as base64)."}, t.readFile)
	mcp.AddTool(s, &mcp.Tool{Name: "list_files", Description: "List a directory of a sandbox's workspace."}, t.listFiles)
	mcp.AddTool(s, &mcp.Tool{Name: "stop_sandbox", Description: "Stop a sandbox: its process ends, its workspace " +
		"is kept for start_sandbox. Waits until it has stopped."}, t.stopSandbox)
	mcp.AddTool(s, &mcp.Tool{Name: "start_sandbox", Description: "Start a stopped sandbox again, with its " +
		"workspace as it was. Waits until it is ready."}, t.startSandbox)
	mcp.AddTool(s, &mcp.Tool{Name: "delete_sandbox", Description: "Delete a sandbox and its workspace."}, t.deleteSandbox)
	mcp.AddTool(s, &mcp.Tool{Name: "run_once", Description: "In one call: create a sandbox from a template or " +
		"warm pool, write the given files, run the command, return its result, and delete the sandbox, also when " +
		"the command fails or times out."}, t.runOnce)
	return s
}
