package sqlite

import (
	"errors"
	"testing"

	"github.com/fencegate/fencegate/sqlstore"
)

func TestSQLiteParams(t *testing.T) {
	for _, c := range []struct {
		sql     string
		params  int
		invalid bool
	}{
		{"SELECT 1", 0, false},
		{"SELECT 1;", 0, false},
		{"SELECT 1; -- trailing comment\n ;", 0, false},
		{"SELECT ?, ?", 2, false},
		{"SELECT ?3, ?", 4, false},
		{"SELECT $2, $1", 2, false},
		{"SELECT '?;', \"a;?\", `b?`, [c?;] /* ?; */ -- ?;\n", 0, false},
		{"SELECT 'it''s; ?'", 0, false},
		{"SELECT a$b FROM t", 0, false},
		{"CREATE TRIGGER r AFTER INSERT ON t BEGIN INSERT INTO u VALUES (?1); DELETE FROM v; END;", 1, false},
		{"create temp trigger r after insert on t begin select 1; end", 0, false},
		{"SELECT 1; SELECT 2", 0, true},
		{"SELECT 1;COMMIT", 0, true},
		{"CREATE TRIGGER r AFTER INSERT ON t BEGIN SELECT 1; END; COMMIT", 0, true},
		{"SELECT :name", 0, true},
		{"SELECT @name", 0, true},
		{"SELECT $name", 0, true},
		{"SELECT ?0", 0, true},
		{"", 0, true},
		{" -- only\n /* comments */ ;", 0, true},
	} {
		n, err := sqliteParams(c.sql)
		if c.invalid != errors.Is(err, sqlstore.ErrInvalidStatement) || (!c.invalid && n != c.params) {
			t.Errorf("sqliteParams(%q) = %d, %v; want %d, invalid %v", c.sql, n, err, c.params, c.invalid)
		}
	}
}

// FuzzSQLiteParams: the scan never panics, and a statement it accepts stays
// accepted with a statement terminator and a comment appended.
func FuzzSQLiteParams(f *testing.F) {
	for _, s := range []string{"SELECT ?1, ?", "SELECT 'a;b'", "CREATE TRIGGER r AFTER INSERT ON t BEGIN SELECT 1; END", "SELECT 1; SELECT 2", "/* x", "'", "[", "?99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := sqliteParams(s)
		if err != nil {
			return
		}
		if n < 0 {
			t.Fatalf("sqliteParams(%q) = %d", s, n)
		}
		if n2, err := sqliteParams(s + "\n;-- end"); err == nil && n2 != n {
			t.Fatalf("sqliteParams(%q) = %d, with a terminator %d", s, n, n2)
		}
	})
}
