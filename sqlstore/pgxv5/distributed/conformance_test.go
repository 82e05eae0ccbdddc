package distributed_test

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/sqlstoretest"
)

// The profile keeps the driver contract on plain Postgres, at its default
// options (SERIALIZABLE, no counter cache, no listener).
func TestConformance(t *testing.T) {
	sqlstoretest.Exercise(t, func(t testing.TB) sqlstore.Driver[pgx.Tx] { return open(t, "", nil, nil) })
}
