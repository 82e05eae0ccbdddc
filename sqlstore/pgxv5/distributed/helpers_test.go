package distributed_test

import (
	"context"
	"errors"
	"regexp"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore/pgxv5/distributed"
)

// recorder is a pgx tracer that keeps the text of every statement sent.
type recorder struct {
	mu        sync.Mutex
	sent      []string
	conflicts int // statements (COMMIT included) that failed with 40001
}

func (r *recorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.mu.Lock()
	r.sent = append(r.sent, d.SQL)
	r.mu.Unlock()
	return ctx
}

func (r *recorder) TraceQueryEnd(_ context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	if pgErr, ok := errors.AsType[*pgconn.PgError](d.Err); ok && pgErr.Code == "40001" {
		r.mu.Lock()
		r.conflicts++
		r.mu.Unlock()
	}
}

func (r *recorder) serializationFailures() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.conflicts
}

func (r *recorder) statements() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.sent...)
}

// openPool opens a pool on url, closed when t ends, tracing into rec when
// it is not nil.
func openPool(t testing.TB, url string, rec *recorder) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	if rec != nil {
		cfg.ConnConfig.Tracer = rec
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// open returns a migrated profile driver on url (a fresh schema when url
// is ""), with opts.
func open(t testing.TB, url string, opts *distributed.Options, rec *recorder) *distributed.Driver {
	t.Helper()
	if url == "" {
		url = dbtest.PostgresSchemaURL(t)
	}
	d, err := distributed.New(openPool(t, url, rec), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Migrate(context.Background()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return d
}

// banned matches what the profile must never send: sequence functions,
// LISTEN/NOTIFY, advisory locks, fencegate's functions of the default
// Postgres migrations, and DDL that makes functions, triggers, sequences
// or identity columns.
var banned = regexp.MustCompile(`(?i)` +
	`\b(nextval|setval|currval|lastval|pg_notify|pg_advisory\w*)\s*\(` + // sequences, NOTIFY, advisory locks
	`|^\s*(listen|unlisten|notify)\b` +
	`|\b(from|select|call|perform)\s+(\*\s+from\s+)?fencegate_\w+\s*\(` + // a call of a fencegate function
	`|\bcreate\s+(or\s+replace\s+)?(function|procedure|trigger|constraint\s+trigger|sequence)\b` +
	`|\b(serial|bigserial|identity)\b|\bdo\s+\$`)
