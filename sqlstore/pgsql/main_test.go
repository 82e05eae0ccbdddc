package pgsql_test

import (
	"os"
	"testing"

	"github.com/fencegate/fencegate/internal/dbtest"
)

// The Examples write to invoices on Postgres (DATABASE_URL, a schema of
// their own).
func TestMain(m *testing.M) {
	os.Exit(dbtest.PostgresExamples(m, `
		CREATE TABLE invoices (id int PRIMARY KEY, state text NOT NULL);
		INSERT INTO invoices VALUES (42, 'draft')`))
}
