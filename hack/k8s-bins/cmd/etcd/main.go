// Command etcd builds the etcd server from its Go module for envtest and e2e.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
