package pg

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/sqlstore"
)

// leaseChannel is the channel the triggers of migration 00005 notify on,
// with the resource as the payload: a release, a new generation, or a
// waiter leaving a resource's queue.
const leaseChannel = "fencegate_lease"

// ListenLeases listens on conn, which it owns until it returns, for lease
// changes (sqlstore.Notifier). The caller discards conn afterwards: it is
// left listening, or broken.
func ListenLeases(ctx context.Context, conn *pgx.Conn, ready func(), changed func(resource string)) error {
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
			changed(n.Payload)
		}
	}
}
