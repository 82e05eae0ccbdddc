//go:build unix

package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
)

// ChildRole is the first argument that makes fgbench the wedged holder of
// scenario 5 instead of the benchmark.
const ChildRole = "-wedged-child"

const (
	wedgeTTL       = time.Second
	wedgeLockWait  = 2 * time.Second // how long the advisory successor waits before giving up
	wedgeAdvisory  = advisoryBase + 9999
	wedgeSetWriter = `UPDATE bench_item SET n = $1 WHERE id = 64`
	wedgeGetWriter = `SELECT n FROM bench_item WHERE id = 64`
)

// Writers are recorded as numbers in row 64: 1 is the stale holder A, 2 the
// successor B.
const (
	writerA = 1
	writerB = 2
)

// WedgedChild is the stale holder A, in its own process. It takes the guard,
// prints "ACQUIRED <backend pid>", believes its guard valid, and is stopped
// (SIGSTOP) by the parent before its write; when continued it writes and
// prints "RESULT <what happened>".
func WedgedChild(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: fgbench -wedged-child <fencegate|advisory-session|advisory-xact|pglock|pglock-heartbeat> <url>")
		return 2
	}
	mode, url := args[0], args[1]
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		fmt.Println("RESULT error:", err)
		return 1
	}
	defer pool.Close()
	pause := func() { time.Sleep(300 * time.Millisecond) } // the parent stops us in here
	switch mode {
	case "fencegate":
		d := pgxv5.New(pool)
		coord := lease.NewCoordinator(d, &lease.CoordinatorOptions{TTL: wedgeTTL})
		client, _ := lease.NewClient(&lease.ClientOptions{Holder: "A", TTL: wedgeTTL})
		req, _ := client.BeginAcquire("wedge")
		out, err := coord.Acquire(ctx, req)
		if err != nil || !out.OK {
			fmt.Println("RESULT error: acquire:", err, out.HeldBy)
			return 1
		}
		l, err := client.CompleteAcquire(req, out.Grant)
		if err != nil || l.Expired() {
			fmt.Println("RESULT error: lease:", err)
			return 1
		}
		fmt.Println("ACQUIRED 0")
		pause()
		g := gate.New(d, nil)
		err = g.Do(ctx, l.Token(), func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, wedgeSetWriter, writerA)
			return err
		})
		switch {
		case errors.Is(err, gate.ErrStaleFence):
			fmt.Println("RESULT refused by the gate:", err)
		case err != nil:
			fmt.Println("RESULT failed:", err)
		default:
			fmt.Println("RESULT committed")
		}
	case "advisory-session":
		// The common shape: the lock on a connection of its own, the work
		// through the pool.
		lockConn, err := pgx.Connect(ctx, url)
		if err != nil {
			fmt.Println("RESULT error:", err)
			return 1
		}
		var pid int
		if err := lockConn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			fmt.Println("RESULT error:", err)
			return 1
		}
		if _, err := lockConn.Exec(ctx, advisoryLock, wedgeAdvisory); err != nil {
			fmt.Println("RESULT error:", err)
			return 1
		}
		fmt.Println("ACQUIRED", pid)
		pause()
		if _, err := pool.Exec(ctx, wedgeSetWriter, writerA); err != nil {
			fmt.Println("RESULT failed:", err)
		} else {
			fmt.Println("RESULT committed")
		}
	case "advisory-xact":
		tx, err := pool.Begin(ctx)
		if err != nil {
			fmt.Println("RESULT error:", err)
			return 1
		}
		var pid int
		if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			fmt.Println("RESULT error:", err)
			return 1
		}
		if _, err := tx.Exec(ctx, advisoryXactLock, wedgeAdvisory); err != nil {
			fmt.Println("RESULT error:", err)
			return 1
		}
		fmt.Println("ACQUIRED", pid)
		pause()
		_, err = tx.Exec(ctx, wedgeSetWriter, writerA)
		if err == nil {
			err = tx.Commit(ctx)
		}
		_ = tx.Rollback(ctx)
		if err != nil {
			fmt.Println("RESULT failed:", err)
		} else {
			fmt.Println("RESULT committed")
		}
	case "pglock", "pglock-heartbeat":
		c, err := newPglock(stdlib.OpenDBFromPool(pool), wedgeTTL, pglockBeat(mode), "A")
		if err != nil {
			fmt.Println("RESULT error:", err)
			return 1
		}
		l, err := c.AcquireContext(ctx, "wedge")
		if err != nil {
			fmt.Println("RESULT error: acquire:", err)
			return 1
		}
		// The last check a pglock holder can make, just before it is frozen.
		if l.IsReleased() {
			fmt.Println("RESULT error: lock lost before the write")
			return 1
		}
		fmt.Println("ACQUIRED 0")
		pause()
		if _, err := pool.Exec(ctx, wedgeSetWriter, writerA); err != nil {
			fmt.Println("RESULT failed:", err)
		} else {
			fmt.Println("RESULT committed")
		}
	default:
		fmt.Println("RESULT error: unknown mode", mode)
		return 2
	}
	return 0
}

