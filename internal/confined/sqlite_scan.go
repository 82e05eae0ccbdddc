package confined

import (
	"database/sql/driver"
	"fmt"
	"strconv"
	"strings"
)

// sqliteParams returns how many arguments the SQLite statement q takes (the
// highest ?NNN or $NNN, counting each bare ? as one more), and an error matching
// ErrInvalidStatement when q holds no statement, more than one, or named
// parameters. modernc.org/sqlite would run every statement of a string and
// bind the same arguments to each, ignoring extra ones; this scan, which
// follows SQLite's tokenizer (and sqlite3_complete's rule for CREATE TRIGGER
// bodies), keeps Write's answers honest. It is not what confines the
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
			i = lineCommentEnd(q, i)
			continue
		case strings.HasPrefix(q[i:], "/*"):
			i = blockCommentEnd(q, i)
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
				return 0, fmt.Errorf("%w: more than one statement (pass each as its own)", ErrInvalidStatement)
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
				return 0, fmt.Errorf("%w: bad parameter %q", ErrInvalidStatement, q[i:j])
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
				return 0, fmt.Errorf("%w: named parameters are not supported; use $NNN, ?NNN or ?", ErrInvalidStatement)
			}
			n, err := strconv.Atoi(q[i+1 : j])
			if err != nil {
				return 0, fmt.Errorf("%w: bad parameter %q", ErrInvalidStatement, q[i:j])
			}
			params = max(params, n)
			i = j
		case (c == ':' || c == '@' || c == '$') && i+1 < len(q) && isIdentByte(q[i+1]):
			return 0, fmt.Errorf("%w: named parameters are not supported; use $NNN, ?NNN or ?", ErrInvalidStatement)
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
		return 0, fmt.Errorf("%w: no statement, only comments", ErrInvalidStatement)
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

// lineCommentEnd returns where the line comment that starts at q[i] ends:
// after its newline, or at the end of q.
func lineCommentEnd(q string, i int) int {
	if j := strings.IndexByte(q[i:], '\n'); j >= 0 {
		return i + j + 1
	}
	return len(q)
}

// blockCommentEnd returns where the /* comment that starts at q[i] ends:
// after its */, or at the end of q.
func blockCommentEnd(q string, i int) int {
	if j := strings.Index(q[i+2:], "*/"); j >= 0 {
		return i + j + 4
	}
	return len(q)
}

// namedValues converts args as database/sql would for a driver without a
// converter of its own.
func namedValues(args []any) ([]driver.NamedValue, error) {
	out := make([]driver.NamedValue, len(args))
	for i, a := range args {
		v, err := driver.DefaultParameterConverter.ConvertValue(a)
		if err != nil {
			return nil, fmt.Errorf("%w: argument %d: %v", ErrInvalidStatement, i+1, err)
		}
		out[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return out, nil
}
