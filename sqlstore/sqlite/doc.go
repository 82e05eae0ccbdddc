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
package sqlite
