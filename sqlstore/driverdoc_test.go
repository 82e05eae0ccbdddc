package sqlstore_test

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/sqlstore/mysql"
	"github.com/fencegate/fencegate/sqlstore/pgsql"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
	"github.com/fencegate/fencegate/sqlstore/sqlite"
)

// TestDriverMethodsDocumented: every exported method of each driver's
// *Driver is declared, with a doc comment, in the driver's own package, so
// that "go doc ./sqlstore/sqlite Driver" lists Begin, Commit, Migrate and
// Close, not only what the package adds to a type it embeds.
func TestDriverMethodsDocumented(t *testing.T) {
	for dir, typ := range map[string]reflect.Type{
		"sqlite": reflect.TypeFor[*sqlite.Driver](),
		"pgsql":  reflect.TypeFor[*pgsql.Driver](),
		"pgxv5":  reflect.TypeFor[*pgxv5.Driver](),
		"mysql":  reflect.TypeFor[*mysql.Driver](),
	} {
		documented := map[string]bool{}
		for _, m := range driverDoc(t, dir).Methods {
			documented[m.Name] = strings.TrimSpace(m.Doc) != ""
		}
		for m := range typ.Methods() {
			if ok, declared := documented[m.Name]; !declared {
				t.Errorf("%s: (*Driver).%s comes from an embedded type: go doc does not show it", dir, m.Name)
			} else if !ok {
				t.Errorf("%s: (*Driver).%s has no doc comment", dir, m.Name)
			}
		}
	}
}

// TestDriverExamples: each driver package shows how it is opened, pgxv5
// its pipelines, and gate/pgxgate the one-round-trip writes over them, in
// Example functions (pkg.go.dev and go test -run Example show them; go doc
// does not).
func TestDriverExamples(t *testing.T) {
	for dir, want := range map[string][]string{
		"sqlite":          {"Open"},
		"pgsql":           {"Open"},
		"pgxv5":           {"New", "FloorRaiseBatch", "BeginFloorRaise"},
		"mysql":           {"New", "Config"},
		"../gate/pgxgate": {"CommitBatch", "BeginFenced"},
	} {
		fset := token.NewFileSet()
		var files []*ast.File
		tests, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range tests {
			f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		var have []string
		for _, ex := range doc.Examples(files...) {
			have = append(have, ex.Name)
		}
		for _, name := range want {
			if !slices.Contains(have, name) {
				t.Errorf("%s: no Example%s (has %q)", dir, name, have)
			}
		}
	}
}

// driverDoc reads the documentation of type Driver in package dir.
func driverDoc(t *testing.T, dir string) *doc.Type {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		if name := e.Name(); strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
	}
	p, err := doc.NewFromFiles(fset, files, "github.com/fencegate/fencegate/sqlstore/"+dir)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(p.Types, func(ty *doc.Type) bool { return ty.Name == "Driver" })
	if i < 0 {
		t.Fatalf("%s: no type Driver", dir)
	}
	return p.Types[i]
}
