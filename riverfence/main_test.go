package riverfence_test

import (
	"os"
	"testing"

	"github.com/fencegate/fencegate/internal/dbtest"
)

// The Examples run on Postgres (DATABASE_URL, a schema of their own).
func TestMain(m *testing.M) {
	os.Exit(dbtest.PostgresExamples(m, ""))
}
