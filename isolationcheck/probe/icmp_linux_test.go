//go:build linux

package probe

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// icmpRangeEnv, set, makes this test binary the ICMP probe's subject: in
// a network namespace of its own, it brings loopback up, sets
// net.ipv4.ping_group_range to the variable's value unless it is empty
// (a new namespace's own is "1 0", no group) and prints the probe's JSON
// for 127.0.0.1 and an address with no route.
const icmpRangeEnv = "AGENTSANDBOX_TEST_PING_GROUP_RANGE"

func TestMain(m *testing.M) {
	if r, ok := os.LookupEnv(icmpRangeEnv); ok {
		if err := loopbackUp(); err != nil {
			panic(err)
		}
		if r != "" {
			if err := os.WriteFile("/proc/sys/net/ipv4/ping_group_range", []byte(r), 0); err != nil {
				panic(err)
			}
		}
		_ = json.NewEncoder(os.Stdout).Encode(ICMP([]string{"127.0.0.1", "192.0.2.1"}, time.Second))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestICMPEchoFollowsPingGroupRange: where the sysctl holds the process's
// group an echo to loopback is answered and one to nowhere is an error;
// where it does not, no ICMP socket opens at all (EACCES), as in a
// sandbox under runc. Each runs in a user and network namespace of its
// own, so the machine's own setting is neither read nor changed.
func TestICMPEchoFollowsPingGroupRange(t *testing.T) {
	allowed := probeInNamespace(t, "0 0")
	if allowed.Socket != "" || len(allowed.Echoes) != 2 || allowed.Echoes[0].Result != Replied || allowed.Echoes[1].Result != Failed {
		t.Errorf("with the group in ping_group_range: %+v, want a socket, 127.0.0.1 replied and 192.0.2.1 an error", allowed)
	}
	refused := probeInNamespace(t, "") // "1 0", which a user namespace may not write
	if refused.Socket != "EACCES" || len(refused.Echoes) != 0 {
		t.Errorf("with ping_group_range 1 0: %+v, want no socket (EACCES)", refused)
	}
}

// probeInNamespace runs the probe in this binary as root of a new user
// namespace (its own user and group mapped to 0) with a network namespace
// of its own, under ping_group_range r ("" for the namespace's default).
func probeInNamespace(t *testing.T, r string) ICMPResult {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), icmpRangeEnv+"="+r)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the probe in a namespace of its own: %v\n%s%s", err, out, stderr.String())
	}
	var r2 ICMPResult
	if err := json.Unmarshal(out, &r2); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return r2
}

// loopbackUp sets lo up, as a new network namespace has it down.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
