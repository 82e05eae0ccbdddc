//go:build unix

package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore/mysql"
)

// MySQLChildRole is the first argument that makes fgbench the wedged holder
// of the MariaDB column instead of the benchmark.
const MySQLChildRole = "-wedged-mysql-child"

// The MariaDB wedged holder's guards, its lock and its statements (row 64
// records the last writer, as in scenario 5).
var mysqlWedgeModes = []string{"fencegate", "GET_LOCK"}

const (
	mysqlWedgeLock      = "wedge"
	mysqlWedgeSetWriter = `UPDATE bench_item SET n = ? WHERE id = 64`
	mysqlWedgeGetWriter = `SELECT n FROM bench_item WHERE id = 64`
)

// WedgedMySQLChild is the stale holder A of the MariaDB column, in its own
// process: like WedgedChild, it takes the guard, prints "ACQUIRED <connection
// id>", is stopped by the parent before its write, and when continued writes
// and prints "RESULT <what happened>".
func WedgedMySQLChild(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: fgbench "+MySQLChildRole+" <fencegate|GET_LOCK> <mysql url>")
		return 2
	}
	mode, dsn := args[0], args[1]
	ctx := context.Background()
	d, err := mysql.Open(ctx, dsn)
	if err != nil {
		fmt.Println("RESULT error:", err)
		return 1
	}
	defer d.Close()
	pause := func() { time.Sleep(300 * time.Millisecond) } // the parent stops us in here
	var werr error
	switch mode {
	case "fencegate":
		coord := lease.NewCoordinator(d, &lease.CoordinatorOptions{TTL: wedgeTTL})
		client, _ := lease.NewClient(&lease.ClientOptions{Holder: "A", TTL: wedgeTTL})
		req, _ := client.BeginAcquire(mysqlWedgeLock)
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
		werr = gate.New(d, nil).Do(ctx, l.Token(), func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, mysqlWedgeSetWriter, writerA)
			return err
		})
	case "GET_LOCK":
		// The lock on a connection of its own, the work through the pool.
		lockConn, err := d.DB().Conn(ctx)
		if err != nil {
			fmt.Println("RESULT error:", err)
			return 1
		}
		var id int64
		var got sql.NullInt64
		if err := lockConn.QueryRowContext(ctx, `SELECT CONNECTION_ID(), GET_LOCK(?, 0)`, lockName(dsn, mysqlWedgeLock)).Scan(&id, &got); err != nil || got.Int64 != 1 {
			fmt.Println("RESULT error: GET_LOCK:", got, err)
			return 1
		}
		fmt.Println("ACQUIRED", id)
		pause()
		_, werr = d.DB().ExecContext(ctx, mysqlWedgeSetWriter, writerA)
	default:
		fmt.Println("RESULT error: unknown mode", mode)
		return 2
	}
	switch {
	case errors.Is(werr, gate.ErrStaleFence):
		fmt.Println("RESULT refused by the gate:", werr)
	case werr != nil:
		fmt.Println("RESULT failed:", werr)
	default:
		fmt.Println("RESULT committed")
	}
	return 0
}

// wedgedMariaDB is the wedged holder on MariaDB, as two OS processes, in
// the style of scenario 5.
func wedgedMariaDB(ctx context.Context, cfg Config, m *MySQL, r *Report) error {
	r.f("### The wedged holder, as two OS processes\n\n")
	r.f("As in scenario 5: process A takes the guard, is frozen with SIGSTOP just before its write, B takes over and writes, then A is continued and writes. fencegate: lease TTL %s. GET_LOCK: A holds the lock on a connection of its own and writes through its pool; B waits %s, then takes over with `KILL` on A's lock connection, the only way to free a lock whose session is alive.\n\n", wedgeTTL, wedgeLockWait)
	var outs []wedgeOutcome
	for _, mode := range mysqlWedgeModes {
		prog(cfg, "mariadb: wedged holder, "+mode)
		o, err := wedgeMySQL(ctx, cfg, m, mode)
		if err != nil {
			return fmt.Errorf("wedged holder, %s: %w", mode, err)
		}
		outs = append(outs, o)
	}
	r.f("| guard | successor B | A's late write | row written last by |\n|---|---|---|---|\n")
	for _, o := range outs {
		who := map[int64]string{writerA: "**A (stale: the late write landed)**", writerB: "B (correct)"}[o.final]
		r.f("| %s | %s | %s | %s |\n", o.mode, o.successorWait, strings.ReplaceAll(o.childSaid, "|", "/"), who)
		if r.wedged == nil {
			r.wedged = map[string]bool{}
		}
		r.wedged["mariadb "+o.mode] = r.wedged["mariadb "+o.mode] || o.final == writerA
	}
	r.f("\nA session that stalls keeps its GET_LOCK for as long as it lives; once it is killed, a holder that writes through another connection of its pool writes late and wins. The floor refuses A's write at the database.\n\n")
	return nil
}

func wedgeMySQL(ctx context.Context, cfg Config, m *MySQL, mode string) (wedgeOutcome, error) {
	o := wedgeOutcome{mode: mode, net: "loopback"}
	db := m.D.DB()
	if _, err := db.ExecContext(ctx, mysqlWedgeSetWriter, 0); err != nil {
		return o, err
	}
	child, idText, err := startWedged(ctx, cfg, MySQLChildRole, mode, m.URL)
	if err != nil {
		return o, err
	}
	defer child.close()
	childConn, _ := strconv.ParseInt(idText, 10, 64)
	stoppedAt := time.Now()

	switch mode {
	case "fencegate":
		l, err := takeOver(ctx, lease.NewCoordinator(m.D, &lease.CoordinatorOptions{TTL: wedgeTTL}), mysqlWedgeLock)
		if err != nil {
			return o, err
		}
		o.successorWait = fmt.Sprintf("acquired after %s (A's lease expired)", time.Since(stoppedAt).Round(10*time.Millisecond))
		if err := m.Gate.Do(ctx, l.Token(), func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, mysqlWedgeSetWriter, writerB)
			return err
		}); err != nil {
			return o, err
		}
	default:
		conn, err := db.Conn(ctx)
		if err != nil {
			return o, err
		}
		defer conn.Close()
		lock := func(wait time.Duration) (bool, error) {
			var got sql.NullInt64
			err := conn.QueryRowContext(ctx, getLock, m.LockName(mysqlWedgeLock), int(wait.Seconds())).Scan(&got)
			return got.Int64 == 1, err
		}
		t0 := time.Now()
		if got, err := lock(wedgeLockWait); err != nil || got {
			return o, fmt.Errorf("the successor got the lock of a live session (%t) or failed: %v", got, err)
		}
		waited := time.Since(t0)
		if _, err := conn.ExecContext(ctx, `KILL ?`, childConn); err != nil {
			return o, err
		}
		if got, err := lock(5 * time.Second); err != nil || !got {
			return o, fmt.Errorf("lock after the kill: %t, %v", got, err)
		}
		o.successorWait = fmt.Sprintf("still blocked after %s; got the lock only by killing A's session", waited.Round(10*time.Millisecond))
		if _, err := conn.ExecContext(ctx, mysqlWedgeSetWriter, writerB); err != nil {
			return o, err
		}
		if _, err := conn.ExecContext(ctx, releaseLock, m.LockName(mysqlWedgeLock)); err != nil {
			return o, err
		}
	}
	if o.childSaid, err = child.resume(); err != nil {
		return o, err
	}
	if err := db.QueryRowContext(ctx, mysqlWedgeGetWriter).Scan(&o.final); err != nil {
		return o, err
	}
	return o, nil
}
