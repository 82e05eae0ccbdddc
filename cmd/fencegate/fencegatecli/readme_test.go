package fencegatecli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// readmeGo finds the README's ```go blocks.
var readmeGo = regexp.MustCompile("(?s)\n```go\n(.*?)\n```\n")

// readmePreamble makes each block the body of a function returning error,
// with ctx in scope and the imports and helpers the blocks use. The
// package-level store, coord, client and g are the "Step by step" block's,
// which continues the first one: main makes them as the first block does.
// main runs the block numbered by its argument once, then says how many
// writes app.db holds.
const readmePreamble = `package main

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"log"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pressly/goose/v3"

	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/lease"
	fgmigrations "github.com/fencegate/fencegate/migrations/postgres"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
	"github.com/fencegate/fencegate/sqlstore/sqlite"
)

var (
	_ = log.Printf
	_ = time.Second
	_ = os.Getenv
	_ pgx.Tx
	_ = pgxpool.New
	_ = pgxv5.New
	_ = goose.NewProvider
	_ = fgmigrations.FS
)

// The application's own, in the goose snippet.
var (
	db            *sql.DB
	appMigrations fs.FS
)

var (
	store  *sqlite.Driver
	coord  *lease.Coordinator
	client *lease.Client
	g      *gate.Gate[*sql.Tx]
)

// applyTheChange is the reader's write: here, one row more in app.db.
func applyTheChange(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS readme_writes (at TEXT)"); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, "INSERT INTO readme_writes VALUES (datetime('now'))")
	return err
}

func main() {
	ctx := context.Background()
	n, err := strconv.Atoi(os.Args[1])
	if err != nil {
		log.Fatal(err)
	}
	if store, err = sqlite.Open(ctx, "app.db"); err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	coord = lease.NewCoordinator(store, &lease.CoordinatorOptions{TTL: 30 * time.Second})
	g = gate.New(store, &gate.Options{VerifyIssued: true})
	if client, err = lease.NewClient(&lease.ClientOptions{Holder: "agent-a"}); err != nil {
		log.Fatal(err)
	}
	if err := snippets[n-1](ctx); err != nil {
		log.Fatalf("README snippet %d: %v", n, err)
	}
	var writes int
	if err := store.DB().QueryRowContext(ctx, "SELECT count(*) FROM readme_writes").Scan(&writes); err != nil {
		log.Fatal(err)
	}
	fmt.Println("writes:", writes)
}
`

// TestReadmeGoCompiles builds every Go snippet in README.md, each as the
// body of a func(ctx context.Context) error, so the README cannot drift from
// the API; then it runs each block on SQLite (the first program, and Step
// by step) twice in a row, as a reader trying it would: the second run
// must not be refused by the first's lease, and each must have written.
func TestReadmeGoCompiles(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := readmeGo.FindAllStringSubmatch(string(readme), -1)
	if len(blocks) == 0 {
		t.Fatal("README.md has no ```go block")
	}
	if !strings.Contains(blocks[0][1], "sqlite.Open(") || !strings.Contains(blocks[0][1], "lease.Hold(") {
		t.Fatalf("README.md's first Go block is not the SQLite program with lease.Hold:\n%s", blocks[0][1])
	}
	var src strings.Builder
	src.WriteString(readmePreamble)
	src.WriteString("\nvar snippets = []func(context.Context) error{")
	for i := range blocks {
		fmt.Fprintf(&src, "readmeSnippet%d, ", i+1)
	}
	src.WriteString("}\n")
	for i, b := range blocks {
		fmt.Fprintf(&src, "\nfunc readmeSnippet%d(ctx context.Context) error {\n%s\n}\n", i+1, b[1])
	}
	// Build it as a package inside the module, through an overlay, so it
	// imports fencegate's packages as a user's program would.
	tmp := t.TempDir()
	file := filepath.Join(tmp, "readme.go")
	if err := os.WriteFile(file, []byte(src.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	virtual, err := filepath.Abs(filepath.Join("testdata", "readme", "readme.go"))
	if err != nil {
		t.Fatal(err)
	}
	overlay := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(overlay, fmt.Appendf(nil, `{"Replace": {%q: %q}}`, virtual, file), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(tmp, "readme")
	cmd := exec.Command("go", "build", "-overlay", overlay, "-o", bin, "./testdata/readme")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("README.md's Go does not build: %v\n%s\n--- the program:\n%s", err, out, src.String())
	}

	for i, b := range blocks {
		if strings.Contains(b[1], "pgx") || strings.Contains(b[1], "goose.") {
			continue // it needs a server, or the application's own migrations
		}
		work := t.TempDir() // app.db goes here
		for run := 1; run <= 2; run++ {
			cmd := exec.Command(bin, strconv.Itoa(i+1))
			cmd.Dir = work
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("run %d of README.md's Go block %d: %v\n%s", run, i+1, err, out)
			}
			if want := fmt.Sprintf("writes: %d\n", run); string(out) != want {
				t.Errorf("run %d of README.md's Go block %d printed %q, want %q", run, i+1, out, want)
			}
		}
	}
}

// createdObject finds the tables and sequences a migration creates.
var createdObject = regexp.MustCompile(`(?i)\bCREATE\s+(?:UNLOGGED\s+)?(?:TABLE|SEQUENCE)\s+(?:IF\s+NOT\s+EXISTS\s+)?(fencegate_\w+)`)

// TestReadmeNamesEveryTable: the README's schema section names every table
// (and sequence) any dialect's migrations create, and goose's version table.
func TestReadmeNamesEveryTable(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, schema, ok := strings.Cut(string(readme), "\n## Schema and migrations\n")
	if !ok {
		t.Fatal(`README.md has no "## Schema and migrations" section`)
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
			t.Errorf("README.md's schema section does not name %s (created by %s)", name, from)
		}
	}
}
