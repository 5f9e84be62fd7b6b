package gateway

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"time"
)

// clientHelloTimeout bounds how long a client that has begun a TLS
// handshake record may take to send the rest of its ClientHello. The wait
// for the first byte has no bound: a client of a protocol where the server
// speaks first sends nothing until it has heard from the server.
const clientHelloTimeout = 10 * time.Second

// serveConnect opens a tunnel to the CONNECT target when the client's
// rules allow it, and carries it until both sides are done.
func (g *Gateway) serveConnect(w http.ResponseWriter, r *http.Request, rec *record) {
	host, port, f := splitHostPort(r.URL.Host)
	if f != nil {
		g.refuse(w, r, rec, f)
		return
	}
	rec.host, rec.port = host, port
	upstream, addr, f := g.connectChecked(r.Context(), rec.client, host, port)
	if f != nil {
		g.refuse(w, r, rec, f)
		return
	}
	defer upstream.Close()
	conn, buffered, err := http.NewResponseController(w).Hijack()
	if err != nil {
		g.refuse(w, r, rec, refusef(http.StatusHTTPVersionNotSupported, reasonBadTarget,
			"CONNECT is served on HTTP/1.1 connections only: %v", err))
		return
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	g.metrics.openTunnels.Inc()
	defer g.metrics.openTunnels.Dec()
	rec.refusal = g.tunnel(conn, buffered.Reader, upstream, addr, rec)
}

// tunnel carries bytes both ways between the sandbox and addr, the
// upstream, until both directions have ended, counting them into rec. It
// returns the refusal that cut it short: its rules no longer allowing it
// (guard), or a ClientHello for another host than the CONNECT named.
func (g *Gateway) tunnel(client net.Conn, fromClient *bufio.Reader, upstream net.Conn, addr netip.Addr, rec *record) *refusal {
	stop := make(chan struct{})
	revoked := make(chan *refusal, 1)
	go func() {
		revoked <- g.guard(func() *refusal { return g.stillPermitted(rec, addr) }, stop, func(*refusal) {
			_ = client.Close()
			_ = upstream.Close()
		})
	}()
	downDone := make(chan struct{})
	go func() {
		defer close(downDone)
		// Under way before the sandbox's first bytes are read, for
		// protocols where the server speaks first.
		n, err := io.Copy(client, upstream)
		rec.down.Add(n)
		endDirection(client, upstream, err)
	}()
	f := copyUp(client, fromClient, upstream, normalizeName(rec.host), rec)
	if f != nil {
		_ = client.Close()
		_ = upstream.Close()
	}
	<-downDone
	close(stop)
	if cut := <-revoked; cut != nil {
		return cut
	}
	return f
}

// guard checks an open tunnel or request against its sandbox's rules
// (still) every g.recheck, so that a host dropped from a template, or a
// sandbox deleted, ends the tunnels and downloads already under way too,
// not only the next ones: the first time the rules no longer allow it,
// guard cuts it and returns why. It returns nil once stop is closed.
func (g *Gateway) guard(still func() *refusal, stop <-chan struct{}, cut func(*refusal)) *refusal {
	ticker := time.NewTicker(g.recheck)
	defer ticker.Stop()
	for {
		select {
		case <-stop:
			return nil
		case <-ticker.C:
			if f := still(); f != nil {
				cut(f)
				return f
			}
		}
	}
}

// guarded serves r with serve while guard checks it against still: once
// the rules no longer allow it, r's context is cancelled with the refusal
// as its cause, which closes its upstream connection and ends the response
// where it is, and rec records the refusal. A cut before the answer's
// header reaches the error handler, which answers with the refusal
// (refusalOf).
func (g *Gateway) guarded(r *http.Request, rec *record, still func() *refusal, serve func(*http.Request)) {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	stop := make(chan struct{})
	revoked := make(chan *refusal, 1)
	go func() {
		revoked <- g.guard(still, stop, func(f *refusal) { cancel(f) })
	}()
	// Deferred: a response cut after its header panics out of
	// httputil.ReverseProxy (http.ErrAbortHandler).
	defer func() {
		close(stop)
		if f := <-revoked; f != nil {
			rec.refusal = f
		}
	}()
	serve(r.WithContext(ctx))
	// An HTTP/2 upstream's answer can end as if whole when the cut closes
	// its stream; the sandbox must not take what it got for all of it.
	// (A cut before the header was answered with the refusal instead.)
	var cut *refusal
	if rec.refusal == nil && errors.As(context.Cause(ctx), &cut) {
		panic(http.ErrAbortHandler)
	}
}

// refusalOf is the refusal err is, or the one that cut r short (guarded);
// nil if neither.
func refusalOf(r *http.Request, err error) *refusal {
	var f *refusal
	if errors.As(err, &f) || errors.As(context.Cause(r.Context()), &f) {
		return f
	}
	return nil
}

// copyUp carries the sandbox's bytes to the upstream. A TLS ClientHello is
// read whole first and checked: a server name other than the CONNECT
// target would have a server shared by many names (a CDN) serve a host
// the sandbox may not reach. The check sees only what TLS sends in the
// clear; an HTTP Host header inside the encryption is out of its reach.
// Anything that is not TLS (git over SSH, say) passes as it is.
func copyUp(client net.Conn, fromClient *bufio.Reader, upstream net.Conn, host string, rec *record) *refusal {
	if first, err := fromClient.Peek(1); err == nil && first[0] == recordTypeHandshake {
		_ = client.SetReadDeadline(time.Now().Add(clientHelloTimeout))
		hello, serverName, err := readClientHello(fromClient)
		_ = client.SetReadDeadline(time.Time{})
		if err != nil {
			return refusef(http.StatusForbidden, reasonBadClientHello,
				"the TLS ClientHello sent through the tunnel to %s could not be read: %v", host, err)
		}
		if serverName != "" && normalizeName(serverName) != host {
			return refusef(http.StatusForbidden, reasonSNIMismatch,
				"the TLS ClientHello names %s, not %s the tunnel was opened to; open the tunnel to %s itself",
				serverName, host, serverName)
		}
		if !writeUp(upstream, client, hello, rec) {
			return nil
		}
	}
	// What the HTTP server had read ahead goes first; then the raw
	// connections, which io.Copy splices on Linux.
	if n := fromClient.Buffered(); n > 0 {
		ahead, _ := fromClient.Peek(n)
		if !writeUp(upstream, client, ahead, rec) {
			return nil
		}
	}
	n, err := io.Copy(upstream, client)
	rec.up.Add(n)
	endDirection(upstream, client, err)
	return nil
}

// writeUp writes p to the upstream, and ends the tunnel when that fails.
func writeUp(upstream, client net.Conn, p []byte, rec *record) bool {
	n, err := upstream.Write(p)
	rec.up.Add(int64(n))
	if err != nil {
		endDirection(upstream, client, err)
		return false
	}
	return true
}

// endDirection passes on the end of one direction of a tunnel. Its
// sender's EOF becomes a half-close of dst, so the other direction goes on
// until its own sender is done (a request fully sent still has an answer
// to come); an error closes both connections, which ends the other
// direction too.
func endDirection(dst, src net.Conn, err error) {
	if err == nil {
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
			return
		}
	}
	_ = dst.Close()
	_ = src.Close()
}
