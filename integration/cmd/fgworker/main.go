// Command fgworker is one worker process of the reliability harness
// (package integration): it runs a workload.Config's agents against a
// database and appends everything they observe to a history file. The
// harness starts several, kills them with SIGKILL, starts them again, and
// checks the histories afterwards.
//
//	fgworker -config worker.json
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/fencegate/fencegate/integration/internal/workload"
)

func main() {
	path := flag.String("config", "", "workload.Config as JSON")
	flag.Parse()
	b, err := os.ReadFile(*path)
	if err != nil {
		fail(err)
	}
	var cfg workload.Config
	if err := json.Unmarshal(b, &cfg); err != nil {
		fail(fmt.Errorf("%s: %w", *path, err))
	}
	if err := workload.Run(context.Background(), cfg); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "fgworker:", err)
	os.Exit(1)
}
