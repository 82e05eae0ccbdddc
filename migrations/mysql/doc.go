// Package mysql holds fencegate's goose migrations for MySQL and MariaDB,
// the SQL files of this folder, embedded (FS). The mysql driver runs them
// (Migrate) with the version table fencegate_goose_version under a
// GET_LOCK of its own; an application that runs goose itself can run them
// in its own flow, or with the goose command line, whose DSN is
// go-sql-driver's form, not a mysql:// URL:
//
//	goose -dir "$(go list -m -f '{{.Dir}}' github.com/fencegate/fencegate)/migrations/mysql" \
//	    -table fencegate_goose_version mysql "user:password@tcp(127.0.0.1:3306)/app" up
//
// MySQL commits every DDL statement on its own, so no migration here is
// atomic; each statement is idempotent instead, and a run cut short is
// finished by the next.
//
// 00001_fencegate_baseline.sql creates every table;
// 00002_fencegate_protocol.sql the stored procedures of the SQL protocol
// (docs/SQL.md), which clients in any language CALL and the Go driver
// calls for its fence check and refusal log. Package migrations' doc has
// the rule for changes after v0.1.0.
package mysql
