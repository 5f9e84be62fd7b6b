// Command agentsandbox-agent is the sandbox agent (package session/agent),
// which every sandbox pod's init container copies into the sandbox:
//
//	agentsandbox-agent connect   relay this exec's stdin and stdout to the
//	                             agent's daemon, starting it if need be
//	agentsandbox-agent serve     the daemon (started by connect)
//	agentsandbox-agent version   the protocol version it speaks
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentsandbox/terraform-provider-agentsandbox/session/agent"
	"github.com/agentsandbox/terraform-provider-agentsandbox/session/wire"
)

func main() {
	if len(os.Args) != 2 {
		usage()
	}
	switch os.Args[1] {
	case "connect":
		self, err := os.Executable()
		if err != nil {
			fail(err)
		}
		if err := agent.Connect(os.Stdin, os.Stdout, self, agent.SocketAddress()); err != nil {
			fail(err)
		}
	case "serve":
		l, err := agent.Listen(agent.SocketAddress())
		if err != nil {
			// Another daemon has the address: it serves.
			os.Exit(0)
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		// Its processes are its children: a hang-up of the exec that
		// started it reaches none of them.
		signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
		if err := agent.New().Serve(ctx, l); err != nil {
			fail(err)
		}
	case "version":
		fmt.Println(wire.Version)
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: agentsandbox-agent connect|serve|version")
	os.Exit(2)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "agentsandbox-agent:", err)
	os.Exit(1)
}
