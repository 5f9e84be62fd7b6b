//go:build linux

package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testterm"
)

// TestExecInteractiveTerminal runs `exec -it` on a pseudo-terminal, as a
// developer at a shell would: the remote command sees the local terminal's
// size, reads what is typed, and sees the size change when the local
// terminal is resized.
func TestExecInteractiveTerminal(t *testing.T) {
	devs, tpl, _ := setup(t, "alice")
	alice := devs[0]
	sbx := claim(t, alice, tpl.Name)

	cmd := command(t, alice, "exec", "-it", sbx.Name, "--", "sh", "-c", testterm.ResizeScript)
	master, screen := onTerminal(t, cmd, 30, 100)
	screen.Wait(t, "30 100")
	setSize(t, master, 40, 120) // the binary hears SIGWINCH and sends the size
	if _, err := master.WriteString("hello\r"); err != nil {
		t.Fatal(err)
	}
	screen.Wait(t, "typed hello")
	screen.Wait(t, "40 120")
	if err := cmd.Wait(); err != nil {
		t.Errorf("exec -it: %v; screen %q", err, screen.String())
	}
}

// onTerminal starts cmd on a new pseudo-terminal of rows x cols, as its
// controlling terminal, and returns the terminal's master side, which the
// test types into and resizes, and what the terminal shows.
func onTerminal(t *testing.T, cmd *exec.Cmd, rows, cols uint16) (*os.File, *testterm.Screen) {
	t.Helper()
	master, tty := openPTY(t)
	setSize(t, master, rows, cols)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = tty.Close()
	screen := &testterm.Screen{}
	go func() { _, _ = io.Copy(screen, master) }()
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
