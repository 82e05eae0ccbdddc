package main

import (
	"context"
	"os"

	"github.com/fencegate/fencegate/cmd/fencegate/fencegatecli"
)

func main() {
	os.Exit(fencegatecli.Run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}
