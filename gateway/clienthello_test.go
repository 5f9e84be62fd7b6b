package gateway

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"net"
	"strings"
	"testing"

	"golang.org/x/crypto/cryptobyte"
)

// captureClientHello returns the records of the ClientHello crypto/tls
// sends with cfg.
func captureClientHello(t *testing.T, cfg *tls.Config) []byte {
	t.Helper()
	client, server := net.Pipe()
	defer server.Close()
	go func() { _ = tls.Client(client, cfg).Handshake() }()
	defer client.Close()
	raw, _, err := readClientHello(server)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// rerecord splits the handshake message of single-record raw into records
// of at most size bytes.
func rerecord(raw []byte, size int) []byte {
	msg := raw[5:]
	var out []byte
	for len(msg) > 0 {
		n := min(size, len(msg))
		out = append(out, recordTypeHandshake, 3, 1, 0, 0)
		binary.BigEndian.PutUint16(out[len(out)-2:], uint16(n))
		out = append(out, msg[:n]...)
		msg = msg[n:]
	}
	return out
}

func TestReadClientHello(t *testing.T) {
	named := captureClientHello(t, &tls.Config{ServerName: "api.example.test"})
	unnamed := captureClientHello(t, &tls.Config{InsecureSkipVerify: true})
	for _, c := range []struct {
		what string
		in   []byte
		want string
	}{
		{"one record", named, "api.example.test"},
		{"no server name", unnamed, ""},
		{"split across records", rerecord(named, 100), "api.example.test"},
		{"header split", rerecord(named, 2), "api.example.test"},
	} {
		// Bytes after the hello stay unread for the tunnel to forward.
		r := bytes.NewReader(append(bytes.Clone(c.in), "after"...))
		raw, name, err := readClientHello(r)
		if err != nil || name != c.want || !bytes.Equal(raw, c.in) || r.Len() != len("after") {
			t.Errorf("%s: %q, %v, raw equal %v, %d left", c.what, name, err, bytes.Equal(raw, c.in), r.Len())
		}
	}
}

func TestReadClientHelloRefusesMalformed(t *testing.T) {
	named := captureClientHello(t, &tls.Config{ServerName: "api.example.test"})
	appData := bytes.Clone(named)
	appData[0] = 23
	serverHello := bytes.Clone(named)
	serverHello[5] = 2
	for what, in := range map[string][]byte{
		"truncated":                  named[:len(named)-10],
		"not a handshake record":     appData,
		"not a ClientHello":          serverHello,
		"two server_name extensions": helloWithExtensions(sni("a.test"), sni("b.test")),
		"two host names":             helloWithExtensions(sni("a.test", "b.test")),
		"empty host name":            helloWithExtensions(sni("")),
	} {
		if _, name, err := readClientHello(bytes.NewReader(in)); err == nil {
			t.Errorf("%s: read as %q", what, name)
		}
	}
	if _, name, err := readClientHello(bytes.NewReader(helloWithExtensions(sni("ok.test")))); err != nil || name != "ok.test" {
		t.Errorf("the hand-built hello itself: %q, %v", name, err)
	}
}

// sni is a server_name extension naming hosts.
func sni(hosts ...string) []byte {
	var b cryptobyte.Builder
	b.AddUint16(extensionServerName)
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
			for _, h := range hosts {
				b.AddUint8(serverNameTypeHostName)
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(h)) })
			}
		})
	})
	return b.BytesOrPanic()
}

// helloWithExtensions is a minimal ClientHello record with extensions.
func helloWithExtensions(extensions ...[]byte) []byte {
	var body cryptobyte.Builder
	body.AddUint16(tls.VersionTLS12)
	body.AddBytes(make([]byte, 32))
	body.AddUint8LengthPrefixed(func(*cryptobyte.Builder) {})
	body.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddUint16(tls.TLS_AES_128_GCM_SHA256) })
	body.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddUint8(0) })
	body.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(bytes.Join(extensions, nil)) })
	var msg cryptobyte.Builder
	msg.AddUint8(handshakeTypeClientHello)
	msg.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(body.BytesOrPanic()) })
	var rec cryptobyte.Builder
	rec.AddUint8(recordTypeHandshake)
	rec.AddUint16(tls.VersionTLS10)
	rec.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(msg.BytesOrPanic()) })
	return rec.BytesOrPanic()
}

func TestReadClientHelloErrorsSayWhat(t *testing.T) {
	_, _, err := readClientHello(bytes.NewReader([]byte{recordTypeHandshake, 3, 1, 0xff, 0xff}))
	if err == nil || !strings.Contains(err.Error(), "handshake record of 65535 bytes") {
		t.Errorf("oversized record: %v", err)
	}
}
