package mcpserver

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTPHandler serves server over MCP's streamable HTTP transport, for an
// agent that connects to a running server instead of starting one. Serve
// it on a loopback address only: whoever reaches it acts with the server's
// Kubernetes identity.
func HTTPHandler(server *mcp.Server) http.Handler {
	return sameOrigin(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
}

// sameOrigin refuses, whatever the method, a request that carries an
// Origin other than this server's own: a web page the user has open would
// otherwise drive the user's sandboxes through the browser (the MCP
// specification has servers validate Origin). Agents send no Origin; the
// go-sdk's handler checks the Host header against DNS rebinding.
func sameOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" {
			if u, err := url.Parse(origin); err != nil || u.Host != r.Host || (u.Scheme != "http" && u.Scheme != "https") {
				http.Error(w, fmt.Sprintf("Forbidden: Origin %q is not this server's (http://%s): the MCP endpoint serves local agents, not web pages", origin, r.Host), http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
