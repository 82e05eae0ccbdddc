package pg

import (
	"slices"
	"strings"
)

// txControlWords are the statements that begin, end or prepare a
// transaction, by their first word (PREPARE only followed by TRANSACTION).
var txControlWords = []string{"BEGIN", "START", "COMMIT", "END", "ROLLBACK", "ABORT", "PREPARE"}

// TxControl returns the first statement of q that begins, ends or prepares
// a transaction (its first word, "PREPARE TRANSACTION" in full), or "" when
// there is none. It reads every statement of a string of several (the
// simple protocol runs them all), skipping comments, quoted strings and
// identifiers, and dollar-quoted bodies (a DO block's BEGIN is not one).
//
// It is a check in front, for a clear error before anything is sent: what
// it misses, the write guard (fencegate_batch_guard) still refuses.
func TxControl(q string) string {
	start := true // at the start of a statement
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
			if i, _ = blockCommentEnd(q, i); i < 0 {
				return "" // unterminated: Postgres refuses the text
			}
			continue
		case c == ';':
			start = true
			i++
			continue
		}
		if start {
			start = false
			if w := txControlAt(q, i); w != "" {
				return w
			}
		}
		switch {
		case c == '\'':
			i = quotedEnd(q, i+1, '\'', i > 0 && (q[i-1] == 'E' || q[i-1] == 'e'))
		case c == '"':
			i = quotedEnd(q, i+1, '"', false)
		case c == '$':
			i = dollarEnd(q, i)
		default:
			i++
		}
	}
	return ""
}

// txControlAt returns the transaction control word that starts q at i.
func txControlAt(q string, i int) string {
	w := word(q, i)
	for _, t := range txControlWords {
		if !strings.EqualFold(w, t) {
			continue
		}
		if t != "PREPARE" {
			return t
		}
		j := i + len(w)
		for j < len(q) && strings.IndexByte(" \t\n\r\f", q[j]) >= 0 {
			j++
		}
		if strings.EqualFold(word(q, j), "TRANSACTION") {
			return "PREPARE TRANSACTION"
		}
	}
	return ""
}

// word returns the letters at q[i:].
func word(q string, i int) string {
	j := i
	for j < len(q) && (q[j] >= 'a' && q[j] <= 'z' || q[j] >= 'A' && q[j] <= 'Z') {
		j++
	}
	return q[i:j]
}

// quotedEnd returns where the string or identifier whose body starts at
// q[i] ends: after the closing quote (a doubled one is part of the body, as
// is a backslash-escaped one in an E'...' string).
func quotedEnd(q string, i int, quote byte, backslash bool) int {
	for i < len(q) {
		switch {
		case backslash && q[i] == '\\':
			i += 2
		case q[i] == quote && i+1 < len(q) && q[i+1] == quote:
			i += 2
		case q[i] == quote:
			return i + 1
		default:
			i++
		}
	}
	return len(q)
}

// dollarEnd returns where the dollar-quoted string at q[i] ends, or i+1 when
// the $ opens none ($1, a parameter).
func dollarEnd(q string, i int) int {
	j := i + 1
	for j < len(q) && (q[j] == '_' || q[j] >= 'a' && q[j] <= 'z' || q[j] >= 'A' && q[j] <= 'Z' || q[j] >= '0' && q[j] <= '9' || q[j] >= 0x80) {
		j++
	}
	if j >= len(q) || q[j] != '$' || j > i+1 && q[i+1] >= '0' && q[i+1] <= '9' {
		return i + 1
	}
	tag := q[i : j+1]
	if k := strings.Index(q[j+1:], tag); k >= 0 {
		return j + 1 + k + len(tag)
	}
	return len(q)
}

