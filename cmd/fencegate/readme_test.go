package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeGo finds the README's ```go blocks.
var readmeGo = regexp.MustCompile("(?s)\n```go\n(.*?)\n```\n")

// readmePreamble makes each block the body of a function returning error,
// with ctx in scope and the imports and helpers the blocks use.
const readmePreamble = `package main

import (
	"context"
	"database/sql"
	"io/fs"
	"log"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/lease"
	fgmigrations "github.com/fencegate/fencegate/migrations/postgres"
	"github.com/fencegate/fencegate/sqlstore/sqlite"
)

var (
	_ = log.Printf
	_ = time.Second
	_ = gate.New[*sql.Tx]
	_ = lease.NewCoordinator
	_ = sqlite.Open
	_ = goose.NewProvider
	_ = fgmigrations.FS
)

// The application's own, in the goose snippet.
var (
	db            *sql.DB
	appMigrations fs.FS
)

func applyTheChange(ctx context.Context, tx *sql.Tx) error { return nil }

func main() {}
`

// TestReadmeGoCompiles builds every Go snippet in README.md, each as the
// body of a func(ctx context.Context) error, so the README cannot drift from
// the API.
func TestReadmeGoCompiles(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
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
	var src strings.Builder
	src.WriteString(readmePreamble)
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
	virtual := filepath.Join(root, "cmd", "fencegate", "testdata", "readme", "readme.go")
	overlay := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(overlay, fmt.Appendf(nil, `{"Replace": {%q: %q}}`, virtual, file), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-overlay", overlay, "-o", os.DevNull, "./testdata/readme")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("README.md's Go does not build: %v\n%s\n--- the program:\n%s", err, out, src.String())
	}
}
