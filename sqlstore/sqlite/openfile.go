package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"

	"modernc.org/sqlite"

	"github.com/fencegate/fencegate/sqlstore/internal/sqlexec"
)

// Errors Open returns (wrapped, beside SQLite's own) when the file cannot be
// opened, saying why: SQLite says "unable to open database file" to all of
// them.
var (
	// ErrNoDirectory: the database's directory does not exist, or is not a
	// directory. SQLite creates the file, not its directory.
	ErrNoDirectory = errors.New("fencegate: the SQLite database's directory does not exist")
	// ErrNotAFile: the path names a directory, a device or another file
	// that is not a regular file.
	ErrNotAFile = errors.New("fencegate: the SQLite database is not a regular file")
	// ErrReadOnly: the file or its directory cannot be written (SQLite
	// keeps a WAL database's -wal and -shm files beside it). OpenReadOnly
	// can still read it.
	ErrReadOnly = errors.New("fencegate: the SQLite database cannot be written")
)

// whyUnopenable says why a fencegate database at path cannot be opened for
// writing, or returns nil when nothing about the file stands in the way.
// writable reports, as access(2) with W_OK does, whether a path can be
// written.
func whyUnopenable(path string, writable func(string) error) error {
	dir := filepath.Dir(path)
	fi, err := os.Stat(path)
	switch {
	case err == nil && !fi.Mode().IsRegular():
		what := "not a regular file"
		if fi.IsDir() {
			what = "a directory"
		}
		return fmt.Errorf("%w: %s is %s", ErrNotAFile, path, what)
	case err == nil:
		if werr := writable(path); werr != nil {
			return fmt.Errorf("%w: %s: %v", ErrReadOnly, path, werr)
		}
	}
	switch di, err := os.Stat(dir); {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %s (SQLite creates the file, not its directory)", ErrNoDirectory, dir)
	case err == nil && !di.IsDir():
		return fmt.Errorf("%w: %s is not a directory", ErrNoDirectory, dir)
	}
	if werr := writable(dir); werr != nil {
		return fmt.Errorf("%w: its directory %s cannot be written (%v), and SQLite creates the database's -wal and -shm files there", ErrReadOnly, dir, werr)
	}
	return nil
}

// filePath returns the file a DSN's output names.
func filePath(sqliteDSN string) string {
	u, err := url.Parse(sqliteDSN)
	if err != nil {
		return ""
	}
	return filepath.FromSlash(u.Path)
}

// openWith returns a driver over c once ping opened its first connection.
func openWith(ctx context.Context, c driver.Connector) (*Driver, error) {
	db := sql.OpenDB(c)
	if err := ping(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	return &Driver{sqlexec.NewDriver(db, dialect, db.Close)}, nil
}

// OpenReadOnly opens the SQLite file dsn names for reading only, for a
// command that only reads, when Open failed with ErrReadOnly. It opens the
// file with mode=ro, which reads a WAL database whose -wal and -shm files
// exist. When that fails and there is no -wal file (a read-only directory
// where they cannot be created), it adds immutable=1: SQLite then reads the
// file as it is, without locks, and would not see a writer elsewhere (none
// can write a WAL database without creating a -wal file beside it). Every
// write through the driver fails.
func OpenReadOnly(ctx context.Context, dsn string) (*Driver, error) {
	sqliteDSN, err := DSN(dsn)
	if err != nil {
		return nil, err
	}
	path := filePath(sqliteDSN)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("fencegate: open sqlite %s read-only: %w", dsn, err)
	}
	open := func(params string) (*Driver, error) {
		c, err := sqlite.NewConnector(sqliteDSN + params)
		if err != nil {
			return nil, err
		}
		return openWith(ctx, checkedConnector{c})
	}
	d, err := open("&mode=ro")
	if err != nil {
		if wal, werr := os.Stat(path + "-wal"); errors.Is(werr, fs.ErrNotExist) || werr == nil && wal.Size() == 0 {
			d, err = open("&mode=ro&immutable=1") // the file holds every commit
		}
	}
	if err != nil {
		if why := whyUnopenable(path, func(string) error { return nil }); why != nil {
			err = fmt.Errorf("%w (%w)", why, err)
		}
		return nil, fmt.Errorf("fencegate: open sqlite %s read-only: %w", dsn, err)
	}
	return d, nil
}
