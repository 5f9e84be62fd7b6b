package realnode_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/agentsandbox/terraform-provider-agentsandbox/realnode"
	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

// fillProgram writes MiB after MiB to a file in the workspace, syncing
// each, until the file system refuses, and prints how much it wrote and the
// refusal's errno; the file is removed after.
const fillProgram = `
import errno, json, os
path, chunk, written, refused = "/workspace/fill", b"x" * (1 << 20), 0, ""
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
try:
    while written < (1 << 30):
        n = os.write(fd, chunk)
        os.fsync(fd)
        written += n
except OSError as e:
    refused = errno.errorcode.get(e.errno, str(e.errno))
finally:
    os.close(fd)
    os.remove(path)
print(json.dumps({"written": written, "refused": refused}))
`

// checkWorkspaceFull: a workspace declared SmallVolume is full at that
// size (ENOSPC), not at the node's disk.
func (e env) checkWorkspaceFull(t *testing.T, sbx started) {
	var got struct {
		Written int64  `json:"written"`
		Refused string `json:"refused"`
	}
	e.pythonJSON(t, sbx.Name, fillProgram, &got)
	size := resource.MustParse(realnode.SmallVolume)
	t.Logf("wrote %d MiB into a %s workspace before %s", got.Written>>20, realnode.SmallVolume, got.Refused)
	if got.Refused != "ENOSPC" || got.Written > size.Value() || got.Written < size.Value()/2 {
		t.Errorf("wrote %d MiB into a workspace of %s (refused: %q); want ENOSPC after at least half of it and at most all", got.Written>>20, realnode.SmallVolume, got.Refused)
	}
}

// ipv6Program lists the sandbox's IPv6 addresses and tries to send an
// IPv6 packet to every host on its link (what finds other sandboxes and
// the node by their link-local addresses), and prints both.
const ipv6Program = `
import json, socket
out = {"addresses": [], "send": ""}
try:
    with open("/proc/net/if_inet6") as f:
        out["addresses"] = [l.split()[0] + "%" + l.split()[-1] for l in f if l.strip()]
except OSError as e:
    out["addresses"] = ["unreadable: " + type(e).__name__]
try:
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.sendto(b"probe", ("ff02::1", 9, 0, socket.if_nametoindex("eth0")))
    out["send"] = "sent"
except OSError as e:
    out["send"] = "refused: " + (e.strerror or type(e).__name__)
print(json.dumps(out))
`

// checkNoIPv6: a sandbox has no IPv6 address and cannot send over IPv6,
// so nothing reaches another sandbox or the node by a link-local address,
// which no NetworkPolicy here filters.
func (e env) checkNoIPv6(t *testing.T, sbx started) {
	var got struct {
		Addresses []string `json:"addresses"`
		Send      string   `json:"send"`
	}
	e.pythonJSON(t, sbx.Name, ipv6Program, &got)
	t.Logf("IPv6 addresses %v; a packet to ff02::1: %s", got.Addresses, got.Send)
	if len(got.Addresses) > 0 || got.Send == "sent" {
		t.Errorf("the sandbox has IPv6 addresses %v and a packet to every host on its link was %s; want none and refused", got.Addresses, got.Send)
	}
}

// checkMissingProgram: a program the image does not have exits 127 with a
// shell's words, not an internal error of the runtime.
func (e env) checkMissingProgram(t *testing.T, sbx started) {
	var out, errOut strings.Builder
	code, err := e.sdk.Exec(context.Background(), sbx.Name, sandboxclient.ExecOptions{
		Command: []string{"no-such-program", "--flag"}, Stdout: &out, Stderr: &errOut, Timeout: time.Minute,
	})
	if err != nil || code != 127 || strings.TrimSpace(errOut.String()) != "no-such-program: command not found" {
		t.Errorf("exec of a missing program: exit %d, error %v, stderr %q; want exit 127 and \"no-such-program: command not found\"", code, err, errOut.String())
	}
}
