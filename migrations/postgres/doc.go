// Package postgres holds fencegate's goose migrations for Postgres, the SQL
// files of this folder, embedded (FS). The drivers pgxv5 and pgsql run them
// (Migrate) with the version table fencegate_goose_version; an application
// that runs goose itself can run them in its own flow, or with the goose
// command line:
//
//	goose -dir "$(go list -m -f '{{.Dir}}' github.com/fencegate/fencegate)/migrations/postgres" \
//	    -table fencegate_goose_version postgres "$DSN" up
//
// # Files
//
//   - 00001_fencegate_gate.sql: the gate's floors and rejections, and the
//     functions a fenced write calls (fencegate_fence, fencegate_refuse,
//     the write guard of confined writes and fenced batches);
//   - 00002_fencegate_lease.sql: the coordinator's fence sequence, leases,
//     requests, waiters and their announcements, semaphores, path claims,
//     and the functions that acquire and hand over a lease;
//   - 00003_fencegate_guard.sql: guarded tables' trigger and refusal;
//   - 00004_fencegate_protocol.sql: the SQL protocol any client calls
//     (docs/SQL.md, version 1): fencegate_claim, fencegate_claim_set,
//     fencegate_renew, fencegate_release, fencegate_check, fencegate_admit,
//     fencegate_log_refusal, fencegate_watch, fencegate_protocol_version.
//
// Each object is created by one file only; package migrations' doc has the
// rule for changes after v0.1.0.
package postgres
