// Package gittest serves a real Git repository over smart HTTP on loopback,
// with the system git's http-backend, so tests exercise go-git's actual
// clone and ls-remote paths against a real server.
package gittest

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/gitserve"
)

// Server is one bare repository served over HTTP, and a work tree tests
// commit to and push from.
type Server struct {
	t        testing.TB
	root     string // holds repo.git, served at /repo.git
	work     string
	addr     string
	user     string
	password string

	mu  sync.Mutex
	srv *http.Server
	// refuseFetch makes pack requests fail while ref listings still work.
	refuseFetch atomic.Bool
}

// New creates an empty repository whose default branch is main and starts
// serving it. With user set, every request needs that basic auth.
func New(t testing.TB, user, password string) *Server {
	t.Helper()
	s := &Server{t: t, root: t.TempDir(), work: t.TempDir(), user: user, password: password}
	s.git(s.root, "init", "--bare", "--initial-branch=main", "repo.git")
	s.git(s.work, "init", "--initial-branch=main")
	s.git(s.work, "remote", "add", "origin", filepath.Join(s.root, "repo.git"))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = l.Addr().String()
	s.serve(l)
	t.Cleanup(s.Stop)
	return s
}

// URL is the HTTP URL of the repository.
func (s *Server) URL() string { return "http://" + s.addr + "/repo.git" }

// Commit replaces the work tree with files (path → content), commits and
// pushes to branch, and returns the commit hash.
func (s *Server) Commit(branch string, files map[string]string) string {
	s.t.Helper()
	s.git(s.work, "checkout", "-B", branch)
	entries, err := os.ReadDir(s.work)
	if err != nil {
		s.t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != ".git" {
			if err := os.RemoveAll(filepath.Join(s.work, e.Name())); err != nil {
				s.t.Fatal(err)
			}
		}
	}
	for name, content := range files {
		p := filepath.Join(s.work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			s.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			s.t.Fatal(err)
		}
	}
	s.git(s.work, "add", "-A")
	s.git(s.work, "commit", "--allow-empty", "-q", "-m", "test commit")
	s.git(s.work, "push", "-q", "-f", "origin", branch)
	return strings.TrimSpace(s.git(s.work, "rev-parse", "HEAD"))
}

// Rewind force-pushes branch back to commit, as a history rewrite would.
func (s *Server) Rewind(branch, commit string) {
	s.t.Helper()
	s.git(s.work, "checkout", "-q", "-B", branch, commit)
	s.git(s.work, "push", "-q", "-f", "origin", branch)
}

// Tag creates an annotated tag on the last commit and pushes it.
func (s *Server) Tag(name string) {
	s.t.Helper()
	s.git(s.work, "tag", "-f", "-a", "-m", name, name)
	s.git(s.work, "push", "-q", "-f", "origin", name)
}

// RefuseFetches makes clones and fetches fail while ls-remote still
// answers, so a test can tell whether a client cloned.
func (s *Server) RefuseFetches(refuse bool) { s.refuseFetch.Store(refuse) }

// Stop closes the listener: clients get connection refused until Start.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		_ = s.srv.Close()
		s.srv = nil
	}
}

// Start serves again on the same address after Stop.
func (s *Server) Start() {
	s.t.Helper()
	l, err := net.Listen("tcp", s.addr)
	if err != nil {
		s.t.Fatalf("listen again on %s: %v", s.addr, err)
	}
	s.serve(l)
}

func (s *Server) serve(l net.Listener) {
	backend, err := gitserve.Backend(s.root)
	if err != nil {
		s.t.Fatal(err)
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.user != "" {
			u, p, ok := r.BasicAuth()
			if !ok || u != s.user || p != s.password {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		if s.refuseFetch.Load() && r.Method == http.MethodPost {
			http.Error(w, "fetches refused by the test", http.StatusServiceUnavailable)
			return
		}
		backend.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: handler}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	go func() { _ = srv.Serve(l) }()
}

func (s *Server) git(dir string, args ...string) string {
	s.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+s.root)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		s.t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return out.String()
}
