package pgsql_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore"
)

// Postgres's errors are classified by the driver; the two Postgres drivers
// share the classification (internal/pg).
func TestClassifyError(t *testing.T) {
	d := dbtest.Postgres(t)
	// What pgx returns when the connection dies after COMMIT was sent (the
	// reliability suite saw such commits land).
	if !sqlstore.IsConnLost(d.ClassifyError(fmt.Errorf("commit: %w", pgconn.ErrConnClosed))) {
		t.Fatal("pgconn.ErrConnClosed is a lost connection")
	}
	// A serialization failure, made for real.
	ctx := context.Background()
	db := d.DB()
	if _, err := db.Exec(`CREATE TABLE c (id int PRIMARY KEY, v int); INSERT INTO c VALUES (1, 0)`); err != nil {
		t.Fatal(err)
	}
	t1, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer t1.Rollback()
	if _, err := t1.Exec(`SELECT v FROM c`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE c SET v = 1`); err != nil {
		t.Fatal(err)
	}
	_, err = t1.Exec(`UPDATE c SET v = 2`)
	if sqlstore.IsRetryable(err) {
		t.Fatal("a native error is classified only through the driver")
	}
	err = d.ClassifyError(err)
	if !sqlstore.IsRetryable(err) || sqlstore.IsConnLost(err) {
		t.Fatalf("serialization failure %v: retryable %v", err, sqlstore.IsRetryable(err))
	}
}
