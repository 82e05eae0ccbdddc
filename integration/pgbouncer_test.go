//go:build unix

package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/gate/pgxgate"
	"github.com/fencegate/fencegate/integration/internal/faults"
	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/internal/leftover"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/pgsql"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
)

// EnvRequirePgBouncer makes a missing pgbouncer binary a failure (CI).
const EnvRequirePgBouncer = "FENCEGATE_REQUIRE_PGBOUNCER"

// pgBouncerModes are the pgx exec modes that work behind a transaction
// pooler: none of them keeps a prepared statement on a server connection
// from one transaction to the next. (cache_statement, pgx's default,
// prepares statements per connection and failed on 1,612 of 2,986
// acquisitions through PgBouncer 1.18; describe_exec sporadically bound one
// client's arguments to another's statement.)
var pgBouncerModes = []string{"exec", "simple_protocol", "cache_describe"}

// TestPgBouncerTransactionPooling runs leases and fenced writes through a
// real PgBouncer in transaction pooling mode, many clients on few server
// connections, in every exec mode named safe in docs/POSTGRES.md, through pgx
// and through database/sql (the CLI's path): nothing fails, every write carries
// its lease's fence in commit order, and a stale fence is refused and logged.
func TestPgBouncerTransactionPooling(t *testing.T) {
	if _, err := faults.FindPgBouncer(); err != nil {
		if os.Getenv(EnvRequirePgBouncer) == "true" {
			t.Fatalf("%v (and %s=true makes that a failure)", err, EnvRequirePgBouncer)
		}
		t.Skipf("\n*** PGBOUNCER TEST SKIPPED: %v ***\n", err)
	}
	ctx := context.Background()
	base := dbtest.PostgresURL(t)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	if port == 0 {
		port = 5432
	}

	// Its own database: PgBouncer does not carry a per-client search_path
	// across server connections, so the schema-per-test trick cannot work.
	db := leftover.Name("fgbouncer", time.Now())
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.WithoutCancel(ctx)) })
	if err := dbtest.DropLeftovers(ctx, admin, "fgbouncer", time.Now()); err != nil {
		t.Logf("dropping a killed run's databases: %v", err) // they wait for the next run
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec(context.WithoutCancel(ctx), "DROP DATABASE "+db+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database: %v", err)
		}
	})
	direct := *u
	direct.Path = "/" + db
	// Migrate directly, not through the pooler: goose's session lock needs
	// a session of its own.
	migratePool, err := pgxpool.New(ctx, direct.String())
	if err != nil {
		t.Fatal(err)
	}
	if err := pgxv5.New(migratePool).Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := migratePool.Exec(ctx, `CREATE TABLE writes (id bigserial PRIMARY KEY, resource text NOT NULL, fence bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	migratePool.Close()

	bouncer, err := faults.StartPgBouncer(ctx, u.Hostname(), port, db, 3)
	if err != nil {
		setupFailed(t, "a throwaway PgBouncer", err)
	}
	t.Cleanup(bouncer.Stop)

	for _, mode := range pgBouncerModes {
		t.Run("pgx/"+mode, func(t *testing.T) {
			pool, err := pgxpool.New(ctx, bouncer.URL(db, "default_query_exec_mode="+mode+"&pool_max_conns=12"))
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			d := pgxv5.New(pool)
			g := gate.New(d, &gate.Options{VerifyIssued: true})
			bouncerCycles(t, d, func(ctx context.Context, l *lease.Lease) error {
				return g.Do(ctx, l.Token(), func(ctx context.Context, tx pgx.Tx) error {
					_, err := tx.Exec(ctx, `INSERT INTO writes (resource, fence) VALUES ($1, $2)`, l.Token().Resource, l.Token().Fence)
					return err
				})
			}, func(ctx context.Context, l *lease.Lease) error {
				b := &pgx.Batch{}
				b.Queue(`INSERT INTO writes (resource, fence) VALUES ($1, $2)`, l.Token().Resource, l.Token().Fence)
				return pgxgate.CommitBatch(ctx, g, pool, l.Token(), b)
			}, func(ctx context.Context, l *lease.Lease) error {
				tx, err := pgxgate.BeginFenced(ctx, g, pool, l.Token(), pgx.TxOptions{})
				if err != nil {
					return err
				}
				defer tx.Rollback(ctx)
				if _, err := tx.Exec(ctx, `INSERT INTO writes (resource, fence) VALUES ($1, $2)`, l.Token().Resource, l.Token().Fence); err != nil {
					return err
				}
				return tx.Commit(ctx)
			})
			checkStaleRefused(t, g, pool)
		})
	}
	t.Run("database-sql/exec", func(t *testing.T) {
		d, err := pgsql.Open(ctx, bouncer.URL(db, "default_query_exec_mode=exec"))
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		g := gate.New(d, &gate.Options{VerifyIssued: true})
		write := func(ctx context.Context, l *lease.Lease) error {
			return g.Do(ctx, l.Token(), func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO writes (resource, fence) VALUES ($1, $2)`, l.Token().Resource, l.Token().Fence)
				return err
			})
		}
		bouncerCycles(t, d, write, write)
	})
	checkWriteOrder(t, direct.String())
}

