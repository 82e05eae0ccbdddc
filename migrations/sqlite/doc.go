// Package sqlite holds fencegate's goose migrations for SQLite, the SQL
// files of this folder, embedded (FS). The sqlite driver runs them
// (Migrate) with the version table fencegate_goose_version; an application
// that runs goose itself can run them in its own flow, or with the goose
// command line:
//
//	goose -dir "$(go list -m -f '{{.Dir}}' github.com/fencegate/fencegate)/migrations/sqlite" \
//	    -table fencegate_goose_version sqlite3 ./app.db up
//
// One file, 00001_fencegate_baseline.sql, creates every table; package
// migrations' doc has the rule for changes after v0.1.0.
package sqlite
