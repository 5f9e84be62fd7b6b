// Command etcd is the etcd server built from the go.etcd.io/etcd/server/v3
// module. The upstream main package lives in a module with replace
// directives, which `go install` refuses, so the local test cluster builds the
// server from this two-line wrapper instead.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
