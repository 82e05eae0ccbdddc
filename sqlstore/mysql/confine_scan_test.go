package mysql

import (
	"errors"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/sqlstore"
)

func TestMySQLScan(t *testing.T) {
	for q, want := range map[string]string{
		"insert into t values (1)":                   "INSERT INTO T VALUES",
		"/* x */ -- y\n # z\n CoMmIt":                "COMMIT",
		"SELECT ';' FROM t":                          "SELECT",
		"SELECT 'it''s; ok', \"a;b\", `c;d`":         "SELECT",
		`SELECT 'back\'slash; ok'`:                   "SELECT",
		"UPDATE t SET v = 1;":                        "UPDATE T SET V",
		"SELECT 1 --x;\n":                            "SELECT", // "--x" is no comment in MySQL: the ; ends the statement
		"savepoint s":                                "SAVEPOINT S",
		"(SELECT 1)":                                 "",
		"create /* c */ or replace\ttemporary table": "CREATE OR REPLACE TEMPORARY",
	} {
		got, err := mysqlScan(q)
		if err != nil || strings.Join(got, " ") != want {
			t.Errorf("mysqlScan(%q) = %q, %v; want %q", q, got, err, want)
		}
	}
	for _, q := range []string{"", " -- only\n", "/* only */", "SELECT 1; SELECT 2", "SELECT 1; -- x\n DELETE FROM t"} {
		if _, err := mysqlScan(q); !errors.Is(err, sqlstore.ErrInvalidStatement) {
			t.Errorf("mysqlScan(%q) = %v, want ErrInvalidStatement", q, err)
		}
	}
}

// TestMySQLCheckDDL: DDL, which MySQL commits implicitly and refuses in the
// XA transaction with XAER_RMFAIL, is refused by its first words with an
// answer that says to create tables outside the gate; temporary tables,
// which the XA transaction holds, are not.
func TestMySQLCheckDDL(t *testing.T) {
	d := &Driver{}
	for _, q := range []string{"CREATE TABLE t (a INT)", "create index i on t (a)", "/* x */ ALTER TABLE t ADD b INT", "DROP TABLE t", "RENAME TABLE t TO u", "TRUNCATE t"} {
		err := d.CheckStatement(q)
		if !errors.Is(err, sqlstore.ErrTransactionControl) || !strings.Contains(err.Error(), "commit it implicitly") || !strings.Contains(err.Error(), "create and alter tables outside the gate") {
			t.Errorf("CheckStatement(%q) = %v; want ErrTransactionControl saying to create tables outside the gate", q, err)
		}
	}
	for _, q := range []string{"LOCK TABLES t WRITE", "GRANT SELECT ON *.* TO u", "optimize table t"} {
		if err := d.CheckStatement(q); !errors.Is(err, sqlstore.ErrTransactionControl) || !strings.Contains(err.Error(), "commit it implicitly") {
			t.Errorf("CheckStatement(%q) = %v; want ErrTransactionControl saying it commits implicitly", q, err)
		}
	}
	for _, q := range []string{"CREATE TEMPORARY TABLE z (a INT)", "CREATE OR REPLACE TEMPORARY TABLE z (a INT)", "DROP TEMPORARY TABLE z", "INSERT INTO t VALUES (1)", "UPDATE created SET dropped = 1", "(SELECT 1)", "ANALYZE UPDATE t SET v = 1"} {
		if err := d.CheckStatement(q); err != nil {
			t.Errorf("CheckStatement(%q) = %v; want nil", q, err)
		}
	}
}

func FuzzMySQLScan(f *testing.F) {
	for _, q := range []string{"SELECT 1", "COMMIT; SELECT 1", "/* a */ 'b", "`x", "# c\n-- d\nEND"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		words, err := mysqlScan(q)
		if all := strings.Join(words, " "); err == nil && strings.ToUpper(all) != all {
			t.Fatalf("mysqlScan(%q) = %q: not upper case", q, words)
		}
	})
}
