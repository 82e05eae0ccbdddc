package pgxv5

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/internal/pg"
)

var _ sqlstore.DurabilityReporter = (*Driver)(nil)

// DurabilityWarnings reports the settings under which the database can lose
// a commit it acknowledged (see sqlstore.Store.DurabilityWarnings).
func (d *Driver) DurabilityWarnings(ctx context.Context) ([]string, error) {
	rows, err := d.pool.Query(ctx, pg.DurabilitySQL)
	if err == nil {
		var warnings []string
		warnings, err = pgx.CollectRows(rows, pgx.RowTo[string])
		if err == nil {
			return warnings, nil
		}
	}
	return nil, fmt.Errorf("fencegate: read durability settings: %w", d.ClassifyError(err))
}
