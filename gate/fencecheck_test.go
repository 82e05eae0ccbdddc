package gate_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/sqlite"
)

// A FenceCheck's Done: admitted, it rolls nothing back; refused under a
// cancelled context, it still rolls back and logs the refusal for the
// resource of the last Params; a failed rollback is warned of; a second
// Done does nothing.
func TestFenceCheckDone(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "fc.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	g := gate.New(store, &gate.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	token := fence.Token{Resource: "r", Holder: "a", Fence: 5}

	rolledBack := 0
	rollback := func(ctx context.Context) error {
		if ctx.Err() != nil {
			t.Errorf("rollback's context is done: %v", ctx.Err())
		}
		rolledBack++
		return nil
	}

	// Admitted.
	cctx, c := g.StartCheck(ctx, "other", token)
	p := c.Params("r")
	if p.Resource != "r" || p.Holder != "a" || p.Fence != 5 {
		t.Fatalf("Params: %+v", p)
	}
	if err := c.Done(cctx, sqlstore.FloorRaiseResult{Admitted: true}, nil, rollback); err != nil || rolledBack != 0 {
		t.Fatalf("admitted: %v, %d rollbacks", err, rolledBack)
	}

	// Refused, the caller gone: rolled back, logged, for Params' resource.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	_, c = g.StartCheck(gone, "other", token)
	c.Params("member")
	err = c.Done(gone, sqlstore.FloorRaiseResult{Issued: true, Floor: 9, FloorHolder: "b"}, nil, rollback)
	stale, ok := errors.AsType[*gate.StaleFenceError](err)
	if !ok || stale.Resource != "member" || stale.Floor != 9 || stale.Seq == 0 || rolledBack != 1 {
		t.Fatalf("refused: %v (%+v), %d rollbacks", err, stale, rolledBack)
	}
	rej, err := g.Rejections(ctx, gate.RejectionQuery{Resource: "member"})
	if err != nil || len(rej) != 1 || rej[0].Floor != 9 {
		t.Fatalf("rejection log: %+v, %v", rej, err)
	}
	// Done again: nothing more.
	if err := c.Done(ctx, sqlstore.FloorRaiseResult{}, nil, rollback); err != nil || rolledBack != 1 {
		t.Fatalf("second Done: %v, %d rollbacks", err, rolledBack)
	}

	// A failure: returned as it is, the failed rollback warned of, nothing logged.
	boom := errors.New("boom")
	_, c = g.StartCheck(ctx, "other", token)
	err = c.Done(ctx, sqlstore.FloorRaiseResult{}, boom, func(context.Context) error { return errors.New("rollback broke") })
	if err != boom || !strings.Contains(logs.String(), "rollback failed") {
		t.Fatalf("failure: %v; logs:\n%s", err, logs.String())
	}
	if rej, _ := g.Rejections(ctx, gate.RejectionQuery{}); len(rej) != 1 {
		t.Fatalf("a failure was logged as a refusal: %+v", rej)
	}
}
