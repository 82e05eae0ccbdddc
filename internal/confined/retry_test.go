package confined

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// A statement's own error comes from the database unmarked by any driver:
// Write must still see a serialization failure as retryable.
func TestRetryableReadsNativeErrors(t *testing.T) {
	serialization := &StatementError{Index: 0, Err: &pgconn.PgError{Code: "40001"}}
	if !retryable(serialization) {
		t.Error("a statement's serialization failure is not retried")
	}
	if retryable(&StatementError{Err: &pgconn.PgError{Code: "23505"}}) || retryable(errors.New("x")) {
		t.Error("a unique violation or a plain error is retried")
	}
}
