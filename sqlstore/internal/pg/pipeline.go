package pg

import (
	"encoding/json"
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// The SQLSTATEs fencegate_refuse raises.
const (
	pgStaleFence = "FG001" // the fence is below the floor; DETAIL: RefusalDetail
	pgNotIssued  = "FG002" // VerifyIssued: no such lease; DETAIL: RefusalDetail, floor null
)

// The pipelined fence is fencegate_fence in its strict form: it admits the
// token exactly like FloorRaise and, when it would not, fails (FG001 stale).
// With VerifyIssued it is the SQL protocol's fence check, fencegate_check
// (docs/SQL.md), which also refuses a fence no lease holds (FG002 never
// issued, or FG001 when it is below the floor). Sent first in a pipeline
// (one Sync), or just after BEGIN, the error makes Postgres skip every later
// statement and roll the transaction back. Both take (resource, fence,
// holder).
const (
	pgPipelineFence         = `SELECT floor FROM fencegate_fence($1, $2, $3, false, true)`
	pgPipelineFenceVerified = `SELECT fencegate_check($1, $3, $2)`
)

// PipelineFenceSQL returns the statement that admits a token in a pipeline,
// taking the arguments (resource, fence, holder). It raises or keeps the
// floor as Executor.FloorRaise does, and holds the floor row locked until the
// transaction ends; a token it does not admit makes it fail with an error
// that AsPipelineRefusal recognises. With verifyIssued it also refuses a
// fence the co-located coordinator never issued.
//
// It needs fencegate_refuse and fencegate_fence (the gate's migration).
func PipelineFenceSQL(verifyIssued bool) string {
	if verifyIssued {
		return pgPipelineFenceVerified
	}
	return pgPipelineFence
}

// PipelineRefusal is what the failing pipelined fence statement reports.
type PipelineRefusal struct {
	Floor       int64  // the floor that refused the token; 0 if NotIssued
	FloorHolder string // its holder; "" if NotIssued
	NotIssued   bool   // VerifyIssued found no lease (resource, holder, fence)
}

// RefusalDetail is the DETAIL of a refusal fencegate_refuse raises (FG001,
// FG002), a JSON object (docs/SQL.md, fencegate_check); Floor and
// FloorHolder are null for FG002.
type RefusalDetail struct {
	Resource    string  `json:"resource"`
	Fence       int64   `json:"fence"`
	Holder      string  `json:"holder"`
	Floor       *int64  `json:"floor"`
	FloorHolder *string `json:"floor_holder"`
}

// AsPipelineRefusal reports whether err is the refusal raised by the
// statement of PipelineFenceSQL, and what it said.
func AsPipelineRefusal(err error) (PipelineRefusal, bool) {
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	if !ok {
		return PipelineRefusal{}, false
	}
	switch pgErr.Code {
	case pgNotIssued:
		return PipelineRefusal{NotIssued: true}, true
	case pgStaleFence:
		var d RefusalDetail
		if json.Unmarshal([]byte(pgErr.Detail), &d) != nil || d.Floor == nil || d.FloorHolder == nil {
			return PipelineRefusal{}, false
		}
		return PipelineRefusal{Floor: *d.Floor, FloorHolder: *d.FloorHolder}, true
	}
	return PipelineRefusal{}, false
}

// The SQLSTATEs of a fenced batch's write guard (fencegate_fence_batch),
// and Postgres's own for a procedure or DO block that tried to end the
// transaction block.
const (
	pgWriteGuard       = "FG003" // a COMMIT before the guard was released
	pgBatchEnded       = "FG004" // the guard was gone at release: a ROLLBACK
	pgBatchNested      = "FG005" // the batch ran in a savepoint
	pgInvalidTxnEnding = "2D000" // invalid transaction termination
)

// BatchFenceSQL admits a token in a pipeline as PipelineFenceSQL does, and
// first arms the batch's write guard (a row of fencegate_batch_guard): until
// BatchReleaseSQL runs in the transaction, any COMMIT of it fails and rolls
// it back. It takes (resource, fence, holder, verifyIssued) and fails as
// PipelineFenceSQL does, or, in a savepoint, with an error AsBatchGuard
// reports as nested.
//
// It needs the gate's migration (fencegate_fence_batch, the batch guard).
const BatchFenceSQL = `SELECT fencegate_fence_batch($1, $2, $3, $4)`

// BatchReleaseSQL releases the guard BatchFenceSQL armed, last in the
// pipeline; it fails when the guard is gone (the transaction ended).
const BatchReleaseSQL = `SELECT fencegate_batch_release()`

// AsBatchGuard reports whether err is a fenced batch's refusal to end or
// nest its transaction: the guard failing a COMMIT, the release finding the
// guard gone, or a procedure or DO block refused an end of the transaction
// block (ok); nested when the batch ran in a savepoint. The transaction
// was rolled back.
func AsBatchGuard(err error) (nested, ok bool) {
	pgErr, isPg := errors.AsType[*pgconn.PgError](err)
	if !isPg {
		return false, false
	}
	switch pgErr.Code {
	case pgBatchNested:
		return true, true
	case pgWriteGuard, pgBatchEnded, pgInvalidTxnEnding:
		return false, true
	}
	return false, false
}