// wedgeModes are the guards scenario 5 freezes a holder of.
var wedgeModes = []string{"fencegate", "advisory-session", "advisory-xact", "pglock", "pglock-heartbeat"}

// pglockBeat is the heartbeat of a pglock wedge mode: on, at pglock's
// default proportion of the lease, or off.
func pglockBeat(mode string) time.Duration {
	if mode == "pglock-heartbeat" {
		return wedgeTTL / 4
	}
	return 0
}

type wedgeOutcome struct {
	mode, net, successorWait, childSaid string
	final                               int64
}

// Wedged is scenario 5: a holder that stalls between its check and its
// write, as two OS processes, over every net.
func Wedged(ctx context.Context, cfg Config, r *Report) error {
	pgs, done, err := schemaOnNets(ctx, cfg, 4)
	if err != nil {
		return err
	}
	defer done()
	r.f("## 5. The wedged holder, as two OS processes\n\n")
	r.f("Process A takes the guard, believes it valid, and is frozen with SIGSTOP (a GC pause, a VM migration, a model call that never returns) just before its write. ")
	r.f("The parent, B, tries to take over, writes, and then A is continued (SIGCONT) and does its write. The row shows who wrote last. fencegate: lease TTL %s. pglock: lease %s, heartbeat off or every %s; A checks `Lock.IsReleased` just before it is frozen, the last check a pglock holder can make. Advisory locks: B waits %s, then takes over with `pg_terminate_backend` on A's session, the only way to free a lock whose session is alive.\n\n", wedgeTTL, wedgeTTL, wedgeTTL/4, wedgeLockWait)
	var outs []wedgeOutcome
	for _, t := range pgs {
		for _, mode := range wedgeModes {
			prog(cfg, "5: wedged holder, "+mode+", "+t.Net)
			o, err := wedge(ctx, cfg, t, mode)
			if err != nil {
				return fmt.Errorf("%s, %s: %w", mode, t.Net, err)
			}
			outs = append(outs, o)
		}
	}
	r.f("| guard | network | successor B | A's late write | row written last by |\n|---|---|---|---|---|\n")
	for _, o := range outs {
		who := map[int64]string{writerA: "**A (stale: the late write landed)**", writerB: "B (correct)"}[o.final]
		r.f("| %s | %s | %s | %s | %s |\n", o.mode, o.net, o.successorWait, strings.ReplaceAll(o.childSaid, "|", "/"), who)
	}
	r.f("\nA live-but-stalled session keeps its advisory lock forever: without the kill, B would still be waiting. With the kill, a session lock's holder that does its work on another connection (the usual pool pattern) writes late and wins; a transaction-scoped lock is safe only because the kill also aborts A's transaction, which works only when all of A's writes share that one transaction and connection. ")
	r.f("pglock's lease does what it promises: a frozen holder stops heartbeating, and B takes the lock over once a lease has passed, with or without the heartbeat. But nothing at the database refuses A's late write, so it lands; pglock's heartbeat only tells A afterwards (its next heartbeat fails and `IsReleased` turns true). The network's round trip changes none of this.\n\n")
	for _, o := range outs {
		if r.wedged == nil {
			r.wedged = map[string]bool{}
		}
		r.wedged[o.mode] = r.wedged[o.mode] || o.final == writerA
	}
	return nil
}

