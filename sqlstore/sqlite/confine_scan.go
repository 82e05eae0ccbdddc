package sqlite

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/internal/confine"
)

// sqliteParams returns how many arguments the SQLite statement q takes (the
// highest ?NNN or $NNN, counting each bare ? as one more), and an error matching
// sqlstore.ErrInvalidStatement when q holds no statement, more than one, or named
// parameters. modernc.org/sqlite would run every statement of a string and
// bind the same arguments to each, ignoring extra ones; this scan, which
// follows SQLite's tokenizer (and sqlite3_complete's rule for CREATE TRIGGER
// bodies), keeps a confined write's answers honest. It is not what confines the
// transaction: the authorizer is.
func sqliteParams(q string) (int, error) {
	var (
		statements int
		inStmt     bool     // the current statement has a token
		words      []string // its first words, upper-cased
		trigger    bool     // it is CREATE [TEMP] TRIGGER: only "END ;" ends it
		last       string   // the previous word
		params     int
	)
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			i++
			continue
		case strings.HasPrefix(q[i:], "--"):
			i = confine.LineCommentEnd(q, i)
			continue
		case strings.HasPrefix(q[i:], "/*"):
			i = confine.BlockCommentEnd(q, i)
			continue
		case c == ';':
			if inStmt && (!trigger || last == "END") {
				inStmt, words, trigger = false, nil, false
			}
			last = ""
			i++
			continue
		}
		if !inStmt {
			if statements == 1 {
				return 0, confine.ErrSeveral
			}
			statements, inStmt = statements+1, true
		}
		last = ""
		switch {
		case c == '\'' || c == '"' || c == '`': // quoted, the quote doubled inside
			j := i + 1
			for {
				k := strings.IndexByte(q[j:], c)
				if k < 0 {
					j = len(q)
					break
				}
				j += k + 1
				if j < len(q) && q[j] == c {
					j++
					continue
				}
				break
			}
			i = j
		case c == '[':
			if k := strings.IndexByte(q[i:], ']'); k >= 0 {
				i += k + 1
			} else {
				i = len(q)
			}
		case c == '?':
			j := i + 1
			for j < len(q) && q[j] >= '0' && q[j] <= '9' {
				j++
			}
			if j == i+1 {
				params++
			} else if n, err := strconv.Atoi(q[i+1 : j]); err != nil || n < 1 {
				return 0, fmt.Errorf("%w: bad parameter %q", sqlstore.ErrInvalidStatement, q[i:j])
			} else {
				params = max(params, n)
			}
			i = j
		case c == '$' && i+1 < len(q) && q[i+1] >= '1' && q[i+1] <= '9': // $NNN: modernc binds argument NNN
			j := i + 1
			for j < len(q) && q[j] >= '0' && q[j] <= '9' {
				j++
			}
			if j < len(q) && isIdentByte(q[j]) {
				return 0, fmt.Errorf("%w: named parameters are not supported; use $NNN, ?NNN or ?", sqlstore.ErrInvalidStatement)
			}
			n, err := strconv.Atoi(q[i+1 : j])
			if err != nil {
				return 0, fmt.Errorf("%w: bad parameter %q", sqlstore.ErrInvalidStatement, q[i:j])
			}
			params = max(params, n)
			i = j
		case (c == ':' || c == '@' || c == '$') && i+1 < len(q) && isIdentByte(q[i+1]):
			return 0, fmt.Errorf("%w: named parameters are not supported; use $NNN, ?NNN or ?", sqlstore.ErrInvalidStatement)
		case isIdentByte(c):
			j := i
			for j < len(q) && (isIdentByte(q[j]) || q[j] == '$') {
				j++
			}
			last = strings.ToUpper(q[i:j])
			if len(words) < 4 {
				words = append(words, last)
				trigger = isCreateTrigger(words)
			}
			i = j
		default:
			i++
		}
	}
	if statements == 0 {
		return 0, confine.ErrNoStatement
	}
	return params, nil
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= 0x80 || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// isCreateTrigger reports whether a statement's first words begin
// [EXPLAIN] CREATE [TEMP|TEMPORARY] TRIGGER.
func isCreateTrigger(words []string) bool {
	if len(words) > 0 && words[0] == "EXPLAIN" {
		words = words[1:]
	}
	if len(words) > 1 && words[0] == "CREATE" && (words[1] == "TEMP" || words[1] == "TEMPORARY") {
		words = append([]string{"CREATE"}, words[2:]...)
	}
	return len(words) > 1 && words[0] == "CREATE" && words[1] == "TRIGGER"
}
