package gate_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/internal/dbtest"
)

func mustSet(t *testing.T, holder string, n int64, resources ...string) fence.Token {
	t.Helper()
	tok, err := fence.NewSetToken(resources, holder, n)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func mustPath(t *testing.T, rel string) string {
	t.Helper()
	r, err := fence.PathResource(rel)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// writeFile commits one item under token through CommitFile.
func (h *harness[TTx]) writeFile(ctx context.Context, id int, tok fence.Token, file string) error {
	tx, err := h.Driver.Begin(ctx)
	if err != nil {
		return err
	}
	defer h.Driver.Rollback(ctx, tx)
	if err := h.g.CommitFile(ctx, tx, tok, file); err != nil {
		return err
	}
	if err := h.Exec(ctx, tx, `INSERT INTO items (id, resource, fence, holder) VALUES ($1, $2, $3, $4)`,
		id, file, tok.Fence, tok.Holder); err != nil {
		return err
	}
	return h.Driver.Commit(ctx, tx)
}

func TestCommitSet(t *testing.T) {
	forEachDriver(t, testCommitSet[*sql.Tx], testCommitSet[pgx.Tx])
}

// A set token raises every member's floor; it is refused when any member is
// stale, each stale member logged with both holders, and nothing commits.
func testCommitSet[TTx any](t *testing.T, dh dbtest.Harness[TTx]) {
	ctx := context.Background()
	h := newHarness(t, dh, nil)
	set5 := mustSet(t, "a", 5, "x", "y", "z")
	if err := h.write(ctx, 1, set5); err != nil {
		t.Fatalf("set: %v", err)
	}
	for _, r := range set5.Members() {
		if f := h.floor(t, r); f.Floor != 5 || f.Holder != "a" {
			t.Fatalf("%s: floor %+v", r, f)
		}
	}
	// b takes y and z over with fence 7; a's set is stale on both.
	if err := h.write(ctx, 2, mustSet(t, "b", 7, "y", "z")); err != nil {
		t.Fatal(err)
	}
	err := h.write(ctx, 3, set5)
	var stale *gate.StaleFenceError
	if !errors.As(err, &stale) || stale.Resource != "y" || stale.Floor != 7 || stale.FloorHolder != "b" || stale.Holder != "a" {
		t.Fatalf("stale set: %v", err)
	}
	if !strings.Contains(err.Error(), `z: stale fence 5 from "a" is below floor 7 from "b"`) {
		t.Fatalf("the error does not name the second stale member: %v", err)
	}
	if n := h.count(t, `SELECT count(*) FROM items WHERE id = 3`); n != 0 {
		t.Fatal("refused set write committed")
	}
	if f := h.floor(t, "x"); f.Floor != 5 {
		t.Fatalf("x's floor moved to %d in a refused transaction", f.Floor)
	}
	rejs, err := h.g.Rejections(ctx, gate.RejectionQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rejs) != 2 || rejs[0].Resource != "y" || rejs[1].Resource != "z" || rejs[1].FloorHolder != "b" || rejs[1].Holder != "a" {
		t.Fatalf("rejections %+v, want y and z", rejs)
	}
	// Admit and Do take sets too.
	if err := h.g.Admit(ctx, mustSet(t, "c", 9, "x", "y")); err != nil {
		t.Fatal(err)
	}
	if err := h.g.Admit(ctx, mustSet(t, "d", 8, "x", "w")); !errors.Is(err, gate.ErrStaleFence) {
		t.Fatalf("Admit of a set with a stale member: %v", err)
	}
	if _, err := h.g.Floor(ctx, "w"); err == nil {
		t.Fatal("a refused Admit raised another member's floor")
	}
	err = h.g.Do(ctx, mustSet(t, "c", 9, "x", "y"), func(ctx context.Context, tx TTx) error {
		return h.Exec(ctx, tx, `INSERT INTO items (id, resource, fence, holder) VALUES (4, 'x', 9, 'c')`)
	})
	if err != nil || h.count(t, `SELECT count(*) FROM items WHERE id = 4`) != 1 {
		t.Fatalf("Do with a set: %v", err)
	}
}

func TestPathRule(t *testing.T) {
	forEachDriver(t, testPathRule[*sql.Tx], testPathRule[pgx.Tx])
}

// The path rule, with fences from outside (Admit stands for a
// coordinator's grant, which raises its members' floors the same way):
//
//   - grant side: a claim of a directory raises the directory's floor;
//   - write side: a write to a file checks the floors of the directories
//     above it, and is refused when one is above its fence, although the
//     file's own floor is lower; it raises the file's floor.
//
// Siblings never refuse each other. Dropping either half fails this test
// (and lease's TestPathRuleOverCoordinator, with real grants).
func testPathRule[TTx any](t *testing.T, dh dbtest.Harness[TTx]) {
	ctx := context.Background()
	h := newHarness(t, dh, nil)
	ax, by, dir := mustPath(t, "src/a.go"), mustPath(t, "src/b.go"), mustPath(t, "src/")

	a3 := fence.Token{Resource: ax, Holder: "a", Fence: 3}
	if err := h.writeFile(ctx, 1, a3, ax); err != nil {
		t.Fatal(err)
	}
	// A sibling under a lower fence, from another holder: not refused.
	if err := h.writeFile(ctx, 2, fence.Token{Resource: by, Holder: "b", Fence: 2}, by); err != nil {
		t.Fatalf("sibling refused: %v", err)
	}
	// Grant side: d claims src/ with fence 5.
	if err := h.g.Admit(ctx, fence.Token{Resource: dir, Holder: "d", Fence: 5}); err != nil {
		t.Fatal(err)
	}
	err := h.writeFile(ctx, 3, a3, ax)
	var stale *gate.StaleFenceError
	if !errors.As(err, &stale) || stale.Resource != dir || stale.Floor != 5 || stale.FloorHolder != "d" {
		t.Fatalf("a write below a directory claimed with a higher fence: %v", err)
	}
	// Write side: e writes src/c.go under the directory's fence 5 ...
	cz := mustPath(t, "src/c.go")
	if err := h.writeFile(ctx, 4, fence.Token{Resource: dir, Holder: "d", Fence: 5}, cz); err != nil {
		t.Fatal(err)
	}
	if f := h.floor(t, cz); f.Floor != 5 {
		t.Fatalf("the write left %s's floor at %d", cz, f.Floor)
	}
	// A file's last write, under a directory's claim, refuses a lower
	// fence on that file; the claim covers nothing outside it.
	lc := mustPath(t, "lib/c.go")
	if err := h.writeFile(ctx, 5, fence.Token{Resource: lc, Holder: "x", Fence: 4}, lc); err != nil {
		t.Fatal(err)
	}
	if err := h.writeFile(ctx, 6, fence.Token{Resource: dir, Holder: "d", Fence: 6}, lc); !errors.Is(err, gate.ErrNotCovered) {
		t.Fatalf("a file outside the claim: %v", err)
	}
	if err := h.writeFile(ctx, 7, fence.Token{Resource: mustPath(t, "lib/"), Holder: "y", Fence: 6}, lc); err != nil {
		t.Fatal(err)
	}
	if f := h.floor(t, lc); f.Floor != 6 || f.Holder != "y" {
		t.Fatalf("%s's floor after the write under lib/: %+v", lc, f)
	}
	err = h.writeFile(ctx, 8, fence.Token{Resource: lc, Holder: "x", Fence: 4}, lc)
	if !errors.As(err, &stale) || stale.Floor != 6 || stale.FloorHolder != "y" {
		t.Fatalf("a write under a fence below the file's last write: %v", err)
	}
	if n := h.count(t, `SELECT count(*) FROM items WHERE id IN (3, 6, 8)`); n != 0 {
		t.Fatalf("%d refused writes committed", n)
	}
	// A set of a file and another file's directory covers both.
	set := mustSet(t, "s", 9, mustPath(t, "go.mod"), mustPath(t, "docs/"))
	for i, f := range []string{"go.mod", "docs/a/b.md"} {
		if err := h.writeFile(ctx, 10+i, set, mustPath(t, f)); err != nil {
			t.Fatalf("%s under %v: %v", f, set, err)
		}
	}
}

func TestCommitFileBadInput(t *testing.T) {
	forEachDriver(t, testCommitFileBadInput[*sql.Tx], testCommitFileBadInput[pgx.Tx])
}

// A file that is no path of a file, or one the token does not cover, is
// refused before anything runs, and the caller's transaction is rolled back.
func testCommitFileBadInput[TTx any](t *testing.T, dh dbtest.Harness[TTx]) {
	ctx := context.Background()
	h := newHarness(t, dh, nil)
	tok := fence.Token{Resource: mustPath(t, "d/"), Holder: "a", Fence: 3}
	for _, c := range []struct {
		file string
		want error
	}{
		{"plain", fence.ErrInvalidInput},
		{"path:d/", fence.ErrInvalidInput},
		{"path:/etc/passwd", fence.ErrInvalidInput},
		{"path:d/../e", fence.ErrInvalidInput},
		{"path:d/\x00", fence.ErrInvalidInput},
		{"path:d/\xff", fence.ErrInvalidInput},
		{"path:e/x", gate.ErrNotCovered},
		{"path:dx", gate.ErrNotCovered},
	} {
		tx, err := h.Driver.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.g.CommitFile(ctx, tx, tok, c.file); !errors.Is(err, c.want) {
			t.Errorf("CommitFile(%q) = %v, want %v", c.file, err, c.want)
		}
		if err := h.Driver.Commit(ctx, tx); err == nil {
			t.Errorf("CommitFile(%q) left the transaction open", c.file)
		}
	}
	if fs, err := h.g.Floors(ctx); err != nil || len(fs) != 0 {
		t.Fatalf("bad input wrote floors: %v, %v", fs, err)
	}
}

func TestCommitFileVerifiesIssued(t *testing.T) {
	forEachDriver(t, testCommitFileVerifiesIssued[*sql.Tx], testCommitFileVerifiesIssued[pgx.Tx])
}

// Under VerifyIssued a path token the coordinator never issued is refused,
// whether its member is the file itself or a directory above it, and
// raises no floor.
func testCommitFileVerifiesIssued[TTx any](t *testing.T, dh dbtest.Harness[TTx]) {
	ctx := context.Background()
	h := newHarness(t, dh, &gate.Options{VerifyIssued: true})
	file := mustPath(t, "src/a.go")
	for _, tok := range []fence.Token{
		{Resource: file, Holder: "forger", Fence: 99},
		{Resource: mustPath(t, "src/"), Holder: "forger", Fence: 99},
		mustSet(t, "forger", 99, "x", file),
	} {
		if err := h.writeFile(ctx, 1, tok, file); !errors.Is(err, gate.ErrFenceNotIssued) {
			t.Errorf("%v: %v, want ErrFenceNotIssued", tok, err)
		}
	}
	if fs, err := h.g.Floors(ctx); err != nil || len(fs) != 0 {
		t.Fatalf("forged tokens raised floors: %+v, %v", fs, err)
	}
}