// bouncerCycles runs 24 workers over 3 resources, each looping acquire →
// fenced write (alternating the two write functions) → release, and fails
// on any error: behind a transaction pooler in a safe mode, nothing should.
func bouncerCycles(t *testing.T, store sqlstore.Store, writes ...func(context.Context, *lease.Lease) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	coord := lease.NewCoordinator(store, &lease.CoordinatorOptions{TTL: 10 * time.Second})
	const workers, cycles = 24, 8
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	var mu sync.Mutex
	granted := 0
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client, err := lease.NewClient(&lease.ClientOptions{Holder: fmt.Sprintf("w%d", w)})
			if err != nil {
				errs <- err
				return
			}
			resource := fmt.Sprintf("r%d", w%3)
			for i := 0; i < cycles; {
				req, err := client.BeginAcquire(resource)
				if err != nil {
					errs <- err
					return
				}
				out, err := coord.Acquire(ctx, req)
				if errors.Is(err, lease.ErrBusy) {
					continue
				}
				if err != nil {
					errs <- fmt.Errorf("acquire: %w", err)
					return
				}
				if !out.OK {
					// Held: back off briefly (a pause between tries, not a
					// synchronisation); the holder releases within a few
					// statements.
					time.Sleep(time.Millisecond)
					continue
				}
				l, err := client.CompleteAcquire(req, out.Grant)
				if err != nil {
					errs <- err
					return
				}
				fn := writes[i%len(writes)]
				if err := fn(ctx, l); err != nil {
					errs <- fmt.Errorf("write under %s: %w", l.Token(), err)
					return
				}
				token, err := client.Release(l)
				if err != nil {
					errs <- err
					return
				}
				if ok, err := coord.Release(ctx, token); err != nil || !ok {
					errs <- fmt.Errorf("release %s: %v, %v", token, ok, err)
					return
				}
				mu.Lock()
				granted++
				mu.Unlock()
				i++
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if granted != workers*cycles {
		t.Errorf("completed %d cycles, want %d", granted, workers*cycles)
	}
}

// checkStaleRefused commits a write under a fence below the floor through
// the pooler: it is refused, logged, and the write does not land.
func checkStaleRefused(t *testing.T, g *gate.Gate[pgx.Tx], pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stale := fence.Token{Resource: "r0", Holder: "w0", Fence: 1}
	err = g.Commit(ctx, tx, stale)
	var sfe *gate.StaleFenceError
	if !errors.As(err, &sfe) || sfe.Seq == 0 {
		t.Fatalf("stale fence through the pooler: got %v, want a logged *StaleFenceError", err)
	}
	if err := tx.Commit(ctx); err == nil {
		t.Fatal("a refused transaction committed")
	}
	if tx, err := pgxgate.BeginFenced(ctx, g, pool, stale, pgx.TxOptions{}); !errors.As(err, &sfe) || sfe.Seq == 0 || tx != nil {
		t.Fatalf("stale fence through the pooler, BeginFenced: got %v, want a logged *StaleFenceError", err)
	}
}

// checkWriteOrder reads every write straight from the server: per resource,
// in commit order (ids are drawn inside the fenced transaction, under the
// floor row lock), fences never go down.
func checkWriteOrder(t *testing.T, dsn string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT resource, fence FROM writes ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	last := map[string]int64{}
	n := 0
	for rows.Next() {
		var r string
		var f int64
		if err := rows.Scan(&r, &f); err != nil {
			t.Fatal(err)
		}
		if f < last[r] {
			t.Errorf("write under fence %d on %s committed after fence %d", f, r, last[r])
		}
		last[r] = f
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := (len(pgBouncerModes) + 1) * 24 * 8; n != want {
		t.Errorf("%d writes landed, want %d", n, want)
	}
}