// plainWords are the first words of the statements Vouches accepts: reads
// and writes that cannot begin, end, nest or prepare a transaction (a
// procedure's CALL or a DO block could not end a transaction block either,
// but Vouches leaves them to the write guard).
var plainWords = []string{"SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "VALUES", "TABLE", "MERGE"}

// Vouches reports whether q is surely SQL text whose every statement only
// reads or writes: each starts with one of plainWords followed by a space
// or a parenthesis, and the scan is sure where every string, identifier,
// comment and dollar-quoted body ends. It answers false whenever it is
// unsure: a backslash in a quoted string (standard_conforming_strings off,
// or a typed literal such as date'…', reads it otherwise), a $ right after
// a letter or digit (part of a name, or a dollar quote?), a nested or
// unterminated comment, an unterminated quote. Text that is not a
// statement (the name of a prepared statement pgx would run instead)
// fails the first word. Only a prepared statement named by the text of a
// statement other than its own would pass for that text.
//
// A fenced batch whose statements Vouches accepts needs no write guard on
// the server (pgxv5.FloorRaiseBatch): nothing in it can end its
// transaction.
func Vouches(q string) bool {
	start := true
	statements := 0
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			i++
			continue
		case c == 0:
			return false // the server reads a statement's text up to a NUL
		case strings.HasPrefix(q[i:], "--"):
			i = lineCommentEnd(q, i)
			continue
		case strings.HasPrefix(q[i:], "/*"):
			end, nested := blockCommentEnd(q, i)
			if nested || end < 0 {
				return false
			}
			i = end
			continue
		case c == ';':
			start = true
			i++
			continue
		}
		if start {
			start = false
			statements++
			w := word(q, i)
			j := i + len(w)
			if j >= len(q) || (q[j] != ' ' && q[j] != '\t' && q[j] != '\n' && q[j] != '\r' && q[j] != '\f' && q[j] != '(') {
				return false
			}
			if !slices.ContainsFunc(plainWords, func(p string) bool { return strings.EqualFold(w, p) }) {
				return false
			}
			i = j
			continue
		}
		switch {
		case c == '\'' || c == '"':
			j := i + 1
			for {
				k := strings.IndexByte(q[j:], c)
				if k < 0 {
					return false
				}
				if strings.IndexByte(q[j:j+k], '\\') >= 0 {
					return false
				}
				j += k + 1
				if j < len(q) && q[j] == c { // doubled: part of the body
					j++
					continue
				}
				break
			}
			i = j
		case c == '$':
			if i > 0 && identChar(q[i-1]) {
				return false
			}
			j := i + 1
			for j < len(q) && q[j] != '$' && identChar(q[j]) {
				j++
			}
			if j == len(q) || q[j] != '$' || j > i+1 && q[i+1] >= '0' && q[i+1] <= '9' {
				i++ // a parameter ($1), not a quote
				continue
			}
			tag := q[i : j+1]
			k := strings.Index(q[j+1:], tag)
			if k < 0 {
				return false
			}
			i = j + 1 + k + len(tag)
		default:
			i++
		}
	}
	return statements > 0
}

// lineCommentEnd returns where the -- comment that starts at q[i] ends:
// after the first newline, which for Postgres's lexer is \n or \r.
func lineCommentEnd(q string, i int) int {
	if j := strings.IndexAny(q[i:], "\n\r"); j >= 0 {
		return i + j + 1
	}
	return len(q)
}

// blockCommentEnd returns where the /* comment that starts at q[i] ends,
// read as Postgres's lexer reads it (scan.l): comments nest, a "/*" opens
// one even when its '*' is followed by '/' ("/*/" opens, it does not
// close), and a run of '*' followed by '/' closes one. nested reports a
// comment inside it; end is -1 when the comment never ends (Postgres then
// refuses the text).
func blockCommentEnd(q string, i int) (end int, nested bool) {
	depth := 0
	for i < len(q) {
		switch {
		case strings.HasPrefix(q[i:], "/*"):
			depth++
			nested = nested || depth > 1
			i += 2
		case q[i] == '*':
			for i < len(q) && q[i] == '*' {
				i++
			}
			if i < len(q) && q[i] == '/' {
				i++
				if depth--; depth == 0 {
					return i, nested
				}
			}
		default:
			i++
		}
	}
	return -1, nested
}

// identChar reports whether c can continue a name.
func identChar(c byte) bool {
	return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}
