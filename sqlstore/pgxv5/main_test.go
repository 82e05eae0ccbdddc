package pgxv5_test

import (
	"os"
	"testing"

	"github.com/fencegate/fencegate/internal/dbtest"
)

// The Examples write to accounts on Postgres (DATABASE_URL, a schema of
// their own).
func TestMain(m *testing.M) {
	os.Exit(dbtest.PostgresExamples(m, `
		CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL);
		INSERT INTO accounts VALUES (42, 100), (43, 100), (44, 100)`))
}
