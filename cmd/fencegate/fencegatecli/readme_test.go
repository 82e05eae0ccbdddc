package fencegatecli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/dbtest"
)

// runMarker, on the line before a ```sh block, says that its lines run as
// written on a fresh database; TestReadmeCommandsRun runs them.
const runMarker = "<!-- readme_test: run -->"

// docFence finds the fenced blocks of a Markdown file, and the run marker
// before one.
var docFence = regexp.MustCompile("(?m)^(" + regexp.QuoteMeta(runMarker) + "\n)?```(\\w*)\n((?s:.*?))\n```$")

// docBlock is one fenced block of the README or a guide.
type docBlock struct {
	file string // relative to the repository's root
	line int    // of the block's first line
	lang string // go, sh, ...
	body string
	run  bool // preceded by runMarker
}

func (b docBlock) String() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

// program reports whether the block is a whole Go program rather than a
// fragment.
func (b docBlock) program() bool { return strings.HasPrefix(b.body, "package main\n") }

// repoRoot is the repository's root, from this package's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// docBlocks returns the fenced blocks of README.md and of the guides under
// docs/, in that order.
func docBlocks(t *testing.T) []docBlock {
	t.Helper()
	root := repoRoot(t)
	guides, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []docBlock
	for _, file := range append([]string{filepath.Join(root, "README.md")}, guides...) {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(root, file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range docFence.FindAllSubmatchIndex(text, -1) {
			blocks = append(blocks, docBlock{
				file: filepath.ToSlash(rel),
				line: strings.Count(string(text[:m[6]]), "\n") + 1,
				lang: string(text[m[4]:m[5]]),
				body: string(text[m[6]:m[7]]),
				run:  m[2] >= 0,
			})
		}
	}
	return blocks
}

// fragmentPreamble makes each Go fragment (a ```go block that is not a
// whole program) the body of a function returning error, with ctx in
// scope, and the names the guides' fragments take as given: the
// application's *sql.DB, goose files, pgx pool, transaction and River job
// (riverfence is a module of the workspace), and the SQLite store,
// coordinator, client and gate of README's first program.
// Fragments are built, not run.
const fragmentPreamble = `package main

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pressly/goose/v3"
	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/gate/pgxgate"
	"github.com/fencegate/fencegate/guard"
	"github.com/fencegate/fencegate/lease"
	fgmigrations "github.com/fencegate/fencegate/migrations/postgres"
	"github.com/fencegate/fencegate/sqlstore/mysql"
	"github.com/fencegate/fencegate/riverfence"
	"github.com/fencegate/fencegate/sqlstore/pgsql"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
	"github.com/fencegate/fencegate/sqlstore/pgxv5/distributed"
	"github.com/fencegate/fencegate/sqlstore/sqlite"
)

var (
	_ = fmt.Sprint
	_ = os.Getenv
	_ = mysql.Open
	_ = pgsql.Open
	_ = time.Second
	_ pgx.Tx
	_ = goose.NewProvider
	_ = otel.SetMeterProvider
	_ = prometheus.New
	_ = sdkmetric.NewMeterProvider
	_ = guard.New
	_ = fgmigrations.FS
	_ = distributed.New
	_ = pgxv5.New
	_ = riverfence.TokenFrom
	_ = pgxgate.BeginFenced
)

var (
	db            *sql.DB
	appMigrations fs.FS
	pool          *pgxpool.Pool
	tx            *sql.Tx
	store         *sqlite.Driver
	coord         *lease.Coordinator
	client        *lease.Client
	g             *gate.Gate[*sql.Tx]
	job           *river.Job[river.JobArgs] // the River job a worker works
)

func main() {}
`

// TestReadmeGoCompiles builds every ```go block of README.md and of the
// guides in docs/, so that none can drift from the API: a whole program
// (package main) as it stands, a fragment as the body of a function. Then
// it runs each program twice in a row, as a reader trying it would, on a
// fresh database: a SQLite file in an empty directory, or a Postgres schema
// of its own (DATABASE_URL) for a program that imports pgx. The second run
// must not be refused by the first's lease.
func TestReadmeGoCompiles(t *testing.T) {
	var programs, fragments []docBlock
	for _, b := range docBlocks(t) {
		switch {
		case b.lang != "go":
		case b.program():
			programs = append(programs, b)
		default:
			fragments = append(fragments, b)
		}
	}
	if len(programs) == 0 || !strings.Contains(programs[0].body, "sqlite.Open(") || !strings.Contains(programs[0].body, "lease.Hold(") {
		t.Fatal("README.md's first Go block is not a whole program on SQLite with lease.Hold")
	}

	// Each block becomes a file of a package inside this module, through
	// an overlay, so it imports fencegate's packages as a user's program
	// would; //line makes the compiler's errors name the Markdown.
	tmp := t.TempDir()
	replace := map[string]string{}
	add := func(pkg, src string) {
		file := filepath.Join(tmp, pkg+".go")
		if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		virtual, err := filepath.Abs(filepath.Join("testdata", "readme", pkg, "main.go"))
		if err != nil {
			t.Fatal(err)
		}
		replace[virtual] = file
	}
	var src strings.Builder
	src.WriteString(fragmentPreamble)
	for i, b := range fragments {
		fmt.Fprintf(&src, "\nfunc fragment%d(ctx context.Context) error {\n//line %s:%d\n%s\n}\n", i+1, b.file, b.line, b.body)
	}
	add("fragments", src.String())
	pkgs := []string{"./testdata/readme/fragments"}
	for i, b := range programs {
		add(fmt.Sprintf("program%d", i+1), fmt.Sprintf("//line %s:%d\n%s\n", b.file, b.line, b.body))
		pkgs = append(pkgs, fmt.Sprintf("./testdata/readme/program%d", i+1))
	}
	var overlay strings.Builder
	overlay.WriteString(`{"Replace": {`)
	sep := ""
	for virtual, file := range replace {
		fmt.Fprintf(&overlay, "%s%q: %q", sep, virtual, file)
		sep = ", "
	}
	overlay.WriteString("}}")
	overlayFile := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(overlayFile, []byte(overlay.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(tmp, "bin")
	build := exec.CommandContext(t.Context(), "go", append([]string{"build", "-overlay", overlayFile, "-o", bin + string(filepath.Separator)}, pkgs...)...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("the Go of README.md and docs/ does not build: %v\n%s", err, out)
	}

	for i, b := range programs {
		t.Run(b.String(), func(t *testing.T) {
			env := os.Environ()
			if strings.Contains(b.body, `"github.com/jackc/pgx/v5`) {
				env = append(env, "DATABASE_URL="+dbtest.PostgresSchemaURL(t))
			}
			work := t.TempDir() // app.db goes here
			for run := 1; run <= 2; run++ {
				cmd := exec.CommandContext(t.Context(), filepath.Join(bin, fmt.Sprintf("program%d", i+1)))
				cmd.Dir, cmd.Env = work, env
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("run %d of the program at %s: %v\n%s", run, b, err, out)
				}
				t.Logf("run %d: %s", run, out)
			}
		})
	}
}

// TestReadmeCommandsRun runs the command lines README.md and the guides mark
// as runnable, and those the demo suggests, with the fencegate command on
// PATH, in an empty directory (so on a fresh .fencegate.db), and on a fresh
// Postgres schema: each twice in a row, under sh -e.
func TestReadmeCommandsRun(t *testing.T) {
	scripts := map[string]string{"the demo's suggestion": demoTryItLines(t)}
	for _, b := range docBlocks(t) {
		if b.run {
			scripts[b.String()] = b.body
		}
	}
	if len(scripts) < 2 {
		t.Fatal("README.md marks no command lines to run (" + runMarker + ")")
	}
	bin := binary(t)
	path := filepath.Dir(bin) + string(os.PathListSeparator) + os.Getenv("PATH")
	for name, script := range scripts {
		for _, db := range []string{"sqlite", "postgres"} {
			t.Run(name+"/"+db, func(t *testing.T) {
				env := []string{"PATH=" + path, envDSN + "="}
				if db == "postgres" {
					env = append(env, envDSN+"="+dbtest.PostgresSchemaURL(t))
				}
				work := t.TempDir()
				for run := 1; run <= 2; run++ {
					cmd := exec.CommandContext(t.Context(), "sh", "-e", "-c", script)
					cmd.Dir, cmd.Env = work, append(os.Environ(), env...)
					out, err := cmd.CombinedOutput()
					if err != nil {
						t.Fatalf("run %d of %s on %s: %v\n%s\n--- the lines:\n%s", run, name, db, err, out, script)
					}
				}
			})
		}
	}
}

// demoTryItLines returns the command lines the demo suggests, unindented.
func demoTryItLines(t *testing.T) string {
	var lines []string
	for _, l := range strings.Split(demoTryIt, "\n") {
		if cmd, ok := strings.CutPrefix(l, "   "); ok {
			lines = append(lines, cmd)
		}
	}
	if len(lines) == 0 {
		t.Fatalf("the demo suggests no command lines:\n%s", demoTryIt)
	}
	return strings.Join(lines, "\n")
}

// createdObject finds the tables and sequences a migration creates.
var createdObject = regexp.MustCompile(`(?i)\bCREATE\s+(?:UNLOGGED\s+)?(?:TABLE|SEQUENCE)\s+(?:IF\s+NOT\s+EXISTS\s+)?(fencegate_\w+)`)

// TestReadmeNamesEveryTable: the migrations guide's table of tables names
// every table (and sequence) any dialect's migrations create, and goose's
// version table.
func TestReadmeNamesEveryTable(t *testing.T) {
	root := repoRoot(t)
	guide, err := os.ReadFile(filepath.Join(root, "docs", "MIGRATIONS.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, schema, ok := strings.Cut(string(guide), "\n## Tables\n")
	if !ok {
		t.Fatal(`docs/MIGRATIONS.md has no "## Tables" section`)
	}
	schema, _, _ = strings.Cut(schema, "\n## ")
	files, err := filepath.Glob(filepath.Join(root, "migrations", "*", "*.sql"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no migrations found")
	}
	names := map[string]string{"fencegate_goose_version": "goose"}
	for _, f := range files {
		sql, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range createdObject.FindAllStringSubmatch(string(sql), -1) {
			names[strings.ToLower(m[1])] = filepath.Base(f)
		}
	}
	for name, from := range names {
		if !strings.Contains(schema, "`"+name+"`") {
			t.Errorf("docs/MIGRATIONS.md's tables do not name %s (created by %s)", name, from)
		}
	}
}
