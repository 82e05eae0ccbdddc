package sqlstore_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// goTool runs the go command in this package's directory.
func goTool(t *testing.T, args ...string) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to check dependencies: %v", err)
	}
	out, err := exec.Command(gobin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// A program links only the drivers it imports, and only their migrations:
// gate, lease and the command's confined write path
// (cmd/fencegate/internal/confined, which reaches its driver's
// sqlstore.Confiner) import none, a pgx program links no SQLite, a SQLite program no pgx, and neither links
// MySQL's driver, nor a MySQL program either of theirs. The migrations
// packages import nothing of fencegate's, goose's or a database's. The
// library speaks OpenTelemetry's API only: the SDK and the exporters are the
// program's.
func TestProgramsLinkOnlyTheirDriver(t *testing.T) {
	const fg = "github.com/fencegate/fencegate/sqlstore/"
	const mig = "github.com/fencegate/fencegate/migrations/"
	const mysqlDriver = "github.com/go-sql-driver/"
	otelSDK := []string{"go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters"}
	for _, c := range []struct {
		pkgs   []string
		banned []string // import path prefixes
	}{
		{[]string{"../gate", "../lease", "../elect", "../semaphore", "github.com/fencegate/fencegate/cmd/fencegate/internal/confined"}, []string{"github.com/jackc/", "modernc.org/", mysqlDriver, fg + "pgxv5", fg + "pgsql", fg + "sqlite", fg + "mysql", mig}},
		{[]string{"./...", "../gate/...", "../lease", "../elect", "../semaphore", "../internal/..."}, otelSDK},
		// The arrows run one way: gate and lease use the drivers, never the
		// reverse (the pipelined writes over pgx are gate/pgxgate's), and
		// sqlstore imports nothing of the project but fence and the
		// migrations: the helpers of the project's own tests over the
		// drivers are internal/'s (dbtest, mysqltest). The programs under
		// testdata stand for a user's program, not for a package of
		// sqlstore, and are not listed here.
		{[]string{"./..."}, []string{"github.com/fencegate/fencegate/gate", "github.com/fencegate/fencegate/lease", "github.com/fencegate/fencegate/cmd/",
			"github.com/fencegate/fencegate/internal/", "github.com/fencegate/fencegate/elect", "github.com/fencegate/fencegate/semaphore",
			"github.com/fencegate/fencegate/handover", "github.com/fencegate/fencegate/guard", "github.com/fencegate/fencegate/clock"}},
		// gate and lease stand side by side on fence and sqlstore; what
		// needs both (a hand-over) is handover's.
		{[]string{"../gate/..."}, []string{"github.com/fencegate/fencegate/lease", "github.com/fencegate/fencegate/handover"}},
		{[]string{"../lease"}, []string{"github.com/fencegate/fencegate/gate", "github.com/fencegate/fencegate/handover"}},
		// Elections and semaphores are clients of the coordinator, on
		// lease's exported API: neither needs a gate, nor the other.
		{[]string{"../elect"}, []string{"github.com/fencegate/fencegate/gate", "github.com/fencegate/fencegate/handover", "github.com/fencegate/fencegate/semaphore"}},
		{[]string{"../semaphore"}, []string{"github.com/fencegate/fencegate/gate", "github.com/fencegate/fencegate/handover", "github.com/fencegate/fencegate/elect"}},
		{[]string{"../gate/pgxgate"}, []string{"modernc.org/", mysqlDriver, fg + "sqlite", fg + "pgsql", fg + "mysql", mig + "sqlite", mig + "mysql"}},
		{[]string{"./testdata/pgxonly"}, []string{"modernc.org/", mysqlDriver, fg + "sqlite", fg + "pgsql", fg + "mysql", mig + "sqlite", mig + "mysql"}},
		{[]string{"./testdata/sqliteonly"}, []string{"github.com/jackc/", mysqlDriver, fg + "internal/pg", fg + "mysql", mig + "postgres", mig + "mysql"}},
		{[]string{"./testdata/mysqlonly"}, []string{"github.com/jackc/", "modernc.org/", fg + "internal/pg", fg + "sqlite", mig + "postgres", mig + "sqlite"}},
		{[]string{"../migrations/postgres", "../migrations/postgresdist", "../migrations/sqlite", "../migrations/mysql"}, []string{"github.com/fencegate/fencegate/sqlstore", "github.com/fencegate/fencegate/gate", "github.com/fencegate/fencegate/lease", "github.com/fencegate/fencegate/internal", "github.com/pressly/", "github.com/jackc/", "modernc.org/", mysqlDriver}},
	} {
		for _, dep := range strings.Fields(goTool(t, append([]string{"list", "-deps"}, c.pkgs...)...)) {
			for _, b := range c.banned {
				if strings.HasPrefix(dep, b) {
					t.Errorf("%v depends on %s", c.pkgs, dep)
				}
			}
		}
	}
}

// Importing a driver registers no database/sql driver but its own.
func TestProgramsRegisterOnlyTheirDriver(t *testing.T) {
	for pkg, want := range map[string][]string{
		"./testdata/pgxonly":    {"pgx", "pgx/v5"}, // pgx's stdlib, for goose
		"./testdata/sqliteonly": {"sqlite"},
		"./testdata/mysqlonly":  {"mysql"},
	} {
		got := strings.Fields(strings.Trim(strings.TrimSpace(goTool(t, "run", pkg)), "[]"))
		if !slices.Equal(got, want) {
			t.Errorf("%s registers database/sql drivers %v, want %v", pkg, got, want)
		}
	}
}
