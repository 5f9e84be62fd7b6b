//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// TestExecInteractiveTerminal runs `exec -it` on a pseudo-terminal, as a
// developer at a shell would: the remote command sees the local terminal's
// size, reads what is typed, and sees the size change when the local
// terminal is resized.
func TestExecInteractiveTerminal(t *testing.T) {
	devs, tpl, _ := setup(t, "alice")
	alice := devs[0]
	res := cli(t, alice, "", "claim", "--template", tpl.Name, "--wait", "-o", "json")
	var sbx v1.Sandbox
	if err := json.Unmarshal([]byte(res.stdout), &sbx); err != nil {
		t.Fatalf("claim: %+v", res)
	}
	t.Cleanup(func() { cli(t, alice, "", "delete", sbx.Name) })

	cmd := command(t, alice, "exec", "-it", sbx.Name, "--", "sh", "-c", resizeScript)
	master, screen := onTerminal(t, cmd, 30, 100)
	screen.wait(t, "30 100")
	setSize(t, master, 40, 120) // the binary hears SIGWINCH and sends the size
	if _, err := master.WriteString("hello\r"); err != nil {
		t.Fatal(err)
	}
	screen.wait(t, "typed hello")
	screen.wait(t, "40 120")
	if err := cmd.Wait(); err != nil {
		t.Errorf("exec -it: %v; screen %q", err, screen.String())
	}
}

// resizeScript prints the terminal's size once it is known, echoes a
// typed line, and prints the size again once it changed from 30x100.
// Sizes reach the remote terminal concurrently with the command (and late
// on a busy machine): it waits up to 10s for each change. It lingers a
// second at the end: kwok closes the terminal as soon as the command exits,
// dropping output it has not copied yet.
const resizeScript = `wait_size() { i=0; while [ "$(stty size)" = "$1" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; stty size; }
wait_size "0 0"; read line; echo "typed $line"; wait_size "30 100"; sleep 1`

// onTerminal starts cmd on a new pseudo-terminal of rows x cols, as its
// controlling terminal, and returns the terminal's master side, which the
// test types into and resizes, and what the terminal shows.
func onTerminal(t *testing.T, cmd *exec.Cmd, rows, cols uint16) (*os.File, *screen) {
	t.Helper()
	master, tty := openPTY(t)
	setSize(t, master, rows, cols)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = tty.Close()
	screen := &screen{}
	go screen.copyFrom(master)
	return master, screen
}

// openPTY opens a pseudo-terminal pair: the master the test types into
// and reads from, and the terminal the binary runs on.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = master.Close() })
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return master, tty
}

func setSize(t *testing.T, master *os.File, rows, cols uint16) {
	t.Helper()
	if err := unix.IoctlSetWinsize(int(master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols}); err != nil {
		t.Fatal(err)
	}
}

// screen collects what the terminal shows.
type screen struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (s *screen) copyFrom(f *os.File) {
	b := make([]byte, 4096)
	for {
		n, err := f.Read(b)
		s.mu.Lock()
		s.buf.Write(b[:n])
		s.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func (s *screen) wait(t *testing.T, text string) {
	t.Helper()
	testcluster.Eventually(t, fmt.Sprintf("%q on the terminal", text), func() (bool, string) {
		return strings.Contains(s.String(), text), s.String()
	})
}
