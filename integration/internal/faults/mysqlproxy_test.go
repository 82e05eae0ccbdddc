package faults

import (
	"context"
	"net/url"
	"testing"

	"github.com/fencegate/fencegate/internal/mysqltest"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/mysql"
)

// The MySQL proxy reads the MySQL protocol: a cut after COMMIT loses the
// client the answer, and the server commits.
func TestMySQLCommitCutLosesTheAnswerNotTheCommit(t *testing.T) {
	ctx := context.Background()
	dsn := mysqltest.DatabaseURL(t)
	direct, err := mysql.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	if _, err := direct.DB().ExecContext(ctx, `CREATE TABLE t (v INT) ENGINE = InnoDB`); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(dsn)
	p, err := NewMySQLProxy(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	u.Host = p.Addr()
	through, err := mysql.Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer through.Close()
	tx, err := through.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO t VALUES (?)`, 1); err != nil {
		t.Fatal(err)
	}
	p.ArmCommitCuts(1)
	err = through.Commit(ctx, tx)
	if err == nil {
		t.Fatal("commit through an armed proxy succeeded")
	}
	if !sqlstore.IsConnLost(err) {
		t.Errorf("commit error %v: want a lost connection", err)
	}
	if got := p.Stats().CommitCuts; got != 1 {
		t.Errorf("%d commit cuts, want 1", got)
	}
	// A locking read waits for the cut transaction's row lock, whatever
	// became of it, and reads the latest committed rows.
	var n int
	if err := direct.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM t LOCK IN SHARE MODE`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d rows after the cut COMMIT, want 1 (the server commits)", n)
	}
}
