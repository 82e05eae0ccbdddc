package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/internal/mysqltest"
	"github.com/fencegate/fencegate/sqlstore/mysql"
)

// isolationVar is the session variable that sets the isolation level:
// tx_isolation on MariaDB (before 11.1), transaction_isolation on MySQL 8.
func isolationVar(t *testing.T) string {
	t.Helper()
	d := openURL(t, mysqltest.WithDatabase(t, mysqltest.ServerURL(t), "mysql"))
	if err := d.DB().QueryRow(`SELECT @@transaction_isolation`).Scan(new(string)); err == nil {
		return "transaction_isolation"
	}
	return "tx_isolation"
}

// Sixteen writers with mixed fences on one resource, through gate.Do, with
// the caller's transactions at each isolation level: committed writes carry
// non-decreasing fences in commit order, every refusal is logged, and the
// deadlocks of the first writers racing to create the floor row are retried.
func TestSixteenWritersOneResource(t *testing.T) {
	ivar := isolationVar(t)
	for _, il := range isolationLevels {
		t.Run(il.name, func(t *testing.T) {
			level := strings.ToUpper(il.name) // READ-COMMITTED, …
			d := openURL(t, databaseURL(t, url.Values{ivar: {"'" + level + "'"}}))
			ctx := context.Background()
			if err := d.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			var got string
			if err := d.DB().QueryRow(`SELECT @@` + ivar).Scan(&got); err != nil || got != level {
				t.Fatalf("session isolation = %q, %v; want %s", got, err, level)
			}
			for _, q := range []string{
				`CREATE TABLE commit_order (id INT PRIMARY KEY, n BIGINT NOT NULL)`,
				`INSERT INTO commit_order VALUES (1, 0)`,
				`CREATE TABLE writes (seq BIGINT PRIMARY KEY, fence BIGINT NOT NULL, writer INT NOT NULL)`,
			} {
				if _, err := d.DB().ExecContext(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			runWriters(t, d, 16, 8)
		})
	}
}

func runWriters(t *testing.T, d *mysql.Driver, writers, rounds int) {
	t.Helper()
	ctx := context.Background()
	g := gate.New(d, &gate.Options{MaxAttempts: 50})
	deadlocks := func() (n int64) {
		if err := d.DB().QueryRowContext(ctx, `SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'INNODB_DEADLOCKS'`).Scan(&n); err != nil {
			t.Logf("deadlock count: %v", err) // MySQL 8 keeps it elsewhere; only logged
		}
		return n
	}
	before := deadlocks()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		refused int
		failed  []error
	)
	start := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			<-start
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for round := range rounds {
				// Fences rise with the rounds, mixed: equal, higher and
				// stale ones meet at the gate.
				tok := fence.Token{Resource: "shared", Holder: fmt.Sprintf("w%d", w), Fence: int64(1 + round + rng.IntN(3))}
				err := g.Do(ctx, tok, func(ctx context.Context, tx *sql.Tx) error {
					// The counter row's lock orders the writers' commits,
					// whatever the gate does: seq is commit order.
					res, err := tx.ExecContext(ctx, `UPDATE commit_order SET n = LAST_INSERT_ID(n + 1) WHERE id = 1`)
					if err != nil {
						return err
					}
					seq, err := res.LastInsertId()
					if err != nil {
						return err
					}
					_, err = tx.ExecContext(ctx, `INSERT INTO writes (seq, fence, writer) VALUES (?, ?, ?)`, seq, tok.Fence, w)
					return err
				})
				mu.Lock()
				switch {
				case errors.Is(err, gate.ErrStaleFence):
					refused++
				case err != nil:
					failed = append(failed, err)
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	for _, err := range failed {
		t.Errorf("writer failed: %v", err)
	}
	rows, err := d.DB().QueryContext(ctx, `SELECT seq, fence FROM writes ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var committed int
	var last int64
	for rows.Next() {
		var seq, fence int64
		if err := rows.Scan(&seq, &fence); err != nil {
			t.Fatal(err)
		}
		if fence < last {
			t.Errorf("write %d under fence %d committed after a write under fence %d", seq, fence, last)
		}
		last = fence
		committed++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if committed+refused+len(failed) != writers*rounds {
		t.Errorf("%d committed + %d refused + %d failed != %d", committed, refused, len(failed), writers*rounds)
	}
	rej, err := g.Rejections(ctx, gate.RejectionQuery{Limit: writers * rounds})
	if err != nil || len(rej) != refused {
		t.Errorf("%d rejections logged, %v; want %d", len(rej), err, refused)
	}
	t.Logf("%d committed, %d refused, %d deadlocks retried", committed, refused, deadlocks()-before)
}

// A refused Commit rolls the caller's transaction back before it logs, on
// another connection: with a pool of one connection the log is written, and
// it survives the rollback.
func TestRefusalLoggedAfterRollback(t *testing.T) {
	d := open(t)
	d.DB().SetMaxOpenConns(1)
	ctx := context.Background()
	g := gate.New(d, nil)
	if err := g.Admit(ctx, fence.Token{Resource: "r", Holder: "new", Fence: 5}); err != nil {
		t.Fatal(err)
	}
	tx, err := d.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = g.Commit(ctx, tx, fence.Token{Resource: "r", Holder: "old", Fence: 4})
	var stale *gate.StaleFenceError
	if !errors.As(err, &stale) || stale.Floor != 5 || stale.FloorHolder != "new" || stale.Seq == 0 {
		t.Fatalf("Commit = %v, want a logged *StaleFenceError at floor 5 by new", err)
	}
	if err := tx.Commit(); !errors.Is(err, sql.ErrTxDone) {
		t.Fatalf("the refused transaction was not rolled back: %v", err)
	}
	rej, err := g.Rejections(ctx, gate.RejectionQuery{})
	if err != nil || len(rej) != 1 || rej[0].Seq != stale.Seq || rej[0].Holder != "old" || rej[0].FloorHolder != "new" {
		t.Fatalf("rejections = %+v, %v", rej, err)
	}
}

// A deadlock in the caller's own statements inside gate.Do comes back as
// MySQL's error 1213, which the driver classifies retryable: Do runs the
// transaction again and it commits.
func TestDoRetriesDeadlockOfCallersSQL(t *testing.T) {
	d := open(t)
	ctx := context.Background()
	for _, q := range []string{
		`CREATE TABLE app (id INT PRIMARY KEY, v INT NOT NULL)`,
		`INSERT INTO app VALUES (1, 0), (2, 0)`,
		`CREATE TABLE ballast (id INT PRIMARY KEY)`,
	} {
		if _, err := d.DB().ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	// The other transaction holds row 2 and has written much more, so
	// InnoDB picks Do's transaction as the deadlock's victim.
	other, err := d.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback()
	for i := range 200 {
		if _, err := other.ExecContext(ctx, `INSERT INTO ballast VALUES (?)`, i); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := other.ExecContext(ctx, `UPDATE app SET v = v + 1 WHERE id = 2`); err != nil {
		t.Fatal(err)
	}

	g := gate.New(d, &gate.Options{RetryBackoff: time.Millisecond})
	attempts := 0
	locked := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- g.Do(ctx, fence.Token{Resource: "r", Holder: "h", Fence: 1}, func(ctx context.Context, tx *sql.Tx) error {
			attempts++
			if _, err := tx.ExecContext(ctx, `UPDATE app SET v = v + 1 WHERE id = 1`); err != nil {
				return err
			}
			if attempts == 1 {
				close(locked)
			}
			_, err := tx.ExecContext(ctx, `UPDATE app SET v = v + 1 WHERE id = 2`) // waits for other
			return err
		})
	}()
	<-locked
	waitForLockWait(t, d, nil)
	// Close the cycle: other waits for row 1, which Do's transaction holds.
	if _, err := other.ExecContext(ctx, `UPDATE app SET v = v + 1 WHERE id = 1`); err != nil {
		t.Fatalf("the other transaction was the deadlock's victim: %v", err)
	}
	if err := other.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Do = %v, want the retry to commit", err)
	}
	if attempts != 2 {
		t.Fatalf("%d attempts, want 2 (the deadlock, then the retry)", attempts)
	}
	var v1, v2 int
	if err := d.DB().QueryRow(`SELECT (SELECT v FROM app WHERE id = 1), (SELECT v FROM app WHERE id = 2)`).Scan(&v1, &v2); err != nil || v1 != 2 || v2 != 2 {
		t.Fatalf("app = %d, %d, %v; want 2, 2 (other's and the retry's)", v1, v2, err)
	}
}
