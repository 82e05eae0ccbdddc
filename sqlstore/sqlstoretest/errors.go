package sqlstoretest

import (
	"errors"
	"testing"
	"time"

	"github.com/fencegate/fencegate/sqlstore"
)

// exerciseErrors states the driver's error classification and its
// not-found answers.
func exerciseErrors[TTx any](run runner[TTx]) {
	run("Errors/NotFound", func(t *testing.T, d sqlstore.Driver[TTx]) {
		ex := d.Executor()
		if _, err := ex.FloorGet(ctx, "none"); !errors.Is(err, sqlstore.ErrNotFound) {
			t.Errorf("FloorGet(none) = %v, want ErrNotFound", err)
		}
		if _, err := ex.LeaseGet(ctx, "none"); !errors.Is(err, sqlstore.ErrNotFound) {
			t.Errorf("LeaseGet(none) = %v, want ErrNotFound", err)
		}
		if f, err := ex.RequestFence(ctx, "none", "q"); err != nil || f != 0 {
			t.Errorf("RequestFence(none) = %d, %v; want 0, nil", f, err)
		}
	})

	run("Store/Facts", func(t *testing.T, d sqlstore.Driver[TTx]) {
		if d.Dialect() == "" {
			t.Error("Dialect is empty")
		}
		if p := d.ClockPrecision(); p <= 0 || p > time.Second {
			t.Errorf("ClockPrecision = %v", p)
		}
		if err := d.ClassifyError(nil); err != nil {
			t.Errorf("ClassifyError(nil) = %v", err)
		}
		plain := errors.New("plain")
		if err := d.ClassifyError(plain); !errors.Is(err, plain) || sqlstore.IsRetryable(err) || sqlstore.IsConnLost(err) {
			t.Errorf("ClassifyError(plain) = %v: retryable %v, conn lost %v", err, sqlstore.IsRetryable(err), sqlstore.IsConnLost(err))
		}
	})
}
