// Package webui serves the Sandboxes page: the installation's status, the
// templates, warm pools and Git syncs behind it, and the sandboxes on the
// cluster, with actions (new, stop, start, delete, logs, an inline
// terminal) taken as the caller's own Kubernetes identity.
//
// It is a local program, like `kubectl proxy`: the server runs beside the
// browser with the user's kubeconfig, so RBAC and the admission policies
// decide every action as they do for kubectl, and the audit log and
// agentsandbox.dev/changed-by name the person. Nothing of the kubeconfig
// reaches the browser. The page follows the cluster through one watch per
// kind, shared by every open tab, and pushes re-rendered sections over
// Server-Sent Events; the browser never polls.
//
// Because whoever can send it requests acts with the user's identity, the
// server answers only requests for its own host name (no DNS rebinding),
// takes state-changing requests only with its per-process CSRF token from
// its own origin, and sends a Content-Security-Policy that runs no script
// but its own files.
package webui

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/agentsandbox/terraform-provider-agentsandbox/config"
	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

//go:embed templates/*.html
var templateFiles embed.FS

// static holds the page's own script and style, and, under vendor/, the
// terminal emulator's files that `make web` copies from its npm package
// (they are not committed: no third-party code lives in the repository).
//
//go:embed all:static
var static embed.FS

// terminalAsset is a file the inline terminal needs; without it the page
// works but offers no terminal.
const terminalAsset = "static/vendor/xterm.js"

// Options configure a Server.
type Options struct {
	// Context names the kubeconfig context, shown in the page's header.
	Context string
	// Server is the API server's URL, shown in the header.
	Server string
}

// Server serves the page for one Kubernetes identity.
type Server struct {
	opts     Options
	sdk      *sandboxclient.Client
	hub      *hub
	pages    *template.Template
	csrf     string
	terminal bool

	// What this binary expects installed.
	crds     []*apiextensionsv1.CustomResourceDefinition
	policies []*unstructured.Unstructured

	// hosts are the Host header values the page answers to; nil answers
	// every host (an address that is not loopback, chosen explicitly).
	hosts map[string]bool
	mux   *http.ServeMux

	// started guards the watches' start, by Start or else by Serve.
	started sync.Once
}

// New returns a server acting with cfg's credentials. Call Serve to start.
func New(cfg *rest.Config, opts Options) (*Server, error) {
	sdk, err := sandboxclient.New(cfg)
	if err != nil {
		return nil, err
	}
	crds, err := config.CRDs()
	if err != nil {
		return nil, err
	}
	h, err := newHub(rest.CopyConfig(cfg), crds)
	if err != nil {
		return nil, err
	}
	pages, err := template.New("page").Funcs(templateFuncs).ParseFS(templateFiles, "templates/*.html")
	if err != nil {
		return nil, err
	}
	policies, err := config.Admission()
	if err != nil {
		return nil, err
	}
	token := make([]byte, 32)
	if _, err := rand.Read(token); err != nil {
		return nil, err
	}
	_, statErr := fs.Stat(static, terminalAsset)
	s := &Server{opts: opts, sdk: sdk, hub: h, pages: pages, csrf: hex.EncodeToString(token),
		terminal: statErr == nil, crds: crds, policies: policies}
	s.routes()
	return s, nil
}

// TerminalAvailable says whether the terminal emulator was built in (`make
// web` before go build); the page offers no terminal without it.
func (s *Server) TerminalAvailable() bool { return s.terminal }

// Start follows the cluster, until ctx ends, with every watch the caller is
// allowed, and returns once their caches hold it. A page asked for before
// then waits for them (1.1 s at 10,000 sandboxes), so `agentsandbox ui`
// names its address only after Start, and the first load is as fast as
// the next. Serve starts the watches itself when Start was not called; ctx
// must last as long as Serve's.
func (s *Server) Start(ctx context.Context) error {
	s.started.Do(func() { s.hub.start(ctx) })
	if !s.hub.cache.WaitForCacheSync(ctx) {
		return fmt.Errorf("stopped reading the cluster: %w", context.Cause(ctx))
	}
	return nil
}

// Serve answers on l until ctx ends. It starts the watches first, unless
// Start did, so the first page shows the cluster as it is.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	s.hosts = allowedHosts(l.Addr())
	s.started.Do(func() { s.hub.start(ctx) })
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
		_ = srv.Close()
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// allowedHosts are the names a browser on this machine reaches a loopback
// address by. An address that is not loopback was given explicitly; its
// users may know it by any name, so every host is answered.
func allowedHosts(addr net.Addr) map[string]bool {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !tcp.IP.IsLoopback() {
		return nil
	}
	port := fmt.Sprint(tcp.Port)
	hosts := map[string]bool{net.JoinHostPort(tcp.IP.String(), port): true, net.JoinHostPort("localhost", port): true}
	return hosts
}

func (s *Server) routes() {
	mux := http.NewServeMux()
	sub, _ := fs.Sub(static, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(sub)))
	mux.HandleFunc("GET /{$}", s.page)
	mux.HandleFunc("GET /events", s.events)
	mux.HandleFunc("POST /api/sandboxes", s.create)
	mux.HandleFunc("POST /api/sandboxes/{name}/stop", s.stop)
	mux.HandleFunc("POST /api/sandboxes/{name}/start", s.start)
	mux.HandleFunc("DELETE /api/sandboxes/{name}", s.remove)
	mux.HandleFunc("GET /api/sandboxes/{name}/logs", s.logs)
	mux.HandleFunc("GET /api/sandboxes/{name}/terminal", s.openTerminal)
	s.mux = mux
}
