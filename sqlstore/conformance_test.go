package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/sqlstoretest"
)

// TestConformance runs the driver contract on every driver of the one list.
func TestConformance(t *testing.T) {
	for _, d := range dbtest.Drivers() {
		t.Run(d.Name, func(t *testing.T) {
			switch {
			case d.SQL != nil:
				sqlstoretest.Exercise(t, func(t testing.TB) sqlstore.Driver[*sql.Tx] { return d.SQL(t, d.DSN(t)).Driver })
			case d.Pgx != nil:
				sqlstoretest.Exercise(t, func(t testing.TB) sqlstore.Driver[pgx.Tx] { return d.Pgx(t, d.DSN(t)).Driver })
			}
		})
	}
}

// An unmigrated store's errors named the missing table but never said to
// run Migrate.
func TestUnmigratedSaysMigrate(t *testing.T) {
	ctx := context.Background()
	for _, d := range dbtest.Drivers() {
		t.Run(d.Name, func(t *testing.T) {
			ex := d.Unmigrated(t, d.DSN(t)).Executor()
			_, err1 := ex.FenceNext(ctx)
			_, err2 := ex.FloorGet(ctx, "r")
			_, err3 := ex.LeaseList(ctx)
			_, err4 := ex.FloorRaise(ctx, &sqlstore.FloorRaiseParams{Resource: "r", Holder: "h", Fence: 1})
			_, err5 := ex.RequestFence(ctx, "r", "q")
			for _, err := range []error{err1, err2, err3, err4, err5} {
				if !errors.Is(err, sqlstore.ErrNotMigrated) || !strings.Contains(err.Error(), "fencegate migrate") {
					t.Errorf("error %v: want ErrNotMigrated saying to run fencegate migrate", err)
				}
			}
		})
	}
}

func TestWithClass(t *testing.T) {
	if sqlstore.IsRetryable(errors.New("x")) || sqlstore.IsRetryable(nil) {
		t.Fatal("plain errors are not retryable")
	}
	if sqlstore.IsConnLost(context.Canceled) || sqlstore.IsConnLost(nil) {
		t.Fatal("cancellation is not a lost connection")
	}
	if !sqlstore.IsConnLost(sql.ErrConnDone) {
		t.Fatal("sql.ErrConnDone is a lost connection")
	}
	native := errors.New("native")
	if err := sqlstore.WithClass(native, sqlstore.ErrorClass{}); err != native {
		t.Fatalf("no class: %v, want the error itself", err)
	}
	retry := sqlstore.WithClass(native, sqlstore.ErrorClass{Retryable: true})
	wrapped := fmt.Errorf("commit: %w", retry)
	if !sqlstore.IsRetryable(wrapped) || sqlstore.IsConnLost(wrapped) || !errors.Is(wrapped, native) || retry.Error() != "native" {
		t.Fatalf("retryable %v: IsRetryable %v, IsConnLost %v", wrapped, sqlstore.IsRetryable(wrapped), sqlstore.IsConnLost(wrapped))
	}
	// The first verdict stands.
	if again := sqlstore.WithClass(wrapped, sqlstore.ErrorClass{ConnLost: true}); again != wrapped || sqlstore.IsConnLost(again) {
		t.Fatalf("marked twice: %v", again)
	}
	if lost := sqlstore.WithClass(native, sqlstore.ErrorClass{ConnLost: true}); !sqlstore.IsConnLost(lost) || sqlstore.IsRetryable(lost) {
		t.Fatal("a lost connection is IsConnLost only")
	}
}

// outcomeErr is a driver's own error type that answers the behaviour
// interface itself, as a driver may instead of WithClass.
type outcomeErr struct{ unknown bool }

func (e outcomeErr) Error() string        { return "driver error" }
func (e outcomeErr) OutcomeUnknown() bool { return e.unknown }

func TestIsOutcomeUnknown(t *testing.T) {
	native := errors.New("native")
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain", native, false},
		{"retryable", sqlstore.WithClass(native, sqlstore.ErrorClass{Retryable: true}), false},
		{"not migrated", sqlstore.WithClass(native, sqlstore.ErrorClass{NotMigrated: true}), false},
		{"conn lost", fmt.Errorf("commit: %w", sqlstore.WithClass(native, sqlstore.ErrorClass{ConnLost: true})), true},
		{"conn done", sql.ErrConnDone, true},
		{"outcome unknown", fmt.Errorf("commit: %w", sqlstore.WithClass(native, sqlstore.ErrorClass{OutcomeUnknown: true})), true},
		{"cancelled", fmt.Errorf("commit: %w", context.Canceled), true},
		{"timed out", context.DeadlineExceeded, true},
		{"own type, unknown", fmt.Errorf("commit: %w", outcomeErr{unknown: true}), true},
		{"own type, known", outcomeErr{}, false},
	} {
		if got := sqlstore.IsOutcomeUnknown(c.err); got != c.want {
			t.Errorf("%s: IsOutcomeUnknown(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
	// An unknown outcome alone is not a lost connection.
	if sqlstore.IsConnLost(sqlstore.WithClass(native, sqlstore.ErrorClass{OutcomeUnknown: true})) {
		t.Error("OutcomeUnknown made IsConnLost true")
	}
}