func wedge(ctx context.Context, cfg Config, pg *PG, mode string) (wedgeOutcome, error) {
	o := wedgeOutcome{mode: mode, net: pg.Net}
	if _, err := pg.Pool.Exec(ctx, wedgeSetWriter, 0); err != nil {
		return o, err
	}
	child, pidText, err := startWedged(ctx, cfg, ChildRole, mode, pg.URL)
	if err != nil {
		return o, err
	}
	defer child.close()
	childPid, _ := strconv.Atoi(pidText)
	stoppedAt := time.Now()

	switch mode {
	case "fencegate":
		l, err := takeOver(ctx, lease.NewCoordinator(pg.Pgx, &lease.CoordinatorOptions{TTL: wedgeTTL}), "wedge")
		if err != nil {
			return o, err
		}
		o.successorWait = fmt.Sprintf("acquired after %s (A's lease expired)", time.Since(stoppedAt).Round(10*time.Millisecond))
		if err := pg.GatePgx.Do(ctx, l.Token(), func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, wedgeSetWriter, writerB)
			return err
		}); err != nil {
			return o, err
		}
	case "pglock", "pglock-heartbeat":
		c, err := newPglock(pg.pglockDB, wedgeTTL, pglockBeat(mode), "B")
		if err != nil {
			return o, err
		}
		// Acquire finds A's lock, sleeps a lease, and takes it over when A
		// has not heartbeaten meanwhile.
		l, err := c.AcquireContext(ctx, "wedge")
		if err != nil {
			return o, err
		}
		o.successorWait = fmt.Sprintf("acquired after %s (A stopped heartbeating; pglock took the lock over)", time.Since(stoppedAt).Round(10*time.Millisecond))
		_, err = pg.Pool.Exec(ctx, wedgeSetWriter, writerB)
		if cerr := l.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return o, err
		}
	default:
		conn, err := pg.Pool.Acquire(ctx)
		if err != nil {
			return o, err
		}
		defer conn.Release()
		lock := func(timeout time.Duration) error {
			tx, err := conn.Begin(ctx)
			if err != nil {
				return err
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, `SELECT set_config('lock_timeout', $1, true)`, fmt.Sprintf("%dms", timeout.Milliseconds())); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, advisoryLock, wedgeAdvisory); err != nil {
				return err
			}
			return tx.Commit(ctx) // a session lock outlives the transaction
		}
		t0 := time.Now()
		if err := lock(wedgeLockWait); err == nil {
			return o, errors.New("the successor got the lock of a live session")
		}
		waited := time.Since(t0)
		if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend($1)`, childPid); err != nil {
			return o, err
		}
		if err := lock(5 * time.Second); err != nil {
			return o, fmt.Errorf("lock after the kill: %w", err)
		}
		o.successorWait = fmt.Sprintf("still blocked after %s; got the lock only by killing A's session", waited.Round(10*time.Millisecond))
		if _, err := conn.Exec(ctx, wedgeSetWriter, writerB); err != nil {
			return o, err
		}
		if _, err := conn.Exec(ctx, advisoryUnlock, wedgeAdvisory); err != nil {
			return o, err
		}
	}
	if o.childSaid, err = child.resume(); err != nil {
		return o, err
	}
	if err := pg.Pool.QueryRow(ctx, wedgeGetWriter).Scan(&o.final); err != nil {
		return o, err
	}
	return o, nil
}
