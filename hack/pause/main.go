// Command pause is the pod sandbox ("infra") container of the real test
// node (hack/node.sh). containerd needs one image to hold each pod's
// namespaces, and the usual registry.k8s.io/pause cannot be pulled here: no
// registry is reachable. It waits for SIGINT or SIGTERM and, being PID 1 of
// pods that share their PID namespace, reaps the children it inherits.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every exited child, so none stays a zombie.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
