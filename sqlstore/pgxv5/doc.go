// Package pgxv5 is fencegate's driver for Postgres through a pgx/v5 pool: a
// sqlstore.Driver[pgx.Tx], so the gate takes the caller's pgx.Tx unwrapped.
//
//	d := pgxv5.New(pool)     // pool *pgxpool.Pool, still the caller's to close
//	err := d.Migrate(ctx)    // fencegate's tables, idempotent
//	g := gate.New(d, nil)    // *gate.Gate[pgx.Tx]
//	c := lease.NewCoordinator(d, nil)
//
// CommitBatch is the one-round-trip fenced write, a pgx pipeline. The
// batch runs confined: it cannot end its own transaction (a write guard
// turns an early COMMIT into a rollback; transaction control is refused
// with sqlstore.ErrTransactionControl), so nothing of it commits but under
// the fence.
// BeginFenced begins a transaction whose first round trip carries BEGIN and
// the fence, so a fenced transaction costs the round trips of an unfenced
// one.
//
// The driver links no SQLite and no database/sql driver but pgx's own
// stdlib, which Migrate needs for goose (it registers "pgx/v5", and "pgx"
// when no other pgx version took that name). It shares its SQL, migrations
// and error classification with pgsql, the database/sql Postgres driver.
//
// A grant acknowledged under synchronous_commit=off, or lost in a failover
// to an asynchronous replica, could let a fence be issued twice. Run
// fencegate's tables with synchronous commit.
package pgxv5
