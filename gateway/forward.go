package gateway

import (
	"context"
	"net"
	"net/http"
)

// serveForward forwards a plain HTTP proxy request (GET http://host/path)
// for the client. The checks are the forwarder's dial's, so the address
// they approve is the one connected to; a long response is checked again
// as a tunnel is (guarded).
func (g *Gateway) serveForward(w http.ResponseWriter, r *http.Request, rec *record) {
	if r.URL.Scheme != "http" {
		g.refuse(w, r, rec, refusef(http.StatusBadRequest, reasonBadTarget,
			"the gateway forwards http:// requests; %s:// ones go through a CONNECT tunnel (HTTPS_PROXY)", r.URL.Scheme))
		return
	}
	port := r.URL.Port()
	if port == "" {
		port = "80"
	}
	host, p, f := splitHostPort(net.JoinHostPort(r.URL.Hostname(), port))
	if f != nil {
		g.refuse(w, r, rec, f)
		return
	}
	rec.host, rec.port = host, p
	r = r.WithContext(context.WithValue(r.Context(), recordKey{}, rec))
	still := func() *refusal {
		if addr := rec.connected.Load(); addr != nil {
			return g.stillPermitted(rec, *addr)
		}
		return nil // not connected yet: the dial checks
	}
	g.guarded(r, rec, still, func(r *http.Request) {
		g.forwarder.ServeHTTP(countingWriter{w, &rec.down}, withCountedBody(r, rec))
	})
}

// forwardError answers a forwarded request that could not be carried: a
// refusal from the dial as it is, anything else as the upstream's failure.
func (g *Gateway) forwardError(w http.ResponseWriter, r *http.Request, err error) {
	rec := r.Context().Value(recordKey{}).(*record)
	f := refusalOf(r, err)
	if f == nil {
		f = refusef(http.StatusBadGateway, reasonUpstreamFailed, "the request to %s failed: %v", hostPort(rec.host, rec.port), err)
	}
	g.refuse(w, r, rec, f)
}
