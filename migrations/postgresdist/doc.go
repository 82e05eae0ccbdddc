// Package postgresdist holds fencegate's goose migrations for the
// distributed-SQL profile of the pgx driver (sqlstore/pgxv5/distributed):
// the tables of package postgres's migrations, without what the engines
// that speak the Postgres protocol across many nodes lack. There is no
// sequence (no SERIAL, no identity column): fences, rejection numbers and
// waiter places come from the rows of fencegate_counter, updated in the
// transaction that uses them. There is no trigger and no function, so no
// PL/pgSQL and no LISTEN/NOTIFY. There is no fillfactor and no UNLOGGED
// table.
//
// The files run without a transaction (goose's NO TRANSACTION): some of
// those engines refuse DDL in a transaction, or DDL beside DML in one. So
// every statement is idempotent (IF NOT EXISTS, ON CONFLICT DO NOTHING),
// and a migration cut short is finished by running it again.
//
// The driver runs them with the version table fencegate_goose_version, a
// table of its own shape (no identity column either). This set shares no
// tables' history with package postgres: a database runs one or the other.
//
// One file, 00001_fencegate_baseline.sql, creates every table; package
// migrations' doc has the rule for changes after v0.1.0.
package postgresdist
