// Package sqlite is fencegate's SQLite driver, through database/sql and
// modernc.org/sqlite (pure Go, no cgo): a sqlstore.Driver[*sql.Tx].
//
//	d, err := sqlite.Open(ctx, "app.db") // created if missing
//	err = d.Migrate(ctx)                 // fencegate's tables, idempotent
//	g := gate.New(d, nil)                // *gate.Gate[*sql.Tx]
//
// Importing it registers modernc's "sqlite" database/sql driver, and links
// no pgx.
//
// # Settings
//
// Open (and DSN, for a *sql.DB handed to New) set WAL, a busy timeout,
// synchronous(FULL) (a fence acknowledged and then lost to power failure
// could be issued twice) and _txlock=immediate, so write transactions take
// SQLite's single write lock at BEGIN rather than failing with SQLITE_BUSY
// half-way. In-memory databases are refused: fences must outlive the
// process.
//
// SQLite's clock, as fencegate reads it, has whole milliseconds
// (ClockPrecision).
//
// # A clock that never runs backwards
//
// SQLite's "now" is the host's wall clock, which can be stepped back. The
// driver keeps a high-water mark in the database (fencegate_clock): every
// statement that grants, renews or releases a lease, or judges it expired,
// first raises the mark to the wall clock and then uses the mark as now.
// So a lease once judged expired is never renewed nor counted as holding
// the resource after a backward step: the coordinator's clock stands still
// until the wall clock catches up (leases last that much longer in real
// time, which delays rivals but admits no stale holder). A forward step
// expires leases early, as on any database.
package sqlite
