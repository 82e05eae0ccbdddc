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
// waiter leaving a resource's queue. Since migration 00008 only a release
// or the first waiter leaving while the lease is free, and the payload is
// resource + firstSep + the first live waiter's place, when one is queued.
const leaseChannel = "fencegate_lease"

// firstSep separates the resource from the first waiter's place in an
// announcement: a control character, which no resource name holds.
const firstSep = "\x1f"

// ListenLeases listens on conn, which it owns until it returns, for lease
// changes (sqlstore.Notifier). The caller discards conn afterwards: it is
// left listening, or broken.
func ListenLeases(ctx context.Context, conn *pgx.Conn, ready func(), changed func(sqlstore.LeaseChange)) error {
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
		if n.Channel == leaseChannel {
			changed(ParseLeaseChange(n.Payload))
		}
	}
}

// ParseLeaseChange reads an announcement's payload. A place that does not
// parse is left 0 (any waiter may look), never guessed.
func ParseLeaseChange(payload string) sqlstore.LeaseChange {
	res, first, ok := strings.Cut(payload, firstSep)
	if !ok {
		return sqlstore.LeaseChange{Resource: payload}
	}
	seq, err := strconv.ParseInt(first, 10, 64)
	if err != nil || seq <= 0 {
		seq = 0
	}
	return sqlstore.LeaseChange{Resource: res, First: seq}
}
