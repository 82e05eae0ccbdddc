// Package migrations_test checks every dialect's migrations: versions from
// 1 without a gap, and each SQL object created by one file only.
package migrations_test

import (
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/fencegate/fencegate/migrations/mysql"
	"github.com/fencegate/fencegate/migrations/postgres"
	"github.com/fencegate/fencegate/migrations/postgresdist"
	"github.com/fencegate/fencegate/migrations/sqlite"
)

// dialects are the migrations packages; postgresdist is the
// distributed-SQL profile's own set (sqlstore/pgxv5/distributed).
var dialects = map[string]fs.FS{
	"postgres":     postgres.FS(),
	"postgresdist": postgresdist.FS(),
	"sqlite":       sqlite.FS(),
	"mysql":        mysql.FS(),
}

func sqlFiles(t *testing.T, fsys fs.FS) []string {
	t.Helper()
	files, err := fs.Glob(fsys, "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations: %v", err)
	}
	return files
}

// The versions run from 1 to the last, each once.
func TestVersionsHaveNoGap(t *testing.T) {
	for name, fsys := range dialects {
		t.Run(name, func(t *testing.T) {
			for i, f := range sqlFiles(t, fsys) { // fs.Glob sorts them
				v, err := goose.NumericComponent(f)
				if err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				if v != int64(i+1) {
					t.Errorf("%s: version %d, want %d", f, v, i+1)
				}
			}
		})
	}
}

// creation matches a statement that creates a named object, and a rename,
// which makes one under a new name (group 1 the kind, 2 the name).
var creation = regexp.MustCompile(`(?is)\bCREATE\s+(?:OR\s+REPLACE\s+)?(?:UNLOGGED\s+|TEMP(?:ORARY)?\s+)?(?:CONSTRAINT\s+)?` +
	`(TABLE|FUNCTION|PROCEDURE|TRIGGER|SEQUENCE|(?:UNIQUE\s+)?INDEX|VIEW|TYPE)\s+(?:IF\s+NOT\s+EXISTS\s+)?([\w.]+)` +
	`|\bALTER\s+(TABLE|FUNCTION|PROCEDURE|SEQUENCE|INDEX|VIEW|TYPE)\s+(?:IF\s+EXISTS\s+)?[\w.]+(?:\s*\([^)]*\))?\s+RENAME\s+TO\s+([\w.]+)`)

// redefinitions are the objects a later migration replaces whole, by
// dialect, name and the file that replaces it (package migrations' doc:
// none before v0.1.0, and after it only a whole replacement).
var redefinitions = map[string]string{}

// creations returns, for each object an Up section creates, kind and name
// ("FUNCTION fencegate_fence"), how many times it does.
func creations(up string) map[string]int {
	var code strings.Builder
	for line := range strings.Lines(up) {
		line, _, _ = strings.Cut(line, "--") // comments name objects too
		code.WriteString(line + "\n")
	}
	n := map[string]int{}
	for _, m := range creation.FindAllStringSubmatch(code.String(), -1) {
		kind, name := m[1], m[2]
		if kind == "" {
			kind, name = m[3], m[4]
		}
		kind = strings.ToUpper(strings.Join(strings.Fields(kind), " "))
		kind = strings.TrimPrefix(kind, "UNIQUE ")
		n[kind+" "+strings.ToLower(name)]++
	}
	return n
}

// upSection is a migration's Up part: what a database runs going forward
// (a Down may well create again what its Up dropped).
func upSection(text string) string {
	_, up, _ := strings.Cut(text, "-- +goose Up")
	up, _, _ = strings.Cut(up, "-- +goose Down")
	return up
}

// Every table, index, sequence, function, trigger and procedure is created
// by one migration only, once, so that its one definition is where a
// reader looks; a redefinition is a change of a released schema, and only
// a whole replacement listed in redefinitions.
func TestEachObjectCreatedOnce(t *testing.T) {
	for name, fsys := range dialects {
		t.Run(name, func(t *testing.T) {
			if err := createdOnce(name, fsys); err != nil {
				t.Error(err)
			}
		})
	}
}

// createdOnce reports every object of fsys's migrations that is created
// more than once, with the files that create it.
func createdOnce(dialect string, fsys fs.FS) error {
	by := map[string][]string{}
	files, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return err
	}
	for _, f := range files {
		b, err := fs.ReadFile(fsys, f)
		if err != nil {
			return err
		}
		for obj, n := range creations(upSection(string(b))) {
			for range n {
				by[obj] = append(by[obj], f)
			}
		}
	}
	if len(by["TABLE fencegate_floor"]) == 0 {
		return fmt.Errorf("%s: no creation of fencegate_floor found: the pattern no longer reads the files", dialect)
	}
	var twice []string
	for obj, in := range by {
		if len(in) > 1 && !(len(in) == 2 && redefinitions[dialect+" "+obj] == in[1]) {
			twice = append(twice, fmt.Sprintf("%s created %d times: %s", obj, len(in), strings.Join(in, ", ")))
		}
	}
	if len(twice) == 0 {
		return nil
	}
	slices.Sort(twice)
	return fmt.Errorf("%s:\n%s", dialect, strings.Join(twice, "\n"))
}
