package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/internal/sqlexec"
)

// sqlitePragmas are set on every pooled SQLite connection. WAL lets readers
// run beside the writer; synchronous(FULL) keeps an acknowledged fence on
// disk through power loss (NORMAL could lose it and reissue the fence); the
// busy timeout queues writers; _txlock=immediate takes the write lock at
// BEGIN, which avoids SQLITE_BUSY on read-then-write transactions.
var sqlitePragmas = []string{"busy_timeout(10000)", "journal_mode(WAL)", "synchronous(FULL)", "foreign_keys(1)"}

// Open opens the SQLite file a path or a "file:" URI names (created if
// missing), with the settings of DSN, each connection checked as
// NewConnector checks it, and returns a driver that owns the connection
// (Close releases it). Open does not migrate; call Migrate. Malformed input
// returns an error matching sqlstore.ErrInvalidDSN; settings that break
// fencegate's guarantee, one matching sqlstore.ErrUnsafeSettings. A file
// that cannot be opened returns an error that says why: ErrNoDirectory,
// ErrNotAFile or ErrReadOnly.
func Open(ctx context.Context, dsn string) (*Driver, error) {
	conn, err := NewConnector(dsn)
	if err != nil {
		return nil, err
	}
	d, err := openWith(ctx, conn)
	if err != nil {
		sqliteDSN, _ := DSN(dsn) // NewConnector checked it
		if why := whyUnopenable(filePath(sqliteDSN), writable); why != nil {
			err = fmt.Errorf("%w (%w)", why, err)
		}
		return nil, fmt.Errorf("fencegate: open sqlite %s: %w", dsn, err)
	}
	return d, nil
}

// openBusyFor bounds ping's retries: the busy timeout of sqlitePragmas.
const openBusyFor = 10 * time.Second

