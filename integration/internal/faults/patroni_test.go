//go:build linux

package faults

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvRequirePatroni makes a Patroni test that cannot run (no patroni,
// patronictl or etcd) fail instead of skipping; .ci/run sets it.
const EnvRequirePatroni = "FENCEGATE_REQUIRE_PATRONI"

// skipWithoutPatroni skips t loudly when StartPatroni cannot run here, or
// fails it under FENCEGATE_REQUIRE_PATRONI=true.
func skipWithoutPatroni(t *testing.T) {
	t.Helper()
	if err := CanPatroni(); err != nil {
		if os.Getenv(EnvRequirePatroni) == "true" {
			t.Fatalf("%v (and %s=true makes that a failure)", err, EnvRequirePatroni)
		}
		t.Skipf("\n*** PATRONI TEST SKIPPED: %v ***\n", err)
	}
}

// TestPatroniSwitchover: the cluster comes up with a leader, a client on
// the multi-host DSN (both forms) reaches the leader and writes, and after
// patronictl switchover the same DSN reaches the new leader, which has the
// row.
func TestPatroniSwitchover(t *testing.T) {
	skipWithoutPatroni(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	p, err := StartPatroni(ctx, PatroniOptions{Synchronous: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	leader := p.Leader(ctx)
	if leader == nil {
		t.Fatal("no leader")
	}
	port := func(dsn string) (int, bool) {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var port int
		var replica bool
		if err := conn.QueryRow(ctx, `SELECT current_setting('port')::int, pg_is_in_recovery()`).Scan(&port, &replica); err != nil {
			t.Fatal(err)
		}
		return port, replica
	}
	for _, dsn := range []string{p.URL("postgres"), p.KeywordDSN("postgres")} {
		if got, replica := port(dsn); got != leader.Port || replica {
			t.Fatalf("%s reached port %d (in recovery: %v), want the leader %s on %d", dsn, got, replica, leader.Name, leader.Port)
		}
	}
	conn, err := pgx.Connect(ctx, p.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE kept (id int); INSERT INTO kept VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	c, err := p.Candidate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	candidate := c.Name
	if err := p.Switchover(ctx, leader.Name, candidate); err != nil {
		t.Fatal(err)
	}
	next := p.Node(candidate)
	if got, _ := port(p.URL("postgres")); got != next.Port {
		t.Fatalf("after the switchover the DSN reached port %d, want %s on %d", got, candidate, next.Port)
	}
	conn, err = pgx.Connect(ctx, p.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM kept`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the row written before the switchover: %d, %v", n, err)
	}
}
