package mysql

import (
	"errors"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/sqlstore"
)

func TestMySQLScan(t *testing.T) {
	for q, want := range map[string]string{
		"insert into t values (1)":           "INSERT",
		"/* x */ -- y\n # z\n CoMmIt":        "COMMIT",
		"SELECT ';' FROM t":                  "SELECT",
		"SELECT 'it''s; ok', \"a;b\", `c;d`": "SELECT",
		`SELECT 'back\'slash; ok'`:           "SELECT",
		"UPDATE t SET v = 1;":                "UPDATE",
		"SELECT 1 --x;\n":                    "SELECT", // "--x" is no comment in MySQL: the ; ends the statement
		"savepoint s":                        "SAVEPOINT",
		"(SELECT 1)":                         "",
	} {
		got, err := mysqlScan(q)
		if err != nil || got != want {
			t.Errorf("mysqlScan(%q) = %q, %v; want %q", q, got, err, want)
		}
	}
	for _, q := range []string{"", " -- only\n", "/* only */", "SELECT 1; SELECT 2", "SELECT 1; -- x\n DELETE FROM t"} {
		if _, err := mysqlScan(q); !errors.Is(err, sqlstore.ErrInvalidStatement) {
			t.Errorf("mysqlScan(%q) = %v, want ErrInvalidStatement", q, err)
		}
	}
}

func FuzzMySQLScan(f *testing.F) {
	for _, q := range []string{"SELECT 1", "COMMIT; SELECT 1", "/* a */ 'b", "`x", "# c\n-- d\nEND"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		first, err := mysqlScan(q)
		if err == nil && strings.ToUpper(first) != first {
			t.Fatalf("mysqlScan(%q) = %q: not upper case", q, first)
		}
	})
}
