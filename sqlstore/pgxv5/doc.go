// Package pgxv5 is fencegate's driver for Postgres through a pgx/v5 pool: a
// sqlstore.Driver[pgx.Tx], so the gate takes the caller's pgx.Tx unwrapped.
//
//	d := pgxv5.New(pool)     // pool *pgxpool.Pool, still the caller's to close
//	err := d.Migrate(ctx)    // fencegate's tables, idempotent
//	g := gate.New(d, nil)    // *gate.Gate[pgx.Tx]
//	c := lease.NewCoordinator(d, nil)
//
// FloorRaiseBatch and BeginFloorRaise are the driver's pipelines: the fence
// statement travels with a batch's statements and its COMMIT, or with
// BEGIN, in one round trip. The gate's entry points over them, with its
// refusal log and instruments, are pgxgate.CommitBatch and
// pgxgate.BeginFenced (package github.com/fencegate/fencegate/gate/pgxgate).
// This package imports neither gate nor lease.
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
