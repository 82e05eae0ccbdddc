// Package observe reads the order in which a Postgres server committed
// transactions, from outside fencegate: a logical replication slot with the
// test_decoding plugin. Logical decoding emits each committed transaction
// whole, in commit order, with its commit LSN, whatever locks the
// transaction took or failed to take. That order is the authority the
// checker judges fences against; it does not depend on the floor row's lock,
// which is the thing under test.
//
// The slot is created before a history starts and read, without consuming
// it, after the last crash: a slot is made durable when it is created and
// keeps the WAL it has not confirmed, so a crash of the server loses
// nothing from it.
package observe

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Kinds of Mark.
const (
	Write = "write" // a row of the workload's fg_events with kind 'write'
	Lease = "lease" // a version of a fencegate_lease row: a grant, renewal or release
	Floor = "floor" // a version of a fencegate_floor row
)

// Mark is one row change a committed transaction made that the checker cares
// about.
type Mark struct {
	Kind     string
	Resource string
	Fence    int64 // write: its fence; lease: the lease's fence; floor: the floor
	Holder   string
	OpID     string // write: the operation id

	// Lease only, in database time.
	GrantedAt, ExpiresAt time.Time
	Released             bool
}

// Commit is one committed transaction, as logical decoding emitted it.
type Commit struct {
	Pos   int    // position in commit order, from 0
	LSN   string // the commit's LSN, as Postgres spells it
	Marks []Mark
}

// Slot is a logical replication slot that decodes one database.
type Slot struct {
	Name   string
	schema string
}

// ErrUnsupported is returned by Create when the server cannot decode
// (wal_level below logical, or no replication slot free).
var ErrUnsupported = errors.New("observe: the server does not run logical decoding (wal_level=logical, a free replication slot)")

var identifier = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// Create makes a slot named name that decodes the changes to the tables of
// schema, committed from now on. If the slot exists already, Create uses it.
func Create(ctx context.Context, dsn, name, schema string) (*Slot, error) {
	if !identifier.MatchString(name) || !identifier.MatchString(schema) {
		return nil, fmt.Errorf("observe: %q or %q is not a plain identifier", name, schema)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	var level string
	if err := conn.QueryRow(ctx, `SELECT current_setting('wal_level')`).Scan(&level); err != nil {
		return nil, err
	}
	if level != "logical" {
		return nil, fmt.Errorf("%w: wal_level is %s", ErrUnsupported, level)
	}
	// A retry after a crash finds the slot if its creation was made durable.
	if _, err := conn.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'test_decoding')
	    WHERE NOT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)`, name); err != nil {
		return nil, fmt.Errorf("observe: create slot: %w", err)
	}
	return &Slot{Name: name, schema: schema}, nil
}

// Read returns every transaction committed since the slot was made that
// changed the schema's tables, in commit order. It does not consume them.
func (s *Slot) Read(ctx context.Context, dsn string) ([]Commit, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["timezone"] = "UTC" // test_decoding prints timestamps in the session's zone
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT lsn::text, data FROM pg_logical_slot_peek_changes($1, NULL, NULL,
	    'include-xids', '0', 'skip-empty-xacts', '1')`, s.Name)
	if err != nil {
		return nil, fmt.Errorf("observe: read slot: %w", err)
	}
	defer rows.Close()
	out := []Commit{} // not nil: an observer that saw nothing still saw
	var cur *Commit
	prefix := "table " + s.schema + "."
	for rows.Next() {
		var lsn, data string
		if err := rows.Scan(&lsn, &data); err != nil {
			return nil, err
		}
		switch {
		case data == "BEGIN":
			cur = &Commit{}
		case data == "COMMIT":
			if cur == nil {
				return nil, fmt.Errorf("observe: COMMIT at %s without BEGIN", lsn)
			}
			if len(cur.Marks) > 0 {
				cur.Pos, cur.LSN = len(out), lsn
				out = append(out, *cur)
			}
			cur = nil
		case strings.HasPrefix(data, prefix):
			if cur == nil {
				return nil, fmt.Errorf("observe: change at %s outside a transaction", lsn)
			}
			m, ok, err := parseChange(data[len(prefix):])
			if err != nil {
				return nil, fmt.Errorf("observe: at %s: %w\n%s", lsn, err, data)
			}
			if ok {
				cur.Marks = append(cur.Marks, m)
			}
		}
	}
	return out, rows.Err()
}

