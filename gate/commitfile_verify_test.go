package gate_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore"
)

func TestCommitFileVerifiesTheFileMember(t *testing.T) {
	forEachDriver(t, testCommitFileVerifiesTheFileMember[*sql.Tx], testCommitFileVerifiesTheFileMember[pgx.Tx])
}

// Under VerifyIssued, a write to a file whose token claims that very file
// is refused when the fence was never issued for it: the file is a member,
// not only the file written (a forged path token must not write).
func testCommitFileVerifiesTheFileMember[TTx any](t *testing.T, dh dbtest.Harness[TTx]) {
	ctx := context.Background()
	h := newHarness(t, dh, &gate.Options{VerifyIssued: true})
	f := mustPath(t, "notes.txt")
	err := h.Driver.InTx(ctx, func(ex sqlstore.Executor) error {
		_, _, err := ex.LeaseGrant(ctx, &sqlstore.LeaseGrantParams{
			Resource: f, Holder: "a", Fence: 3, RequestID: "req", TTL: time.Minute})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, forged := range []fence.Token{
		{Resource: f, Holder: "a", Fence: 1000},
		mustSet(t, "a", 1000, f, mustPath(t, "other.txt")),
	} {
		if err := h.writeFile(ctx, 1, forged, f); !errors.Is(err, gate.ErrFenceNotIssued) {
			t.Fatalf("forged %v writing %s: got %v, want ErrFenceNotIssued", forged, f, err)
		}
	}
	if n := h.count(t, `SELECT count(*) FROM items`); n != 0 {
		t.Fatalf("%d forged writes committed", n)
	}
	if err := h.writeFile(ctx, 2, fence.Token{Resource: f, Holder: "a", Fence: 3}, f); err != nil {
		t.Fatalf("the issued fence: %v", err)
	}
}
