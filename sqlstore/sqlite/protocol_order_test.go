package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/sqlstore"
)

// recorder is a connector whose connections note every statement they run
// (prepared ones when they run, not when they are prepared), and BEGIN,
// COMMIT and ROLLBACK.
type recorder struct {
	driver.Connector
	mu  sync.Mutex
	log []string
	on  bool
}

func (r *recorder) note(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.on {
		r.log = append(r.log, s)
	}
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.log
	r.log = nil
	return l
}

func (r *recorder) Connect(ctx context.Context) (driver.Conn, error) {
	c, err := r.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &recConn{c.(recBase), r}, nil
}

type recBase interface {
	driver.Conn
	driver.ConnPrepareContext
	driver.ConnBeginTx
	driver.ExecerContext
	driver.QueryerContext
}

type recConn struct {
	recBase
	r *recorder
}

func (c *recConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	s, err := c.recBase.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	return &recStmt{s, q, c.r}, nil
}

func (c *recConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	c.r.note(q)
	return c.recBase.ExecContext(ctx, q, args)
}

func (c *recConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	c.r.note(q)
	return c.recBase.QueryContext(ctx, q, args)
}

func (c *recConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.recBase.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	c.r.note("BEGIN")
	return &recTx{tx, c.r}, nil
}

type recTx struct {
	driver.Tx
	r *recorder
}

func (t *recTx) Commit() error   { t.r.note("COMMIT"); return t.Tx.Commit() }
func (t *recTx) Rollback() error { t.r.note("ROLLBACK"); return t.Tx.Rollback() }

type recStmt struct {
	driver.Stmt
	q string
	r *recorder
}

func (s *recStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.r.note(s.q)
	return s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
}

func (s *recStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.r.note(s.q)
	return s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
}

// names maps each statement of the driver to its sqlexec.Queries field.
func names() map[string]string {
	m := map[string]string{}
	q := reflect.ValueOf(queries).Elem()
	for i := range q.NumField() {
		if f := q.Field(i); f.Kind() == reflect.String && f.String() != "" && q.Type().Field(i).IsExported() {
			if _, dup := m[f.String()]; !dup {
				m[f.String()] = q.Type().Field(i).Name
			}
		}
	}
	return m
}

// The operations of docs/SQL.md's SQLite section are the statements the Go
// driver runs, in the order the section gives, in one transaction each:
// each statement the driver sends is recorded and named by the field of
// its sqlexec.Queries whose text it is, byte for byte.
func TestSQLiteProtocolOrderIsTheDrivers(t *testing.T) {
	c, err := NewConnector(filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{Connector: c}
	db := sql.OpenDB(rec)
	t.Cleanup(func() { db.Close() })
	d := New(db)
	t.Cleanup(func() { d.Close() })
	ctx := context.Background()
	if err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	byText := names()
	run := func(name string, want []string, op func(ex sqlstore.Executor) error) {
		t.Helper()
		rec.mu.Lock()
		rec.on, rec.log = true, nil
		rec.mu.Unlock()
		err := op(d.Executor())
		rec.mu.Lock()
		rec.on = false
		rec.mu.Unlock()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got []string
		for _, s := range rec.take() {
			if n, ok := byText[s]; ok {
				got = append(got, n)
			} else if s == "BEGIN" || s == "COMMIT" || s == "ROLLBACK" {
				got = append(got, s)
			} else {
				got = append(got, "?"+strings.Join(strings.Fields(s), " "))
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s ran\n  %v\nwant (docs/SQL.md)\n  %v", name, got, want)
		}
	}
	claim := func(holder, request string) func(sqlstore.Executor) error {
		return func(ex sqlstore.Executor) error {
			_, err := ex.LeaseAcquire(ctx, &sqlstore.LeaseAcquireParams{
				Resource: "r", Holder: holder, RequestID: request, TTL: time.Minute, LockTimeout: time.Second,
			})
			return err
		}
	}
	run("a first claim", []string{"BEGIN", "ClockTick", "LeaseGetForUpdate", "RequestFence", "FenceNext",
		"ClockTick", "LeaseInsert", "RequestInsert", "FloorHeld", "FloorRaise", "COMMIT"}, claim("a", "q1"))
	run("a retried claim", []string{"BEGIN", "ClockTick", "LeaseGetForUpdate", "COMMIT"}, claim("a", "q1"))
	run("a held claim", []string{"BEGIN", "ClockTick", "LeaseGetForUpdate", "RequestFence", "COMMIT"}, claim("b", "q2"))
	run("a renewal", []string{"ClockTick", "LeaseRenew"}, func(ex sqlstore.Executor) error {
		_, err := ex.LeaseRenew(ctx, &sqlstore.LeaseRenewParams{Resource: "r", Holder: "a", Fence: 1, TTL: time.Minute})
		return err
	})
	run("a check", []string{"BEGIN", "FloorHeldVerified", "COMMIT"}, func(sqlstore.Executor) error {
		return d.InTx(ctx, func(ex sqlstore.Executor) error {
			_, err := ex.FloorRaise(ctx, &sqlstore.FloorRaiseParams{Resource: "r", Holder: "a", Fence: 1, VerifyIssued: true})
			return err
		})
	})
	run("a forged check", []string{"BEGIN", "FloorHeldVerified", "FloorRaiseVerified", "COMMIT"}, func(sqlstore.Executor) error {
		return d.InTx(ctx, func(ex sqlstore.Executor) error {
			_, err := ex.FloorRaise(ctx, &sqlstore.FloorRaiseParams{Resource: "r", Holder: "x", Fence: 9, VerifyIssued: true})
			return err
		})
	})
	run("a release", []string{"ClockTick", "LeaseRelease"}, func(ex sqlstore.Executor) error {
		_, err := ex.LeaseRelease(ctx, &sqlstore.LeaseReleaseParams{Resource: "r", Holder: "a", Fence: 1})
		return err
	})
	run("a claim after the release", []string{"BEGIN", "ClockTick", "LeaseGetForUpdate", "RequestFence", "FenceNext",
		"ClockTick", "LeaseReplace", "RequestInsert", "FloorHeld", "FloorRaise", "COMMIT"}, claim("b", "q3"))
	run("a refusal's record", []string{"FloorGet", "RejectionInsert"}, func(ex sqlstore.Executor) error {
		f, err := ex.FloorGet(ctx, "r")
		if err != nil {
			return err
		}
		_, err = ex.RejectionInsert(ctx, sqlstore.Rejection{Resource: "r", Fence: 1, Holder: "a", Floor: f.Floor, FloorHolder: f.Holder})
		return err
	})
}
