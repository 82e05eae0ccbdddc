package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/fencegate/fencegate/integration/internal/check"
	"github.com/fencegate/fencegate/integration/internal/workload"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/mysql"
	"github.com/fencegate/fencegate/sqlstore/pgsql"
	"github.com/fencegate/fencegate/sqlstore/sqlite"
)

// The claims' histories: beside the usual single-resource cycles, agents
// claim two or three plain resources at once, or one or two paths of a
// small tree where a directory (d/) overlaps the files below it (d/a, d/b)
// and siblings do not, and write under them (gate.Commit, gate.CommitFile)
// to fg_file_writes, stalling past their term now and then. The workers are
// killed, stopped and (Postgres, MariaDB) have their connections cut and
// delayed. check.Claims judges per file: no two overlapping claims live at
// once, each file's writes in fence order, no write committed under a fence
// below a claim of its file granted before it, set grants whole.

func TestClaimsSQLite(t *testing.T) {
	t.Parallel()
	runClaims(t, sqlite.Dialect)
}

func TestClaimsPostgres(t *testing.T) {
	t.Parallel()
	runClaims(t, pgsql.Dialect)
}

func TestClaimsMySQL(t *testing.T) {
	t.Parallel()
	runClaims(t, mysql.Dialect)
}

func claimsSpec(dialect sqlstore.Dialect, seed uint64) spec {
	sp := spec{
		Dialect:   dialect,
		Procs:     3,
		Agents:    2,
		Resources: 2,
		Duration:  8 * time.Second,
		TTL:       250 * time.Millisecond,
		Seed:      seed,
		Kills:     2,
		Pauses:    2,
		Claims: workload.Claims{
			SetResources: []string{"set-1", "set-2", "set-3"},
			Paths:        []string{"d/", "d/a", "d/b", "e/x"},
			ClaimProb:    0.6,
		},
	}
	switch dialect {
	case pgsql.Dialect:
		sp.Cuts, sp.CommitCuts, sp.Delays = 1, 1, 1
	case mysql.Dialect:
		sp.Cuts, sp.Delays = 1, 1
	}
	return sp
}

func runClaims(t *testing.T, dialect sqlstore.Dialect) {
	seed := baseSeed(t)
	sp := claimsSpec(dialect, seed)
	o := runHistory(t, sp)
	r, c := o.Report, o.Claims
	t.Log(describe(o))
	t.Logf("claims: %s", c.Summary())
	if r.Failed() {
		t.Errorf("%d violations (replay with %s=%d):\n%s", len(r.Violations), EnvSeed, seed, r.Summary(5))
	}
	for i, v := range c.Violations {
		if i == 10 {
			break
		}
		t.Errorf("claims: %s (replay with %s=%d)", v, EnvSeed, seed)
	}
	// A history that tested nothing fails too.
	if c.Granted < 4 || c.Committed < 4 || c.Targets < 3 {
		t.Errorf("too little happened: %s", fmt.Sprint(c.Summary()))
	}
}

// TestClaimsControl runs the claims with the gate bypassed: only the
// holders' own checks guard the writes, and a holder stalled past its term
// writes over its successor's. check.Claims must say so.
func TestClaimsControl(t *testing.T) {
	t.Parallel()
	seed := baseSeed(t)
	sp := claimsSpec(sqlite.Dialect, seed)
	sp.Bypass, sp.Kills, sp.Pauses = true, 0, 0
	o := runHistory(t, sp)
	c := o.Claims
	t.Logf("claims (control): %s; by check %v", c.Summary(), claimChecks(c))
	if n := claimChecks(c)["stale-file-write"] + claimChecks(c)["file-order"]; n == 0 {
		t.Errorf("the control's stale writes went unseen (replay with %s=%d)", EnvSeed, seed)
	}
}

func claimChecks(c *check.ClaimReport) map[string]int {
	m := map[string]int{}
	for _, v := range c.Violations {
		m[v.Check]++
	}
	return m
}
