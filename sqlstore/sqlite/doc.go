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
// The user's own settings are kept, within what the guarantee stands on.
// Refused, with an error matching sqlstore.ErrUnsafeSettings:
//
//   - a file SQLite would not lock as every other connection does (nolock=1,
//     immutable=1, the VFSes unix-none, unix-dotfile, unix-namedsem,
//     win32-none, win32-longpath-none): two stores on one file would commit
//     past each other's fences, lose acknowledged writes and corrupt it.
//     DSN refuses these by name (its error matches sqlstore.ErrInvalidDSN
//     too), since a connection cannot tell them afterwards;
//   - journal_mode OFF or MEMORY: a rolled-back or crashed transaction can
//     leave its pages in the file;
//   - synchronous=OFF: an acknowledged commit can be lost to an OS crash;
//   - locking_mode=EXCLUSIVE: the first writer keeps the file locked, and
//     every other connection fails busy.
//
// The last three are read back from every connection as it opens (Open
// and NewConnector check them; use NewConnector for a *sql.DB handed to
// New), whichever parameter or pragma set them: modernc applies _pragma
// values sorted by name and _journal and _sync after them, so the DSN's
// text cannot tell what a connection ends up with. synchronous=NORMAL is
// legal but can lose a commit acknowledged just before an OS crash or
// power loss: DurabilityWarnings (sqlstore.Store.DurabilityWarnings, shown by
// `fencegate status`) reports it. A rollback journal (DELETE, TRUNCATE,
// PERSIST) instead of WAL is kept.
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
