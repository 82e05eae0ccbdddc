// Package postgres holds fencegate's goose migrations for Postgres, the SQL
// files of this folder, embedded (FS). The drivers pgxv5 and pgsql run them
// (Migrate) with the version table fencegate_goose_version; an application
// that runs goose itself can run them in its own flow, or with the goose
// command line:
//
//	goose -dir "$(go list -m -f '{{.Dir}}' github.com/fencegate/fencegate)/migrations/postgres" \
//	    -table fencegate_goose_version postgres "$DSN" up
//
// # Versions
//
// Versions are never renumbered and never reused: every database records
// the versions it applied, so a renumbered file would run twice, and a
// reused number would be skipped where the old file ran.
//
// Version 8 is unused. The waiter-turn migration was first numbered 00008
// after fencegate_grant had already taken 00009; a database at 00009 would
// have refused 00008 as a missing migration, so it became 00010. A database
// that ran the old 00008 records version 8, so no later migration takes it.
// A test of package migrations fails on any other gap.
package postgres
