package workload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/integration/internal/history"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore"
)

// The checker's outcomes follow sqlstore.IsOutcomeUnknown: whatever may
// have committed is Unknown, only a definite refusal is Fail.
func TestClassifyOutcomeUnknown(t *testing.T) {
	for _, c := range []struct {
		name           string
		err            error
		call, onCommit history.Outcome
	}{
		{"conn closed", fmt.Errorf("commit: %w", pgconn.ErrConnClosed), history.Unknown, history.Unknown},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, history.Unknown, history.Unknown},
		{"cancelled", fmt.Errorf("commit: %w", context.Canceled), history.Unknown, history.Unknown},
		{"fsync error", sqlstore.WithClass(errors.New("disk I/O error"), sqlstore.ErrorClass{OutcomeUnknown: true}), history.Unknown, history.Unknown},
		{"unique violation", &pgconn.PgError{Code: "23505"}, history.Fail, history.Fail},
		{"serialization failure", &pgconn.PgError{Code: "40001"}, history.Fail, history.Fail},
		{"busy", lease.ErrBusy, history.Fail, history.Unknown},
		{"unrecognised", errors.New("?"), history.Unknown, history.Unknown},
	} {
		if got := Classify(c.err); got != c.call {
			t.Errorf("%s: Classify = %v, want %v", c.name, got, c.call)
		}
		if got := classifyCommit(c.err); got != c.onCommit {
			t.Errorf("%s: classifyCommit = %v, want %v", c.name, got, c.onCommit)
		}
	}
}

// A connection never made is a failure, unless the failure is a cleanup's,
// joined to an operation whose outcome is unknown (lease's "may have been
// granted to ..., and releasing it failed: ... failed to connect").
func TestClassifyConnectInCleanup(t *testing.T) {
	connect := fmt.Errorf("take a connection: %w", &pgconn.ConnectError{})
	if got := Classify(connect); got != history.Fail {
		t.Errorf("a connection never made: Classify = %v, want fail", got)
	}
	left := errors.Join(fmt.Errorf("one-statement acquire: %w", io.ErrUnexpectedEOF), fmt.Errorf("releasing it failed: %w", connect))
	if got := Classify(left); got != history.Unknown {
		t.Errorf("an unknown acquisition whose cleanup could not connect: Classify = %v, want unknown", got)
	}
	if got := Classify(errors.Join(lease.ErrBusy, connect)); got != history.Fail {
		t.Errorf("two definite failures: Classify = %v, want fail", got)
	}
}

// A refusal counts as unlogged only when the gate said its logging failed.
func TestLogFailed(t *testing.T) {
	stale := &gate.StaleFenceError{Resource: "r", Fence: 1}
	if logFailed(fmt.Errorf("commit: %w", stale), stale) {
		t.Error("a bare refusal without a sequence number was taken for a failed log write")
	}
	joined := errors.Join(stale, errors.New("fencegate: the refusal may not have been logged: disk full"))
	if !logFailed(fmt.Errorf("commit: %w", joined), stale) {
		t.Error("a refusal joined with its logging error was not taken for a failed log write")
	}
	if logFailed(joined, &gate.StaleFenceError{Seq: 3}) {
		t.Error("a logged refusal was taken for a failed log write")
	}
}

// A failure's cause separates the faults a stale write may meet from an
// error that names none: a refusal the library did not recognise.
func TestFailCause(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"timeout", fmt.Errorf("commit: %w", context.DeadlineExceeded), history.CauseConn},
		{"conn closed", fmt.Errorf("commit: %w", pgconn.ErrConnClosed), history.CauseConn},
		{"crash shutdown", &pgconn.PgError{Code: "57P02"}, history.CauseConn},
		{"serialization failure", &pgconn.PgError{Code: "40001"}, history.CauseBusy},
		{"busy", lease.ErrBusy, history.CauseBusy},
		{"unique violation", &pgconn.PgError{Code: "23505"}, history.CauseServer},
		{"a refusal's SQLSTATE", fmt.Errorf("fencegate: begin fenced: %w", &pgconn.PgError{Code: "FG001"}), history.CauseServer},
		{"no fault named", errors.New("fencegate: commit: not admitted"), history.CauseOther},
	} {
		if got := failCause(c.err); got != c.want {
			t.Errorf("%s: failCause = %q, want %q", c.name, got, c.want)
		}
	}
	if got := sqlState(fmt.Errorf("x: %w", &pgconn.PgError{Code: "FG001"})); got != "FG001" {
		t.Errorf("sqlState = %q, want FG001", got)
	}
}
