// Package gitserve serves bare Git repositories over smart HTTP with the
// system git's http-backend: the real Git server the tests (gittest) and
// `make demo` (hack/gitserve) point GitSyncs and go-git at.
package gitserve

import (
	"fmt"
	"net/http"
	"net/http/cgi"
	"os/exec"
	"path/filepath"
	"strings"
)

// Backend serves every bare repository under root at /<name>.git, for
// clone, fetch and ls-remote. It takes pushes only into a repository whose
// http.receivepack is true: no user is authenticated, so git's default
// refuses them.
func Backend(root string) (http.Handler, error) {
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		return nil, fmt.Errorf("git --exec-path: %w (is git installed?)", err)
	}
	return &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(out)), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
	}, nil
}
