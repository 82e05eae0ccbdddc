package pgsql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/pgsql"
)

// Postgres's errors are classified by the driver; the two Postgres drivers
// share the classification (internal/pg).
func TestClassifyError(t *testing.T) {
	d := dbtest.Postgres(t)
	// What pgx returns when the connection dies after COMMIT was sent (the
	// reliability suite saw such commits land).
	if err := d.ClassifyError(fmt.Errorf("commit: %w", pgconn.ErrConnClosed)); !sqlstore.IsConnLost(err) || !sqlstore.IsOutcomeUnknown(err) {
		t.Fatal("pgconn.ErrConnClosed is a lost connection, the COMMIT's outcome unknown")
	}
	// A serialization failure, made for real.
	ctx := context.Background()
	db := d.DB()
	if _, err := db.Exec(`CREATE TABLE c (id int PRIMARY KEY, v int); INSERT INTO c VALUES (1, 0)`); err != nil {
		t.Fatal(err)
	}
	t1, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer t1.Rollback()
	if _, err := t1.Exec(`SELECT v FROM c`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE c SET v = 1`); err != nil {
		t.Fatal(err)
	}
	_, err = t1.Exec(`UPDATE c SET v = 2`)
	if sqlstore.IsRetryable(err) {
		t.Fatal("a native error is classified only through the driver")
	}
	err = d.ClassifyError(err)
	if !sqlstore.IsRetryable(err) || sqlstore.IsConnLost(err) || sqlstore.IsOutcomeUnknown(err) {
		t.Fatalf("serialization failure %v: retryable %v", err, sqlstore.IsRetryable(err))
	}
}

// A COMMIT on a connection the server terminated has an unknown outcome;
// so has one whose context was cancelled.
func TestClassifyOutcomeUnknown(t *testing.T) {
	d := dbtest.Postgres(t)
	ctx := context.Background()
	db := d.DB()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var pid int
	if err := tx.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	err = d.Commit(ctx, tx)
	if err == nil || !sqlstore.IsOutcomeUnknown(err) {
		t.Fatalf("COMMIT on a terminated backend = %v: want an unknown outcome", err)
	}
	if err := d.ClassifyError(&pgconn.PgError{Code: "57P01"}); !sqlstore.IsOutcomeUnknown(err) {
		t.Fatal("admin shutdown (57P01) leaves the outcome unknown")
	}
	if err := d.ClassifyError(&pgconn.PgError{Code: "23505"}); sqlstore.IsOutcomeUnknown(err) {
		t.Fatal("a unique violation is a definite refusal")
	}
	cctx, cancel := context.WithCancel(ctx)
	tx2, err := db.BeginTx(cctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	// database/sql may roll the transaction back itself the moment cctx
	// ends, before Commit gets to it: then the outcome is known (nothing
	// committed) and Commit says the transaction is done.
	if err := d.Commit(cctx, tx2); err == nil || !(sqlstore.IsOutcomeUnknown(err) || errors.Is(err, sql.ErrTxDone)) {
		t.Fatalf("cancelled COMMIT = %v: want an unknown outcome (or database/sql's own rollback)", err)
	}
}

// A session whose synchronous_commit is off is reported; one with the
// default is not.
func TestDurabilityWarnings(t *testing.T) {
	ctx := context.Background()
	url := dbtest.PostgresSchemaURL(t)
	for _, c := range []struct {
		dsn  string
		want bool
	}{
		{url, false},
		{url + "&synchronous_commit=off", true},
	} {
		d, err := pgsql.Open(ctx, c.dsn)
		if err != nil {
			t.Fatal(err)
		}
		warnings, err := d.DurabilityWarnings(ctx)
		d.Close()
		if err != nil {
			t.Fatal(err)
		}
		got := slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, "synchronous_commit is off") })
		if got != c.want {
			t.Errorf("%s: warnings %q, want synchronous_commit warned %v", c.dsn, warnings, c.want)
		}
	}
}

// Close ends the driver's listening sessions instead of waiting for them:
// Open's pool waits for every connection it lent, and a lease.Coordinator
// listens for a while after its last waiter left.
func TestCloseEndsListening(t *testing.T) {
	ctx := context.Background()
	d, err := pgsql.Open(ctx, dbtest.PostgresSchemaURL(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	ready, ended := make(chan struct{}), make(chan error, 1)
	go func() { ended <- d.ListenLeases(ctx, func() { close(ready) }, func(sqlstore.LeaseChange) {}) }()
	select {
	case <-ready:
	case err := <-ended:
		t.Fatalf("ListenLeases: %v", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- d.Close() }()
	for _, ch := range []chan error{closed, ended} {
		select {
		case err := <-ch:
			if ch == closed && err != nil {
				t.Fatalf("Close: %v", err)
			}
		case <-time.After(time.Minute): // a deadline, not a measure: it waited for a listener that listens until ctx ends
			t.Fatal("Close waited for the listening session")
		}
	}
}
