package sqlite

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// blockRE matches a SQL block of docs/SQL.md whose first line names the
// statement: "```sql\n-- Name\n<text>\n```".
var blockRE = regexp.MustCompile("(?s)```sql\n-- (\\w+)\n(.*?)\n```")

// docStatements are the statements docs/SQL.md's SQLite section must give:
// every one a client runs in the protocol's operations.
var docStatements = []string{
	"ClockTick", "LeaseGetForUpdate", "RequestFence", "FenceNext", "LeaseInsert", "LeaseReplace",
	"RequestInsert", "FloorHeld", "FloorRaise", "FloorHeldVerified", "FloorRaiseVerified",
	"FloorGet", "RejectionInsert", "LeaseRenew", "LeaseRelease", "LeaseGet",
}

// The SQLite section of docs/SQL.md, the protocol for clients in any
// language, gives byte for byte the statements this driver runs: each
// block named after its field of the driver's sqlexec.Queries holds that
// field's text (less the Go literal's leading newline), and every
// statement the protocol's operations run is there.
func TestSQLiteProtocolIsTheDriversStatements(t *testing.T) {
	b, err := os.ReadFile("../../docs/SQL.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	_, section, ok := strings.Cut(doc, "\n## SQLite\n")
	if !ok {
		t.Fatal("docs/SQL.md has no SQLite section")
	}
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	q := reflect.ValueOf(queries).Elem()
	seen := map[string]bool{}
	for _, m := range blockRE.FindAllStringSubmatch(section, -1) {
		name, text := m[1], m[2]
		if seen[name] {
			t.Errorf("docs/SQL.md gives %s twice", name)
		}
		seen[name] = true
		f := q.FieldByName(name)
		if !f.IsValid() || f.Kind() != reflect.String {
			t.Errorf("docs/SQL.md gives %s, which the SQLite driver does not have", name)
			continue
		}
		if want := strings.TrimPrefix(f.String(), "\n"); text != want {
			t.Errorf("docs/SQL.md's %s differs from the driver's:\n--- doc\n%s\n--- driver\n%s", name, text, want)
		}
	}
	for _, name := range docStatements {
		if !seen[name] {
			t.Errorf("docs/SQL.md's SQLite section does not give %s", name)
		}
		if !strings.Contains(section, "`"+name+"`") {
			t.Errorf("docs/SQL.md's SQLite section gives %s but no operation runs it", name)
		}
	}
}
