package mcpserver

import (
	"context"
	"database/sql"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore/pgsql"
)

// A file write whose fence is superseded while it waits for the floor row
// never writes the file. On Postgres, a rival transaction holds the floor
// row; the successor's grant queues on it, then A's write queues behind the
// grant. When the rival lets go, the grant raises the floor and commits, and
// A's write finds the higher floor: refused, nothing written. Each step
// waits for the one before by watching pg_stat_activity, not the clock.
func TestMCPWriteSupersededWhileWaiting(t *testing.T) {
	t.Parallel()
	schemaURL := dbtest.PostgresSchemaURL(t)
	appA, appB := "fgtest_a_"+randomName(), "fgtest_b_"+randomName()
	root := t.TempDir()
	a := newMCP(t, withParam(t, schemaURL, "application_name", appA), Config{Holder: "agent-a", Root: root})
	ta := callOK[claimOutput](t, a.ClientSession, "claim", args{"paths": []string{"f"}})
	// A's lease ends (here by release, as it would by expiry), but its
	// token is still the floor: its write would be admitted if it got
	// there first.
	callOK[releaseOutput](t, a.ClientSession, "release", args{"token": ta.Token})

	db := openSQL(t, withParam(t, schemaURL, "application_name", appB))
	watch := openSQL(t, schemaURL)
	rival, err := openSQL(t, schemaURL).BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rival.Rollback()
	if _, err := rival.ExecContext(t.Context(), `SELECT floor FROM fencegate_floor WHERE resource = $1 FOR UPDATE`, "path:f"); err != nil {
		t.Fatal(err)
	}

	// B's grant, queued on the floor row.
	coord := lease.NewCoordinator(pgsql.New(db), &lease.CoordinatorOptions{LockTimeout: time.Minute})
	client, err := lease.NewClient(&lease.ClientOptions{Holder: "agent-b"})
	if err != nil {
		t.Fatal(err)
	}
	req, err := client.BeginAcquire("path:f")
	if err != nil {
		t.Fatal(err)
	}
	granted := make(chan lease.AcquireOutcome, 1)
	go func() {
		out, err := coord.Acquire(context.WithoutCancel(t.Context()), req)
		if err != nil {
			t.Error(err)
		}
		granted <- out
	}()
	waitForLockWait(t, watch, appB)

	// A's write, queued behind the grant.
	wrote := make(chan writeOutput, 1)
	go func() {
		res, err := a.CallTool(context.WithoutCancel(t.Context()), callParams("write", args{"token": ta.Token, "path": "f", "content": "late A"}))
		if err != nil {
			t.Error(err)
			wrote <- writeOutput{}
			return
		}
		out, err := decodeAny[writeOutput](res)
		if err != nil {
			t.Error(err)
		}
		out.Message = text(res)
		if !res.IsError {
			out.Message = "not a tool error: " + out.Message
		}
		wrote <- out
	}()
	waitForLockWait(t, watch, appA)

	if err := rival.Rollback(); err != nil {
		t.Fatal(err)
	}
	g := <-granted
	if !g.OK || g.Grant.Fence <= ta.Fence {
		t.Fatalf("B's grant: %+v", g)
	}
	out := <-wrote
	if out.Written || out.Refusal == nil || out.Refusal.Floor != g.Grant.Fence || out.Refusal.FloorHolder != "agent-b" {
		t.Fatalf("A's write: %+v", out)
	}
	if _, err := os.Stat(filepath.Join(root, "f")); !os.IsNotExist(err) {
		t.Fatalf("A's refused write left a file: %v", err)
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Fatalf("root holds %v", ents)
	}
}

// waitForLockWait waits until a backend of application app waits for a
// lock.
func waitForLockWait(t *testing.T, db *sql.DB, app string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		err := db.QueryRowContext(t.Context(),
			`SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no backend of %s came to wait for a lock", app)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func withParam(t *testing.T, rawURL, key, value string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

func openSQL(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// While a file write is in flight, its transaction holds the floor row, so
// no higher fence can be granted: a claim of the released lock is busy
// until the write commits, and only then granted.
func TestMCPWriteHoldsTheFloorRow(t *testing.T) {
	t.Parallel()
	dsn := dbtest.PostgresSchemaURL(t)
	root := t.TempDir()
	reached, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	a := newMCP(t, dsn, Config{Holder: "agent-a", Root: root, beforeRename: func(context.Context) {
		once.Do(func() {
			close(reached)
			<-proceed
		})
	}})
	var release sync.Once
	letGo := func() { release.Do(func() { close(proceed) }) }
	t.Cleanup(letGo) // before a's cleanup, which waits for the write
	b := newMCP(t, dsn, Config{Holder: "agent-b", Root: root})
	ta := callOK[claimOutput](t, a.ClientSession, "claim", args{"paths": []string{"f"}})

	wrote := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := a.CallTool(context.WithoutCancel(t.Context()), callParams("write", args{"token": ta.Token, "path": "f", "content": "A"}))
		if err != nil {
			t.Error(err)
		}
		wrote <- res
	}()
	<-reached
	// A's lease ends while its write is in flight; B cannot be granted the
	// lock before the write is done.
	callOK[releaseOutput](t, a.ClientSession, "release", args{"token": ta.Token})
	callErr(t, b.ClientSession, "claim", args{"paths": []string{"f"}}, "busy", "nothing changed")
	letGo()
	if res := <-wrote; res == nil || res.IsError {
		t.Fatalf("A's write: %v", res)
	}
	wantFile(t, filepath.Join(root, "f"), "A")
	cb := callOK[claimOutput](t, b.ClientSession, "claim", args{"paths": []string{"f"}})
	if !cb.Claimed || cb.Fence <= ta.Fence {
		t.Fatalf("B's claim after the write: %+v", cb)
	}
}