// ping opens db's first connection. Processes opening a new file together
// race to put it in WAL mode (a connection's pragmas run as it opens), and
// SQLite can answer the losers SQLITE_BUSY at once, busy timeout or not;
// nothing was written, so ping tries again, for as long as the busy timeout
// would have waited, or until ctx ends.
func ping(ctx context.Context, db *sql.DB) error {
	deadline := time.Now().Add(openBusyFor)
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		err := db.PingContext(ctx)
		if err == nil || !Classify(err).Retryable || time.Now().After(deadline) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// DSN turns a path or a "file:" URI into a modernc.org/sqlite DSN with the
// settings fencegate needs: WAL, a busy timeout, synchronous(FULL) and
// _txlock=immediate. A DSN shaped like another database's (a URL of another
// scheme, key=value settings, go-sql-driver/mysql's form: the package doc of
// sqlopen lists them) is refused, never taken for a file name. Settings
// already in a URI are kept. A "file:" URI's path
// and parameters are percent-decoded, as SQLite decodes them, before they are
// checked. Anything but a durable file is refused, because fences must
// outlive the process: an empty path, ":memory:", mode=memory, and any vfs
// parameter other than the operating system's file VFSes (memdb, for one).
// So is a file SQLite would not lock as every other connection to it does,
// because two writers could then commit past each other's fences (the error
// matches sqlstore.ErrUnsafeSettings too): nolock=1, immutable=1, and the
// VFSes unix-none, unix-dotfile, unix-namedsem, win32-none and
// win32-longpath-none. The journal mode, synchronous level and locking mode
// a connection ends up with are checked as it opens (NewConnector), not here.
func DSN(dsn string) (string, error) {
	if dsn == "" {
		return "", fmt.Errorf("%w: empty", sqlstore.ErrInvalidDSN)
	}
	if strings.ContainsRune(dsn, 0) {
		return "", fmt.Errorf("%w: contains a NUL byte", sqlstore.ErrInvalidDSN)
	}
	if form, err := sqlexec.FormOf(dsn); err != nil {
		return "", err
	} else if form != sqlexec.SQLite {
		return "", fmt.Errorf("%w: a %s DSN, not a SQLite path or file: URI", sqlstore.ErrInvalidDSN, form)
	}
	path, rawQuery := dsn, ""
	if rest, ok := strings.CutPrefix(dsn, "file:"); ok {
		path, rawQuery, _ = strings.Cut(rest, "?")
		var err error
		if path, err = url.PathUnescape(path); err != nil { // SQLite decodes a URI's path
			return "", fmt.Errorf("%w: %q: %v", sqlstore.ErrInvalidDSN, dsn, err)
		}
	}
	query, err := url.ParseQuery(rawQuery)
	if err != nil {
		return "", fmt.Errorf("%w: %q: %v", sqlstore.ErrInvalidDSN, dsn, err)
	}
	if why := notDurable(path, query); why != "" {
		return "", fmt.Errorf("%w: %q: fencegate needs a durable file, not %s", sqlstore.ErrInvalidDSN, dsn, why)
	}
	if why := unlocked(query); why != "" {
		return "", fmt.Errorf("%w: %q: %w: %s", sqlstore.ErrInvalidDSN, dsn, sqlstore.ErrUnsafeSettings, why)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("%w: %q: %v", sqlstore.ErrInvalidDSN, dsn, err)
	}
	have := map[string]bool{}
	for _, p := range query["_pragma"] {
		// "journal_mode(off)", "journal_mode = off", "main.synchronous=1"
		name, _, _ := strings.Cut(strings.ToLower(p), "=")
		name, _, _ = strings.Cut(name, "(")
		name = strings.TrimSpace(name)
		have[name[strings.LastIndex(name, ".")+1:]] = true
	}
	for _, p := range sqlitePragmas {
		name, _, _ := strings.Cut(p, "(")
		if !have[name] {
			query.Add("_pragma", p)
		}
	}
	if query.Get("_txlock") == "" {
		query.Set("_txlock", "immediate")
	}
	u := url.URL{Scheme: "file", OmitHost: true, Path: filepath.ToSlash(abs), RawQuery: query.Encode()}
	return u.String(), nil
}

// fileVFSes are SQLite's VFSes that keep the database in the named file and
// lock it as every other connection does (unix-excl holds its locks for as
// long as it is open).
var fileVFSes = map[string]bool{"unix": true, "unix-excl": true, "win32": true, "win32-longpath": true}

// unlockedVFSes keep the database in the named file but do not lock it as
// other connections do: the "none" ones take no lock at all, unix-dotfile and
// unix-namedsem take locks a connection on the default VFS never sees.
var unlockedVFSes = map[string]bool{
	"unix-none": true, "unix-dotfile": true, "unix-namedsem": true, "win32-none": true, "win32-longpath-none": true,
}

// notDurable says why a SQLite database at path, opened with the decoded URI
// parameters query, would not outlive its connections ("" when it would): an
// empty path is a temporary database, ":memory:" and mode=memory live in
// memory, and so does any VFS other than the operating system's file ones
// (memdb, or one an application registered). Decided on decoded values, so
// "mod%65=memor%79" is the same as "mode=memory".
func notDurable(path string, query url.Values) string {
	switch {
	case path == "":
		return "a temporary database (empty path)"
	case path == ":memory:":
		return "an in-memory database"
	}
	for _, mode := range param(query, "mode") {
		switch strings.ToLower(mode) {
		case "ro", "rw", "rwc":
		case "memory":
			return "an in-memory database (mode=memory)"
		default:
			return fmt.Sprintf("an unknown mode %q", mode)
		}
	}
	for _, vfs := range param(query, "vfs") {
		if !fileVFSes[vfs] && !unlockedVFSes[vfs] {
			return fmt.Sprintf("the VFS %q (want the operating system's file VFS)", vfs)
		}
	}
	return ""
}

// param returns the values of the URI parameter name under any spelling
// of its case: SQLite reads only the lower-case one, but a check that let
// "Vfs=memdb" through would trust a reader's spelling, so every spelling
// is judged (fail closed).
func param(query url.Values, name string) []string {
	var vs []string
	for key, values := range query {
		if strings.EqualFold(key, name) {
			vs = append(vs, values...)
		}
	}
	return vs
}

// unlocked says why SQLite, opened with the decoded URI parameters query,
// would not lock the file as every other connection to it does ("" when it
// would): a VFS of unlockedVFSes, nolock, or immutable (which also stops it
// seeing other connections' writes). SQLite reads nolock and immutable as
// booleans; any value but a false one counts as set.
func unlocked(query url.Values) string {
	for _, vfs := range param(query, "vfs") {
		if unlockedVFSes[vfs] {
			return fmt.Sprintf("the VFS %q does not lock the file as other connections do", vfs)
		}
	}
	for key, values := range query {
		key = strings.ToLower(key)
		if key != "nolock" && key != "immutable" {
			continue
		}
		for _, v := range values {
			switch strings.ToLower(v) {
			case "0", "no", "off", "false":
			default:
				return fmt.Sprintf("%s=%s turns SQLite's locking off", key, v)
			}
		}
	}
	return ""
}
