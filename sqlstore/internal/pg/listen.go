package pg

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/internal/sqlexec"
)

// leaseChannel is the channel fencegate_lease_notify's triggers notify on:
// a release, or the first waiter leaving while the lease is free. The
// payload is resource, sep, the first live waiter's place (empty when none
// is queued), sep, the schema of the tables.
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
	return WatchLeases(ctx, conn, sqlstore.Watch{}, ready, changed)
}

// watchSchemaSQL is schemaSQL, and whether the schema has the watcher
// table fencegate_watcher (without it every release is announced, and a
// watcher has nothing to register).
const watchSchemaSQL = `
SELECT n.nspname, to_regclass(quote_ident(n.nspname) || '.fencegate_watcher') IS NOT NULL
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.oid = 'fencegate_lease'::regclass`

// The watcher's registration, in this order (fencegate_lease_notify's
// comment in the lease migration says why):
// clear the rows of sessions that are gone, insert this session's row
// (each autocommit, so committed), then wait for any release of the
// resource in flight by taking FOR SHARE on its lease row (its release's
// UPDATE holds the row until it commits), then LISTEN. A prefix watch
// takes no row lock: its listener acquires on waking, which locks.
const (
	watcherClearSQL = `DELETE FROM fencegate_watcher w WHERE NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = w.pid)`
	watcherAddSQL   = `INSERT INTO fencegate_watcher (pid, resource, prefix) VALUES (pg_backend_pid(), $1, $2) ON CONFLICT DO NOTHING`
	watcherWaitSQL  = `SELECT 1 FROM fencegate_lease WHERE resource = $1 FOR SHARE`
	watcherDropSQL  = `DELETE FROM fencegate_watcher WHERE pid = pg_backend_pid()`
)

// watcherDropTimeout bounds the deletion of the watcher row as a watch
// ends; a row left behind costs announcements nobody hears until the next
// watcher clears it.
const watcherDropTimeout = time.Second

// WatchLeases is ListenLeases with w registered as a watcher
// (sqlstore.Store.WatchLeases) before ready; the zero Watch registers
// nothing.
func WatchLeases(ctx context.Context, conn *pgx.Conn, w sqlstore.Watch, ready func(), changed func(sqlstore.LeaseChange)) error {
	var schema string
	var watchers bool
	if err := conn.QueryRow(ctx, watchSchemaSQL).Scan(&schema, &watchers); err != nil {
		return fmt.Errorf("fencegate: listen for lease changes: find the schema: %w", sqlstore.WithClass(err, Classify(err)))
	}
	if w.Resource != "" && watchers {
		if err := register(ctx, conn, w); err != nil {
			return fmt.Errorf("fencegate: listen for lease changes: watch %q: %w", w.Resource, sqlstore.WithClass(err, Classify(err)))
		}
		defer func() {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), watcherDropTimeout)
			defer cancel()
			_, _ = conn.Exec(dctx, watcherDropSQL) // a broken session's row is cleared by the next watcher
		}()
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

func register(ctx context.Context, conn *pgx.Conn, w sqlstore.Watch) error {
	if _, err := conn.Exec(ctx, watcherClearSQL); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, watcherAddSQL, w.Resource, w.Prefix); err != nil {
		return err
	}
	if w.Prefix {
		return nil
	}
	_, err := conn.Exec(ctx, watcherWaitSQL, w.Resource)
	return err
}

// ParseLeaseChange reads an announcement's payload for a listener on
// schema's tables, and reports whether it is ours: another schema's is not.
// A payload of the resource alone may be anyone's, so it is taken, naming
// no waiter. A place that does not parse is left 0 (any waiter may look),
// never guessed. fencegate_hand_over's announcement adds "granted" and the new generation (fence, request id, start and
// expiry in µs): the place was granted the resource. A hand-over's payload
// that does not parse is taken as a plain change.
func ParseLeaseChange(payload, schema string) (sqlstore.LeaseChange, bool) {
	f := strings.Split(payload, sep)
	if len(f) != 3 && len(f) != 8 {
		return sqlstore.LeaseChange{Resource: f[0]}, true
	}
	if f[2] != schema {
		return sqlstore.LeaseChange{}, false
	}
	seq, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || seq <= 0 {
		return sqlstore.LeaseChange{Resource: f[0]}, true
	}
	ch := sqlstore.LeaseChange{Resource: f[0], First: seq}
	if len(f) == 8 && f[3] == "granted" {
		fence, ferr := strconv.ParseInt(f[4], 10, 64)
		granted, gerr := strconv.ParseInt(f[6], 10, 64)
		expires, eerr := strconv.ParseInt(f[7], 10, 64)
		if ferr != nil || gerr != nil || eerr != nil || fence <= 0 || f[5] == "" {
			return ch, true
		}
		ch.Granted = true
		ch.Lease = sqlstore.LeaseRow{Found: true, Resource: f[0], Fence: fence, RequestID: f[5],
			GrantedAt: sqlexec.Micros(granted), ExpiresAt: sqlexec.Micros(expires)}
	}
	return ch, true
}
