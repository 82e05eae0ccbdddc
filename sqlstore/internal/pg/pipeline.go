package pg

import (
	"errors"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"
)

// The SQLSTATEs fencegate_refuse raises (migration 00002 for Postgres).
const (
	pgStaleFence = "FG001" // the fence is below the floor; DETAIL: floor, HINT: its holder
	pgNotIssued  = "FG002" // VerifyIssued: no such lease
)

// The pipelined fence is fencegate_fence in its strict form: it admits the
// token exactly like FloorRaise and, when it would not, fails (FG001 stale,
// FG002 never issued). Sent first in a pipeline (one Sync), or just after
// BEGIN, the error makes Postgres skip every later statement and roll the
// transaction back.
const (
	pgPipelineFence         = `SELECT floor FROM fencegate_fence($1, $2, $3, false, true)`
	pgPipelineFenceVerified = `SELECT floor FROM fencegate_fence($1, $2, $3, true, true)`
)

// PipelineFenceSQL returns the statement that admits a token in a pipeline,
// taking the arguments (resource, fence, holder). It raises or keeps the
// floor as Executor.FloorRaise does, and holds the floor row locked until the
// transaction ends; a token it does not admit makes it fail with an error
// that AsPipelineRefusal recognises. With verifyIssued it also refuses a
// fence the co-located coordinator never issued.
//
// It needs migrations 00002 (fencegate_refuse) and 00007 (fencegate_fence).
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
		floor, perr := strconv.ParseInt(pgErr.Detail, 10, 64)
		if perr != nil {
			return PipelineRefusal{}, false
		}
		return PipelineRefusal{Floor: floor, FloorHolder: pgErr.Hint}, true
	}
	return PipelineRefusal{}, false
}
