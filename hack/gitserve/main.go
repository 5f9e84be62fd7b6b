// Command gitserve serves the bare Git repositories under a directory over
// smart HTTP on a loopback address, for clones and fetches, not pushes: the
// Git server `make demo` points its GitSync at.
//
//	go run ./hack/gitserve -root DIR -addr 127.0.0.1:18082
package main

import (
	"flag"
	"log"
	"net"
	"net/http"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/gitserve"
)

func main() {
	root := flag.String("root", "", "directory holding the bare repositories (served at /<name>.git)")
	addr := flag.String("addr", "127.0.0.1:18082", "loopback address to listen on")
	flag.Parse()
	if *root == "" {
		log.Fatal("-root is required")
	}
	// Unauthenticated: only this machine may reach it.
	if host, _, err := net.SplitHostPort(*addr); err != nil || !net.ParseIP(host).IsLoopback() {
		log.Fatalf("-addr %s: not a loopback address", *addr)
	}
	backend, err := gitserve.Backend(*root)
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.ListenAndServe(*addr, backend))
}
