// Command fgworker is one worker process of the reliability harness
// (package integration): it runs a workload.Config's agents against a
// database and appends everything they observe to a history file. The
// harness starts several, kills them with SIGKILL, starts them again, and
// checks the histories afterwards.
//
//	fgworker -config worker.json
//
// With -migrate it instead runs the library's migrations on the database
// named by $FGWORKER_DSN (not an argument: it may hold a password) and
// exits: a mutant's worker is built with its mutated migrations embedded,
// and only its own build can install them.
//
//	FGWORKER_DSN=... fgworker -migrate
//
// With -advance N it runs the runbook's fence advance with margin N there
// (workload.AdvanceFences) and prints the lowest fence the next grant can
// carry: a mutant of lease.Coordinator.AdvanceFences is built into it.
//
//	FGWORKER_DSN=... fgworker -advance 1000
//
// With -guard TABLE it guards TABLE there by its resource column (package
// guard) and exits: a mutant of the guard's trigger is built into it.
//
//	FGWORKER_DSN=... fgworker -guard fg_events
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/fencegate/fencegate/guard"
	"github.com/fencegate/fencegate/integration/internal/workload"
	"github.com/fencegate/fencegate/sqlstore/sqlopen"
)

func main() {
	path := flag.String("config", "", "workload.Config as JSON")
	migrate := flag.Bool("migrate", false, "run the migrations on $FGWORKER_DSN and exit")
	advance := flag.Int64("advance", -1, "advance the fences on $FGWORKER_DSN by this margin, print the next fence, and exit")
	guardTable := flag.String("guard", "", "guard this table on $FGWORKER_DSN by its resource column and exit")
	flag.Parse()
	if *guardTable != "" {
		if err := installGuard(context.Background(), os.Getenv("FGWORKER_DSN"), *guardTable); err != nil {
			fail(err)
		}
		return
	}
	if *advance >= 0 {
		next, err := workload.AdvanceFences(context.Background(), os.Getenv("FGWORKER_DSN"), *advance)
		if err != nil {
			fail(err)
		}
		fmt.Println(next)
		return
	}
	if *migrate {
		if err := runMigrations(context.Background(), os.Getenv("FGWORKER_DSN")); err != nil {
			fail(err)
		}
		return
	}
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

// runMigrations migrates the database at dsn with the migrations this
// binary embeds.
func runMigrations(ctx context.Context, dsn string) error {
	if dsn == "" {
		return fmt.Errorf("-migrate: $FGWORKER_DSN is empty")
	}
	d, err := sqlopen.Open(ctx, dsn)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Migrate(ctx)
}

// installGuard guards table at dsn by its resource column with the guard
// this binary was built with.
func installGuard(ctx context.Context, dsn, table string) error {
	if dsn == "" {
		return fmt.Errorf("-guard: $FGWORKER_DSN is empty")
	}
	d, err := sqlopen.Open(ctx, dsn)
	if err != nil {
		return err
	}
	defer d.Close()
	admin, err := guard.New(d.DB(), d.Dialect())
	if err != nil {
		return err
	}
	_, err = admin.Install(ctx, guard.Spec{Table: table, ResourceExpr: "resource"})
	return err
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "fgworker:", err)
	os.Exit(1)
}
