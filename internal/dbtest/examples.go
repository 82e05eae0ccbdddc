package dbtest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/internal/leftover"
)

// EnvExampleURL is where PostgresExamples puts the URL the Examples read,
// the variable a program of their kind would read.
const EnvExampleURL = "DATABASE_URL"

// PostgresExamples runs m, the tests and Examples of a package whose
// Examples check their output against Postgres, and returns its exit code,
// for os.Exit. It makes a schema for the Examples on the environment's
// server, runs setup in it (the tables they write to), points DATABASE_URL
// at it and drops it afterwards. An Example cannot skip itself: without a
// server PostgresExamples says so loudly and runs the tests alone (-run
// ^Test, unless -run was given), and under FENCEGATE_REQUIRE_POSTGRES=true,
// as in CI, it fails at once.
func PostgresExamples(m *testing.M, setup string) int {
	flag.Parse()
	base, err := serverURL()
	if err != nil {
		fmt.Fprintf(os.Stderr, "dbtest: starting Postgres: %v\n", err)
		return 1
	}
	if base == "" {
		if os.Getenv(EnvRequirePostgres) == "true" {
			fmt.Fprint(os.Stderr, noPostgres("EXAMPLES")+"    and "+EnvRequirePostgres+"=true makes that a failure\n")
			return 1
		}
		fmt.Fprint(os.Stderr, noPostgres("EXAMPLES"))
		given := false
		flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.run" })
		if !given {
			if err := flag.Set("test.run", "^Test"); err != nil {
				panic(err)
			}
		}
		return m.Run()
	}
	drop, err := exampleSchema(base, setup)
	if err != nil {
		fmt.Fprintf(os.Stderr, "dbtest: the Examples' schema: %v\n", err)
		return 1
	}
	code := m.Run()
	if err := drop(); err != nil {
		fmt.Fprintf(os.Stderr, "dbtest: drop the Examples' schema: %v\n", err)
		code = max(code, 1)
	}
	return code
}

// exampleSchema makes the Examples' schema on the server at base, runs
// setup in it, sets DATABASE_URL to a URL that uses it, and returns a
// function that drops it.
func exampleSchema(base, setup string) (drop func() error, err error) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", base, err)
	}
	defer conn.Close(ctx)
	schema := leftover.Name("fgtest", time.Now())
	u, err := newSchema(ctx, conn, base, schema)
	if err != nil {
		return nil, err
	}
	drop = func() error {
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
		return err
	}
	if _, err := conn.Exec(ctx, "SET search_path TO "+schema+"; "+setup); err != nil {
		return nil, errors.Join(fmt.Errorf("set up: %w", err), drop())
	}
	return drop, os.Setenv(EnvExampleURL, u)
}
