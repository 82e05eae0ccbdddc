package kitdb

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// ProtocolEnv names a copy of docs/SQL.md whose SQLite statements the
// runners run instead of the repository's (kit/mutant.sh's mutant).
const ProtocolEnv = "FENCEGATE_KIT_SQLITE_PROTOCOL"

// sqlBlock is a named statement of docs/SQL.md: "```sql\n-- Name\n<text>\n```",
// as sqlstore/sqlite's TestSQLiteProtocolIsTheDriversStatements reads it.
var sqlBlock = regexp.MustCompile("(?s)```sql\n-- (\\w+)\n(.*?)\n```")

// SQLiteStatements returns the statements of docs/SQL.md's SQLite section
// by name: the one text the Go driver runs too (the test above holds it to
// that), which the kit's SQLite runners run rather than a copy of their
// own. root is the repository's root; ProtocolEnv overrides the file.
func SQLiteStatements(root string) (map[string]string, error) {
	path := os.Getenv(ProtocolEnv)
	if path == "" {
		path = filepath.Join(root, "docs", "SQL.md")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("kitdb: %w", err)
	}
	_, section, ok := strings.Cut(string(b), "\n## SQLite\n")
	if !ok {
		return nil, fmt.Errorf("kitdb: %s has no SQLite section", path)
	}
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	m := map[string]string{}
	for _, b := range sqlBlock.FindAllStringSubmatch(section, -1) {
		m[b[1]] = b[2]
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("kitdb: %s gives no SQLite statements", path)
	}
	return m, nil
}
