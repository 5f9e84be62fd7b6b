package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// TestUICommand starts `agentsandbox ui` as a developer: it says it reads
// the cluster, then where the page is, serves it as the developer, warns
// when told to listen beyond loopback, and stops on SIGINT.
func TestUICommand(t *testing.T) {
	t.Parallel()
	alice := testcluster.Get(t).Developers(t, "alice")[0]
	for _, tc := range []struct{ address, warning string }{
		{"127.0.0.1:0", ""},
		{"0.0.0.0:0", "WARNING: 0.0.0.0:0 is not a loopback address: whoever reaches it acts on the cluster as you"},
	} {
		cmd := command(t, alice, "ui", "--address", tc.address)
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		var said []string
		lines := bufio.NewScanner(stderr)
		url := ""
		for url == "" && lines.Scan() {
			said = append(said, lines.Text())
			if rest, ok := strings.CutPrefix(lines.Text(), "Sandboxes page at "); ok {
				url = strings.Fields(rest)[0]
			}
		}
		go func() { _, _ = io.Copy(io.Discard, stderr) }()
		if url == "" {
			t.Fatalf("ui --address %s said %q and no address", tc.address, said)
		}
		if tc.warning != "" && !strings.Contains(strings.Join(said, "\n"), tc.warning) {
			t.Errorf("ui --address %s said %q, want the warning %q", tc.address, said, tc.warning)
		}
		if tc.warning == "" && (len(said) != 2 || !strings.HasPrefix(said[0], "Reading the cluster at ")) {
			t.Errorf("ui --address %s said %q, want that it reads the cluster, then only where the page is", tc.address, said)
		}
		url = strings.Replace(url, "0.0.0.0", "127.0.0.1", 1)
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `<b id="user">`+alice.Name+`</b>`) {
			t.Errorf("GET %s: %s, want the page signed in as %s:\n%.400s", url, resp.Status, alice.Name, body)
		}
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("ui after SIGINT: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("ui did not stop within 10 s of SIGINT")
		}
	}
}
