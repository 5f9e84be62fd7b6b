package gateway

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
)

// redactor masks every occurrence of a secret in a stream as it passes.
// It holds back only a tail that could be the start of the secret (fewer
// bytes than the secret, and usually none), so a streamed response, such
// as server-sent events, still reaches the sandbox as it is written.
type redactor struct {
	src    io.ReadCloser
	secret []byte // never empty
	mask   byte
	// buf[off:ready] is checked and masked, waiting to be returned;
	// buf[ready:] might begin the secret and waits for more bytes.
	buf        []byte
	off, ready int
	err        error // src's, returned once buf is drained
	// atEOF runs when src ends, before the last bytes are returned:
	// trailers are read by then.
	atEOF func()
}

func (r *redactor) Read(p []byte) (int, error) {
	for r.off == r.ready && r.err == nil {
		r.fill()
	}
	if r.off == r.ready {
		return 0, r.err
	}
	n := copy(p, r.buf[r.off:r.ready])
	r.off += n
	return n, nil
}

// fill reads once from src and masks what can now be decided.
func (r *redactor) fill() {
	kept := copy(r.buf, r.buf[r.off:]) // the held-back tail, if any
	r.buf, r.off, r.ready = slices.Grow(r.buf[:kept], 32<<10), 0, 0
	n, err := r.src.Read(r.buf[kept:cap(r.buf)])
	r.buf = r.buf[:kept+n]
	pos := 0
	for {
		i := bytes.Index(r.buf[pos:], r.secret)
		if i < 0 {
			break
		}
		start := pos + i
		pos = start + len(r.secret)
		for j := start; j < pos; j++ {
			r.buf[j] = r.mask
		}
	}
	if err != nil {
		if errors.Is(err, io.EOF) && r.atEOF != nil {
			r.atEOF()
		}
		r.err, r.ready = err, len(r.buf)
		return
	}
	r.ready = len(r.buf) - secretPrefixAtEnd(r.buf[pos:], r.secret)
}

func (r *redactor) Close() error { return r.src.Close() }

// secretPrefixAtEnd is the length of the longest end of b that is a
// proper beginning of secret: the bytes that must wait for more.
func secretPrefixAtEnd(b, secret []byte) int {
	for k := min(len(secret)-1, len(b)); k > 0; k-- {
		if bytes.Equal(b[len(b)-k:], secret[:k]) {
			return k
		}
	}
	return 0
}

// maskByte picks a byte the secret does not contain, so no mask can join
// with the bytes around it into the secret again. The mask keeps the
// secret's length, so a Content-Length stays true.
func maskByte(secret []byte) byte {
	for c := byte('*'); c <= '~'; c++ {
		if bytes.IndexByte(secret, c) < 0 {
			return c
		}
	}
	return '*'
}

// redactHeader masks the secret in every value of h, in place.
func redactHeader(h http.Header, secret, masked string) {
	for _, values := range h {
		for i, v := range values {
			values[i] = strings.ReplaceAll(v, secret, masked)
		}
	}
}
