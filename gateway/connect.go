package gateway

import (
	"bufio"
	"io"
	"net"
	"net/http"
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
	upstream, f := g.connectChecked(r.Context(), rec.client, host, port)
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
	rec.refusal = tunnel(conn, buffered.Reader, upstream, normalizeName(host), rec)
}

// tunnel carries bytes both ways between the sandbox and the upstream
// until both directions have ended, counting them into rec. It returns the
// refusal that cut it short: a ClientHello for another host than the
// CONNECT named.
func tunnel(client net.Conn, fromClient *bufio.Reader, upstream net.Conn, host string, rec *record) *refusal {
	downDone := make(chan struct{})
	go func() {
		defer close(downDone)
		// Under way before the sandbox's first bytes are read, for
		// protocols where the server speaks first.
		n, err := io.Copy(client, upstream)
		rec.down.Add(n)
		endDirection(client, upstream, err)
	}()
	f := copyUp(client, fromClient, upstream, host, rec)
	if f != nil {
		_ = client.Close()
		_ = upstream.Close()
	}
	<-downDone
	return f
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
