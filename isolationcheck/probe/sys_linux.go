package probe

import (
	"errors"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// syslogReadAll is klogctl's SYSLOG_ACTION_READ_ALL.
const syslogReadAll = 3

// kernelLog returns the first lines of the kernel's log, where the
// process may read it: the host's refuses an unprivileged container;
// gVisor's own kernel answers with its boot messages.
func kernelLog() string {
	buf := make([]byte, 4096)
	n, err := unix.Klogctl(syslogReadAll, buf)
	if err != nil || n <= 0 {
		return ""
	}
	return strings.TrimSpace(string(buf[:n]))
}

func statSpace(dir string) (Space, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return Space{}, &os.PathError{Op: "statfs", Path: dir, Err: err}
	}
	return Space{Total: int64(st.Blocks) * st.Bsize, Free: int64(st.Bavail) * st.Bsize}, nil
}

// allocate reserves size bytes for file; errors.ErrUnsupported where the
// file system cannot.
func allocate(file *os.File, size int64) error {
	err := unix.Fallocate(int(file.Fd()), 0, 0, size)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return errors.ErrUnsupported
	}
	return err
}

// fork makes a child process that sleeps until it is killed, and returns
// its PID. After a fork only the forking thread exists in the child, and
// the Go runtime's state there is not the child's to use: the child runs
// nothing but raw system calls of this function, which may not grow its
// stack (nosplit), as the standard library's fork-and-exec does.
//
//go:nosplit
//go:norace
func fork() (int, error) {
	pid, _, errno := syscall.RawSyscall6(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0, 0, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	if pid == 0 {
		for {
			// No file descriptors, no timeout: sleeps until killed.
			_, _, _ = syscall.RawSyscall6(syscall.SYS_PPOLL, 0, 0, 0, 0, 0, 0)
		}
	}
	return int(pid), nil
}

// errnoName is the errno's name (ENOSPC, EAGAIN), or the error's words.
func errnoName(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if name := unix.ErrnoName(errno); name != "" {
			return name
		}
	}
	return err.Error()
}
