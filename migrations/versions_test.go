// Package migrations_test checks the versions of every dialect's
// migrations, which databases in the field have applied: a gap must be
// explained in its package's doc, never closed by renumbering.
package migrations_test

import (
	"io/fs"
	"maps"
	"slices"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/fencegate/fencegate/migrations/mysql"
	"github.com/fencegate/fencegate/migrations/postgres"
	"github.com/fencegate/fencegate/migrations/sqlite"
)

// The versions run from 1 to the last, but for the unused ones each
// package's doc explains.
func TestVersionsHaveNoUnexplainedGap(t *testing.T) {
	for name, c := range map[string]struct {
		fsys   fs.FS
		unused []int64
	}{
		"postgres": {postgres.FS(), []int64{8, 14, 15}}, // 14, 15: other lanes' until the lead renumbers
		"sqlite":   {sqlite.FS(), nil},
		"mysql":    {mysql.FS(), nil},
	} {
		t.Run(name, func(t *testing.T) {
			files, err := fs.Glob(c.fsys, "*.sql")
			if err != nil || len(files) == 0 {
				t.Fatalf("no migrations: %v", err)
			}
			got := map[int64]string{}
			for _, f := range files {
				v, err := goose.NumericComponent(f)
				if err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				if other, ok := got[v]; ok {
					t.Errorf("version %d twice: %s and %s", v, other, f)
				}
				got[v] = f
			}
			last := slices.Max(slices.Collect(maps.Keys(got)))
			for v := int64(1); v <= last; v++ {
				_, present := got[v]
				if unused := slices.Contains(c.unused, v); present == unused {
					t.Errorf("version %d: present %v, want %v (the package doc explains the unused ones)", v, present, !unused)
				}
			}
		})
	}
}
