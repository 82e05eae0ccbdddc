package pg

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/sqlstore"
)

// leaseChannel is the channel the triggers of migration 00005 notify on,
// with the resource as the payload: a release, a new generation, or a
// waiter leaving a resource's queue. Since migration 00010 only a release
// or the first waiter leaving while the lease is free, and the payload is
// resource, sep, the first live waiter's place (empty when none is queued),
// sep, the schema of the tables.
const leaseChannel = "fencegate_lease"

// sep separates the fields of an announcement: a control character, which
// no resource name holds.
const sep = "\x1f"

// schemaSQL names the schema this session's fencegate_lease is in: the one
// whose announcements concern the listener.
const schemaSQL = `
SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.oid = 'fencegate_lease'::regclass`

// ListenLeases listens on conn, which it owns until it returns, for lease
// changes (sqlstore.Store.ListenLeases). The caller discards conn
// afterwards: it is left listening, or broken.
func ListenLeases(ctx context.Context, conn *pgx.Conn, ready func(), changed func(sqlstore.LeaseChange)) error {
	var schema string
	if err := conn.QueryRow(ctx, schemaSQL).Scan(&schema); err != nil {
		return fmt.Errorf("fencegate: listen for lease changes: find the schema: %w", sqlstore.WithClass(err, Classify(err)))
	}
	if _, err := conn.Exec(ctx, "LISTEN "+leaseChannel); err != nil {
		return fmt.Errorf("fencegate: listen for lease changes: %w", sqlstore.WithClass(err, Classify(err)))
	}
	ready()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("fencegate: listen for lease changes: %w", errors.Join(ctx.Err(), err))
			}
			return fmt.Errorf("fencegate: listen for lease changes: %w", sqlstore.WithClass(err, Classify(err)))
		}
		if n.Channel != leaseChannel {
			continue
		}
		if ch, ours := ParseLeaseChange(n.Payload, schema); ours {
			changed(ch)
		}
	}
}

// ParseLeaseChange reads an announcement's payload for a listener on
// schema's tables, and reports whether it is ours: another schema's is not.
// A payload of migration 00005's triggers (the resource alone) may be
// anyone's, so it is taken, naming no waiter. A place that does not parse is
// left 0 (any waiter may look), never guessed.
func ParseLeaseChange(payload, schema string) (sqlstore.LeaseChange, bool) {
	f := strings.Split(payload, sep)
	if len(f) != 3 {
		return sqlstore.LeaseChange{Resource: f[0]}, true
	}
	if f[2] != schema {
		return sqlstore.LeaseChange{}, false
	}
	seq, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || seq <= 0 {
		seq = 0
	}
	return sqlstore.LeaseChange{Resource: f[0], First: seq}, true
}
