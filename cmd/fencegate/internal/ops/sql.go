package ops

import (
	"fmt"

	"github.com/fencegate/fencegate/cmd/fencegate/internal/confined"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/sqlstore"
)

// SQLOutcome describes what a confined write of n statements under token
// did, other than a refusal: a one-line summary and the rows affected when
// it committed, else err saying what committed.
func SQLOutcome(token fence.Token, n int, res confined.Result, err error) (summary string, rows int64, _ error) {
	switch {
	case err == nil:
		for _, r := range res.RowsAffected {
			rows += r
		}
		return fmt.Sprintf("committed under %s fence %d: %d statement%s, %d row%s affected",
			token.Name(), token.Fence, n, Plural(n), rows, Plural(int(rows))), rows, nil
	case res.Outcome == confined.Unknown:
		return "", 0, fmt.Errorf("%w; the connection broke during COMMIT: the statements may or may not have committed", err)
	case res.Outcome == confined.Committed:
		// Only without the write guard: the SQL's own COMMIT went through.
		return "", 0, fmt.Errorf("%w; it committed the statements before it under the fence; the rest did not run", err)
	}
	return "", 0, fmt.Errorf("%w; nothing was committed", err)
}

// RejectionOf turns a refusal into its rejection log record.
func RejectionOf(e *gate.StaleFenceError) sqlstore.Rejection {
	return sqlstore.Rejection{
		Seq: e.Seq, Resource: e.Resource, Fence: e.Fence, Holder: e.Holder,
		Floor: e.Floor, FloorHolder: e.FloorHolder, NotIssued: e.NotIssued, At: e.At,
	}
}

// RejectionText describes a rejection record in one line.
func RejectionText(r sqlstore.Rejection) string { return RefusalOf(r).Text() }

// Text describes the refusal in one line.
func (r RefusalReport) Text() string {
	var what string
	if r.NotIssued {
		what = fmt.Sprintf("%s fence %d was never issued to %q", r.Lock, r.Fence, r.Holder)
	} else {
		what = fmt.Sprintf("%s fence %d from %q is below the floor %d from %q", r.Lock, r.Fence, r.Holder, r.Floor, r.FloorHolder)
	}
	if r.Seq == 0 {
		return what + " (the rejection could not be logged)"
	}
	return fmt.Sprintf("%s (rejection #%d at %s)", what, r.Seq, r.At)
}

// Plural is "s" unless n is 1.
func Plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
