package mcpserver_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/kubescheme"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
	"github.com/agentsandbox/terraform-provider-agentsandbox/mcpserver"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile"
	"github.com/agentsandbox/terraform-provider-agentsandbox/reconcile/reconciletest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// The tests that need a cluster run the controllers in-process and serve
// the tools as developers with the agentsandbox-user role, to the go-sdk's
// own client as a coding agent uses it. On the local cluster kwok runs a
// sandbox's commands as host processes (hack/cluster/kwok.yaml), so a
// template's workspace is a host directory of the test's.
func TestMain(m *testing.M) {
	reconciletest.MainLeakChecked(m, func(mgr ctrl.Manager) error { return reconcile.SetupControllers(mgr, reconcile.Options{}) })
}

// connect serves the tools as dev, with opts, and connects the go-sdk's
// client to them in memory: what `agentsandbox mcp` serves over stdio, less
// the process.
func connect(t *testing.T, dev testcluster.Developer, opts mcpserver.Options) *mcp.ClientSession {
	t.Helper()
	sdk, err := sandboxclient.New(dev.Config)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := client.New(dev.Config, client.Options{Scheme: kubescheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	serverEnd, clientEnd := mcp.NewInMemoryTransports()
	served, err := mcpserver.New(sdk, kube, opts).Connect(context.Background(), serverEnd, nil)
	if err != nil {
		t.Fatal(err)
	}
	session, err := mcp.NewClient(&mcp.Implementation{Name: "agentsandbox-test", Version: "v0"}, nil).Connect(context.Background(), clientEnd, nil)
	if err != nil {
		t.Fatalf("connecting to the MCP server: %v", err)
	}
	t.Cleanup(func() {
		_ = session.Close()
		_ = served.Wait()
	})
	return session
}

// call calls a tool and decodes its structured result into Out. A tool
// error is returned as its text, the result is then zero.
func call[Out any](t *testing.T, s *mcp.ClientSession, tool string, args any) (out Out, toolError string) {
	t.Helper()
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", tool, err)
	}
	if res.IsError {
		var texts []string
		for _, c := range res.Content {
			if text, ok := c.(*mcp.TextContent); ok {
				texts = append(texts, text.Text)
			}
		}
		return out, strings.Join(texts, "\n")
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: result %s: %v", tool, raw, err)
	}
	return out, ""
}

// must is call for a tool that has to succeed.
func must[Out any](t *testing.T, s *mcp.ClientSession, tool string, args any) Out {
	t.Helper()
	out, toolErr := call[Out](t, s, tool, args)
	if toolErr != "" {
		t.Fatalf("%s(%v): %s", tool, args, toolErr)
	}
	return out
}
