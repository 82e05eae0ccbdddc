package gate_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
)

func TestNewTokenValidates(t *testing.T) {
	tok, err := fence.NewToken("orders/42", "worker-1", 7)
	if err != nil || tok != (fence.Token{Resource: "orders/42", Holder: "worker-1", Fence: 7}) {
		t.Fatalf("NewToken = %+v, %v", tok, err)
	}
	for _, c := range []struct {
		resource, holder string
		fence            int64
	}{
		{"", "h", 1}, {"r", "", 1}, {"r", "h", 0}, {"r", "h", -1}, {"r\x00", "h", 1},
	} {
		tok, err := fence.NewToken(c.resource, c.holder, c.fence)
		if !errors.Is(err, fence.ErrInvalidInput) || tok != (fence.Token{}) {
			t.Errorf("NewToken(%q, %q, %d) = %+v, %v; want the zero Token and ErrInvalidInput", c.resource, c.holder, c.fence, tok, err)
		}
	}
}

// The rule for fences from outside, step by step, in the order a stall
// produces: A is granted fence 1 and reads the counter, its lock expires, B
// is granted fence 2 and reads it too, then A writes, then B. With Commit
// alone both writes are admitted and one increment is lost; admitting each
// fence at acquisition, or reading inside the fenced transaction, loses
// none. The steps run in the test's own order, so the interleaving is the
// same on every run.
func TestOutsideFenceReadThenWrite(t *testing.T) {
	forEachSQLDriver(t, func(t *testing.T, h *harness[*sql.Tx]) {
		ctx := context.Background()
		h.exec(t, `CREATE TABLE counter (id INTEGER PRIMARY KEY, n BIGINT NOT NULL)`)
		a := fence.Token{Resource: "counter", Holder: "a", Fence: 1}
		b := fence.Token{Resource: "counter", Holder: "b", Fence: 2}

		read := func() int64 {
			var n int64
			if err := h.QueryRow(ctx, `SELECT n FROM counter WHERE id = 1`).Scan(&n); err != nil {
				t.Fatalf("read: %v", err)
			}
			return n
		}
		// write sets the counter to n under tok through Commit; with n < 0
		// it reads the counter inside the transaction, after Commit, and
		// adds one.
		write := func(tok fence.Token, n int64) error {
			tx, err := h.Driver.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if err := h.g.Commit(ctx, tx, tok); err != nil {
				return err
			}
			if n < 0 {
				if err := tx.QueryRowContext(ctx, `SELECT n + 1 FROM counter WHERE id = 1`).Scan(&n); err != nil {
					t.Fatal(err)
				}
			}
			if err := h.Exec(ctx, tx, `UPDATE counter SET n = $1 WHERE id = 1`, n); err != nil {
				t.Fatal(err)
			}
			return tx.Commit()
		}
		reset := func(t *testing.T) {
			h.exec(t, `DELETE FROM counter`)
			h.exec(t, `INSERT INTO counter (id, n) VALUES (1, 0)`)
			h.exec(t, `DELETE FROM fencegate_floor`)
			h.exec(t, `DELETE FROM fencegate_rejection`)
		}
		// acks counts the acknowledged increments; a write that is
		// refused must be a *StaleFenceError from A.
		acks := func(t *testing.T, errs ...error) int64 {
			var n int64
			for _, err := range errs {
				var stale *gate.StaleFenceError
				switch {
				case err == nil:
					n++
				case errors.As(err, &stale) && stale.Holder == "a" && stale.Floor == 2:
				default:
					t.Fatalf("write: %v", err)
				}
			}
			return n
		}

		t.Run("CommitAlone", func(t *testing.T) {
			reset(t)
			ra := read() // A, fence 1, then stalls
			rb := read() // B, fence 2
			errA := write(a, ra+1)
			errB := write(b, rb+1)
			if got, final := acks(t, errA, errB), read(); got != 2 || final != 1 {
				t.Fatalf("acknowledged %d, counter %d: the loss this test shows did not happen", got, final)
			}
		})
		t.Run("AdmitAtAcquisition", func(t *testing.T) {
			reset(t)
			if err := h.g.Admit(ctx, a); err != nil {
				t.Fatal(err)
			}
			ra := read()
			if err := h.g.Admit(ctx, b); err != nil {
				t.Fatal(err)
			}
			rb := read()
			errA := write(a, ra+1)
			errB := write(b, rb+1)
			if got, final := acks(t, errA, errB), read(); got != final || errA == nil {
				t.Fatalf("acknowledged %d, counter %d, A's write: %v", got, final, errA)
			}
			if n := h.count(t, `SELECT count(*) FROM fencegate_rejection`); n != 1 {
				t.Fatalf("rejection log has %d rows, want 1", n)
			}
		})
		t.Run("ReadAfterCommit", func(t *testing.T) {
			reset(t)
			// Each write reads the counter after Commit, with the floor row
			// held: A writes, B takes over and writes, A's late write is
			// refused.
			errA1 := write(a, -1)
			errB := write(b, -1)
			errA2 := write(a, -1)
			if got, final := acks(t, errA1, errB, errA2), read(); got != 2 || final != 2 || errA2 == nil {
				t.Fatalf("acknowledged %d, counter %d, A's late write: %v", got, final, errA2)
			}
		})
	})
}

