package faults

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
)

// proxied returns a direct connection and one through a new proxy.
func proxied(t *testing.T) (direct, through *pgx.Conn, p *Proxy) {
	t.Helper()
	ctx := context.Background()
	dsn := dbtest.PostgresSchemaURL(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	p, err = NewProxy(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	direct, err = pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.Close(context.WithoutCancel(ctx)) })
	if _, err := direct.Exec(ctx, `CREATE TABLE t (v int)`); err != nil {
		t.Fatal(err)
	}
	u.Host = p.Addr()
	through, err = pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { through.Close(context.WithoutCancel(ctx)) })
	return direct, through, p
}

// A cut after COMMIT: the client loses the answer, the server commits.
func TestCommitCutLosesTheAnswerNotTheCommit(t *testing.T) {
	ctx := context.Background()
	direct, through, p := proxied(t)
	tx, err := through.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO t VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	p.ArmCommitCuts(1)
	err = tx.Commit(ctx)
	if err == nil {
		t.Fatal("commit through an armed proxy succeeded")
	}
	// pgx calls this "conn closed" (pgconn.ErrConnClosed) and SafeToRetry;
	// the outcome is unknown, so it must be a lost connection. The harness
	// found sqlstore.IsConnLost saying false here while the commit had
	// landed; this keeps it fixed.
	if !sqlstore.IsConnLost(sqlstore.WithClass(err, pgxv5.Classify(err))) {
		t.Errorf("IsConnLost(%v) = false for a COMMIT whose answer was lost", err)
	}
	if got := p.Stats().CommitCuts; got != 1 {
		t.Fatalf("commit cuts = %d", got)
	}
	if n := countAfter(t, direct); n != 1 {
		t.Fatalf("rows = %d, want the commit to have landed", n)
	}
}

// countAfter counts t's rows once every transaction writing t has ended:
// LOCK TABLE waits for the cut transaction's lock, whatever became of it.
func countAfter(t *testing.T, direct *pgx.Conn) int {
	t.Helper()
	ctx := context.Background()
	tx, err := direct.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `LOCK TABLE t IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// CutAll closes live connections; new ones go through.
func TestCutAll(t *testing.T) {
	ctx := context.Background()
	_, through, p := proxied(t)
	if n := p.CutAll(); n != 1 {
		t.Fatalf("cut %d connections, want 1", n)
	}
	if err := through.Ping(ctx); err == nil || !sqlstore.IsConnLost(sqlstore.WithClass(err, pgxv5.Classify(err))) {
		t.Fatalf("ping after the cut: %v, want a lost connection", err)
	}
	again, err := pgx.Connect(ctx, "postgres://postgres@"+p.Addr()+"/"+through.Config().Database+"?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close(ctx)
	if err := again.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

// A delay holds each statement before the server sees it: the server's
// clock at the statement is at least the delay after the client sent it,
// and once the delay is over statements go straight through.
func TestDelayHoldsStatementsBeforeTheServer(t *testing.T) {
	ctx := context.Background()
	_, through, p := proxied(t)
	var serverAt time.Time
	p.DelayFor(300*time.Millisecond, time.Hour)
	sent := time.Now()
	if err := through.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&serverAt); err != nil {
		t.Fatal(err)
	}
	if late := serverAt.Sub(sent); late < 300*time.Millisecond {
		t.Fatalf("the server read the statement %v after it was sent, want at least the 300ms delay", late)
	}
	p.DelayFor(time.Hour, 0) // over at once
	sent = time.Now()
	if err := through.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&serverAt); err != nil {
		t.Fatal(err)
	}
	if late := serverAt.Sub(sent); late >= time.Hour {
		t.Fatalf("an ended delay still held the statement %v", late)
	}
	if s := p.Stats(); s.Delays != 2 {
		t.Fatalf("Stats().Delays = %d, want 2", s.Delays)
	}
}
