package httplog

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
)

// A plain HTTP request to a TLS server makes net/http log a handshake
// error: it reaches the logger, named, as one message.
func TestErrorLogSendsServerErrorsToTheLogger(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	l := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, prefix+" "+args)
	}, funcr.Options{}).WithName("metrics")
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Config.ErrorLog = ErrorLog(l)
	srv.StartTLS()
	resp, err := http.Get("http://" + srv.Listener.Addr().String())
	if err == nil {
		resp.Body.Close()
	}
	srv.Close() // waits for the connection's goroutine, which logs
	mu.Lock()
	defer mu.Unlock()
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "metrics ") || !strings.Contains(lines[0], `"msg"="http: TLS handshake error from 127.0.0.1:`) {
		t.Errorf("logged %q, want one message from metrics naming the TLS handshake error", lines)
	}
}