func TestAllRejectionsPagesEveryRecordOnce(t *testing.T) {
	forEachSQLDriver(t, func(t *testing.T, h *harness[*sql.Tx]) {
		ctx := context.Background()
		for _, res := range []string{"r1", "r2"} {
			if err := h.g.Admit(ctx, fence.Token{Resource: res, Holder: "new", Fence: 100}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 7 { // 7 refusals of r1, interleaved with 3 of r2
			if err := h.g.Admit(ctx, fence.Token{Resource: "r1", Holder: "old", Fence: int64(i + 1)}); !errors.Is(err, gate.ErrStaleFence) {
				t.Fatal(err)
			}
			if i%2 == 0 && i < 6 {
				if err := h.g.Admit(ctx, fence.Token{Resource: "r2", Holder: "old", Fence: 1}); !errors.Is(err, gate.ErrStaleFence) {
					t.Fatal(err)
				}
			}
		}
		collect := func(q gate.RejectionQuery) (fences []int64, seqs []int64) {
			for r, err := range h.g.AllRejections(ctx, q) {
				if err != nil {
					t.Fatal(err)
				}
				fences, seqs = append(fences, r.Fence), append(seqs, r.Seq)
			}
			return fences, seqs
		}
		for _, limit := range []int{0, 1, 3, 7, 8} { // pages that end short, exactly full, and one
			fences, seqs := collect(gate.RejectionQuery{Resource: "r1", Limit: limit, Newest: true})
			if fmt.Sprint(fences) != "[1 2 3 4 5 6 7]" {
				t.Fatalf("limit %d: r1's refused fences %v, want [1 2 3 4 5 6 7]", limit, fences)
			}
			for i := 1; i < len(seqs); i++ {
				if seqs[i] <= seqs[i-1] {
					t.Fatalf("limit %d: seqs out of order: %v", limit, seqs)
				}
			}
		}
		if all, _ := collect(gate.RejectionQuery{Limit: 2}); len(all) != 10 {
			t.Fatalf("all resources: %d records, want 10", len(all))
		}
		_, seqs := collect(gate.RejectionQuery{Resource: "r1"})
		if rest, _ := collect(gate.RejectionQuery{Resource: "r1", AfterSeq: seqs[4], Limit: 1}); fmt.Sprint(rest) != "[6 7]" {
			t.Fatalf("after the 5th: %v", rest)
		}
		n := 0
		for range h.g.AllRejections(ctx, gate.RejectionQuery{Limit: 1}) {
			n++
			if n == 2 {
				break
			}
		}
		if n != 2 {
			t.Fatalf("break after 2 ranged %d", n)
		}
		for _, err := range h.g.AllRejections(ctx, gate.RejectionQuery{Resource: "bad\x00"}) {
			if !errors.Is(err, fence.ErrInvalidInput) {
				t.Fatalf("bad resource: %v", err)
			}
		}
	})
}
