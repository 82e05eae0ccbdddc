package pgxv5_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
)

// A COMMIT through pgx on a connection the server terminated, or under a
// cancelled context, has an unknown outcome; a refusal has a known one.
func TestCommitOutcomeUnknown(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbtest.PostgresSchemaURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	d := pgxv5.New(pool)

	tx, err := d.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	if err := d.Commit(ctx, tx); err == nil || !sqlstore.IsOutcomeUnknown(err) {
		t.Fatalf("COMMIT on a terminated backend = %v: want an unknown outcome", err)
	}

	cctx, cancel := context.WithCancel(ctx)
	tx, err = d.Begin(cctx)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := d.Commit(cctx, tx); err == nil || !sqlstore.IsOutcomeUnknown(err) {
		t.Fatalf("cancelled COMMIT = %v: want an unknown outcome", err)
	}

	tx, err = d.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tx.Exec(ctx, `SELECT 1/0`)
	_ = d.Rollback(ctx, tx)
	if err = d.ClassifyError(err); err == nil || sqlstore.IsOutcomeUnknown(err) {
		t.Fatalf("division by zero = %v: want a known failure", err)
	}
}

// The pgx driver reports synchronous_commit off like the database/sql one.
func TestDurabilityWarnings(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbtest.PostgresSchemaURL(t)+"&synchronous_commit=off")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	warnings, err := pgxv5.New(pool).DurabilityWarnings(ctx)
	if err != nil || len(warnings) == 0 || !strings.Contains(warnings[0], "synchronous_commit is off") {
		t.Fatalf("warnings %q, %v: want synchronous_commit off reported", warnings, err)
	}
}