// Drop removes the slot, so that the server stops keeping WAL for it.
func (s *Slot) Drop(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, s.Name)
	return err
}

// parseChange turns test_decoding's line for one row change,
// `fg_events: INSERT: id[bigint]:7 kind[text]:'write' …`, into a Mark. It
// reports false for changes the checker does not need (deletes, other
// tables, the workload's raise rows).
func parseChange(s string) (Mark, bool, error) {
	table, rest, ok := strings.Cut(s, ": ")
	if !ok {
		return Mark{}, false, errors.New("no table")
	}
	op, rest, ok := strings.Cut(rest, ": ")
	if !ok || op != "INSERT" && op != "UPDATE" {
		return Mark{}, false, nil
	}
	if _, after, ok := strings.Cut(rest, "new-tuple: "); ok {
		rest = after // the key changed: the old key comes first
	}
	cols, err := parseColumns(rest)
	if err != nil {
		return Mark{}, false, err
	}
	var m Mark
	switch table {
	case "fg_events":
		if cols["kind"] != "write" {
			return Mark{}, false, nil
		}
		m = Mark{Kind: Write, Resource: cols["resource"], Holder: cols["holder"], OpID: cols["op_id"]}
		m.Fence, err = strconv.ParseInt(cols["fence"], 10, 64)
	case "fencegate_lease":
		m = Mark{Kind: Lease, Resource: cols["resource"], Holder: cols["holder"], Released: cols["released"] == "true"}
		m.Fence, err = strconv.ParseInt(cols["fence"], 10, 64)
		if err == nil {
			m.GrantedAt, err = parseTime(cols["granted_at"])
		}
		if err == nil {
			m.ExpiresAt, err = parseTime(cols["expires_at"])
		}
	case "fencegate_floor":
		m = Mark{Kind: Floor, Resource: cols["resource"], Holder: cols["holder"]}
		m.Fence, err = strconv.ParseInt(cols["floor"], 10, 64)
	default:
		return Mark{}, false, nil
	}
	return m, err == nil, err
}

// parseColumns reads `name[type]:value name[type]:'quoted ”value”'`.
func parseColumns(s string) (map[string]string, error) {
	cols := map[string]string{}
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimLeft(s, " ") {
		open := strings.IndexByte(s, '[')
		if open < 0 {
			return nil, fmt.Errorf("no column type in %q", s)
		}
		name := s[:open]
		close := strings.Index(s[open:], "]:")
		if close < 0 {
			return nil, fmt.Errorf("no column value in %q", s)
		}
		s = s[open+close+2:]
		var val string
		if strings.HasPrefix(s, "'") {
			var b strings.Builder
			i := 1
			for ; i < len(s); i++ {
				if s[i] == '\'' {
					if i+1 < len(s) && s[i+1] == '\'' {
						b.WriteByte('\'')
						i++
						continue
					}
					break
				}
				b.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated value of %s", name)
			}
			val, s = b.String(), s[i+1:]
		} else {
			end := strings.IndexByte(s, ' ')
			if end < 0 {
				end = len(s)
			}
			val, s = s[:end], s[end:]
		}
		cols[name] = val
	}
	return cols, nil
}

// ParseLSN reads an LSN as Postgres prints it ("16/B374D848").
func ParseLSN(s string) (uint64, error) {
	hi, lo, ok := strings.Cut(s, "/")
	h, err1 := strconv.ParseUint(hi, 16, 32)
	l, err2 := strconv.ParseUint(lo, 16, 32)
	if !ok || err1 != nil || err2 != nil {
		return 0, fmt.Errorf("observe: %q is not an LSN", s)
	}
	return h<<32 | l, nil
}

func parseTime(v string) (time.Time, error) {
	return time.Parse("2006-01-02 15:04:05.999999-07", v)
}
