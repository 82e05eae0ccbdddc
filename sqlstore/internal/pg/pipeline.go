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

// pgPipelineFence is FloorRaise in a form that fails instead of answering
// no: it admits the token exactly like floorRaise and, when it would not,
// calls fencegate_refuse, which raises. Sent first in a pipeline (one Sync),
// the error makes Postgres skip every later statement and roll the whole
// implicit transaction back. The outer join keeps one row when the
// verified form finds no lease, so that case fails too.
const pgPipelineFenceResult = `, r AS (
  SELECT floor, holder FROM held UNION ALL SELECT floor, holder FROM raised
)
SELECT CASE WHEN r.floor = $2 THEN true
            ELSE fencegate_refuse($1, $3, $2, r.floor, r.holder) END
  FROM (SELECT) AS one LEFT JOIN r ON true`

var (
	pgPipelineFence         = pgFloorCTE + pgPipelineFenceResult
	pgPipelineFenceVerified = pgFloorCTEVerified + pgPipelineFenceResult
)

// PipelineFenceSQL returns the statement that admits a token in a pipeline,
// taking the arguments (resource, fence, holder). It raises or keeps the
// floor as Executor.FloorRaise does, and holds the floor row locked until the
// transaction ends; a token it does not admit makes it fail with an error
// that AsPipelineRefusal recognises. With verifyIssued it also refuses a
// fence the co-located coordinator never issued.
//
// It needs migration 00002 (fencegate_refuse).
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
