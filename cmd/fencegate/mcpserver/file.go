package mcpserver

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fencegate/fencegate/cmd/fencegate/internal/ops"
	"github.com/fencegate/fencegate/cmd/fencegate/internal/pathid"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/sqlstore/sqlopen"
)

// maxPathLen bounds a file write's path.
const maxPathLen = 4096

// mcpWriteTxTimeout bounds a file write's transaction once the request's own
// context no longer does: the floor row wait, the file write (at most
// --max-file-bytes) and the commit.
const mcpWriteTxTimeout = time.Minute

// fileArea is the directory file writes are confined to. Every operation
// goes through an os.Root, which refuses to leave the directory by "..",
// an absolute symlink or a race that swaps a directory for a symlink; the
// checks before the write exist to refuse early, with a clear message.
type fileArea struct {
	root     *os.Root
	ids      *pathid.Root // gives each path its one identity; owns root
	maxBytes int64
	// protect are the database's own files, never written even when they
	// lie under the root (the default database is in the working
	// directory, which is the usual root).
	protect []string
}

// openFileArea opens dir for file writes of at most maxBytes. dsn is the
// database's, whose files are protected when it is SQLite.
func openFileArea(dir, dsn string, maxBytes int64) (*fileArea, error) {
	ids, err := pathid.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("--root: %w", err)
	}
	a := &fileArea{root: ids.OS(), ids: ids, maxBytes: maxBytes}
	if db := sqlopen.SQLiteFile(dsn); db != "" { // absolute, as resolveDSN made it
		dirs := []string{filepath.Dir(db)}
		// The root's own links are resolved: so must the database's
		// directory be, or a file not yet there (the -wal) would not match.
		if real, err := filepath.EvalSymlinks(dirs[0]); err == nil && real != dirs[0] {
			dirs = append(dirs, real)
		}
		for _, dir := range dirs {
			for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
				a.protect = append(a.protect, filepath.Join(dir, filepath.Base(db)+suffix))
			}
		}
	}
	return a, nil
}

// Close closes the root.
func (a *fileArea) Close() error { return a.ids.Close() }

// cleanPath checks a path given by the agent and returns it cleaned,
// relative to the root.
func cleanPath(p string) (string, error) {
	switch {
	case p == "":
		return "", errors.New("missing path: give a path relative to the root, such as docs/notes.md")
	case len(p) > maxPathLen:
		return "", fmt.Errorf("path is %d bytes long, more than %d", len(p), maxPathLen)
	case !utf8.ValidString(p) || strings.ContainsRune(p, 0):
		return "", fmt.Errorf("path %q is not valid UTF-8 or contains a NUL byte", p)
	case filepath.IsAbs(p) || strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`):
		return "", fmt.Errorf("path %q is absolute: give a path relative to the root", p)
	}
	for _, part := range strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == filepath.Separator }) {
		if part == ".." {
			return "", fmt.Errorf("path %q contains \"..\": give a path inside the root without it", p)
		}
	}
	clean := filepath.Clean(p)
	if clean == "." {
		return "", fmt.Errorf("path %q names the root itself: name a file in it", p)
	}
	return clean, nil
}

// checkTarget refuses a target that is not, or would not be, a regular
// file inside the root, before anything is written. exists reports whether
// the file is there; info is its mode then.
func (a *fileArea) checkTarget(rel string) (exists bool, info fs.FileInfo, err error) {
	if dir := filepath.Dir(rel); dir != "." {
		di, err := a.root.Stat(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// Created by the write. A component that is a symlink
			// leading out is still refused then, by the root.
		case err != nil:
			return false, nil, fmt.Errorf("directory of %q is refused: %s (symlinks may not lead out of the root)", rel, pathid.RootError(err))
		case !di.IsDir():
			return false, nil, fmt.Errorf("directory of %q is not a directory", rel)
		}
	}
	fi, err := a.root.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil, a.checkProtected(rel, nil)
	}
	if err != nil {
		return false, nil, fmt.Errorf("path %q is refused: %s (symlinks may not lead out of the root)", rel, pathid.RootError(err))
	}
	switch m := fi.Mode(); {
	case m.IsRegular():
	case m&fs.ModeSymlink != 0:
		target, _ := a.root.Readlink(rel)
		return false, nil, fmt.Errorf("path %q is a symbolic link (to %q): only regular files are written; write to the path it points to, if that is inside the root", rel, target)
	case m.IsDir():
		return false, nil, fmt.Errorf("path %q is a directory: name a file", rel)
	default:
		return false, nil, fmt.Errorf("path %q is a special file (%s): only regular files are written", rel, pathid.KindOf(m))
	}
	return true, fi, a.checkProtected(rel, fi)
}

// checkProtected refuses the database's own files.
func (a *fileArea) checkProtected(rel string, fi fs.FileInfo) error {
	abs := filepath.Join(a.root.Name(), rel)
	if absRoot, err := filepath.Abs(a.root.Name()); err == nil {
		abs = filepath.Join(absRoot, rel)
	}
	for _, p := range a.protect {
		if p == abs {
			return fmt.Errorf("path %q is fencegate's own database: refused", rel)
		}
		if fi != nil {
			if pi, err := os.Stat(p); err == nil && os.SameFile(pi, fi) {
				return fmt.Errorf("path %q is fencegate's own database: refused", rel)
			}
		}
	}
	return nil
}

// fileWrite is one checked file write.
type fileWrite struct {
	rel     string
	mode    string // write, append, delete
	content []byte
	exists  bool
	info    fs.FileInfo // the file's, when it exists
	// recheck, if set, runs just before the change is made and stops it
	// with its error: the path's identity must not have changed since it
	// was checked against the claim.
	recheck func() error
}

// writeFile is the file kind of write. Input is checked first, so a bad
// write touches neither the database nor the disk. Then, in one
// transaction: the gate admits the token (a refusal writes nothing), the
// file is written while the transaction holds the lock's floor row, and
// the transaction commits.
func (s *Server) writeFile(ctx context.Context, token fence.Token, in writeInput) (*mcp.CallToolResult, writeOutput, error) {
	out := writeOutput{Kind: "file", Resource: ops.TokenName(token), Fence: token.Fence}
	if s.files == nil {
		return nil, out, errors.New("file writes are off: the server must be started with --root DIR")
	}
	w := fileWrite{mode: in.Mode, content: []byte(in.Content)}
	switch w.mode {
	case "":
		w.mode = "write"
	case "write", "append":
	case "delete":
		if in.Content != "" {
			return nil, out, errors.New("mode delete takes no content")
		}
	default:
		return nil, out, fmt.Errorf("bad mode %q: want write, append or delete", in.Mode)
	}
	if int64(len(w.content)) > s.files.maxBytes {
		return nil, out, fmt.Errorf("content is %d bytes, more than this server's limit of %d (--max-file-bytes); split it into appends", len(w.content), s.files.maxBytes)
	}
	if _, err := cleanPath(in.Path); err != nil {
		return nil, out, err
	}
	paths := ops.TokenPaths(token)
	if len(paths) == 0 {
		return nil, out, fmt.Errorf("this token claims no paths: it is for %s, and a claim of a plain resource writes no files; claim the file (claim with paths: [%q]) and write with that token", ops.TokenName(token), in.Path)
	}
	// The path's one identity, refused unless the claim covers it, before
	// the disk is touched; resolved again just before the rename.
	target, err := s.files.ids.Target(pathid.ClaimOf(paths), in.Path)
	if err != nil {
		return nil, out, err
	}
	w.rel = target.Disk
	w.recheck = func() error { return s.files.ids.Recheck(target, in.Path) }
	if w.exists, w.info, err = s.files.checkTarget(w.rel); err != nil {
		return nil, out, err
	}
	if w.mode == "delete" && !w.exists {
		return nil, out, fmt.Errorf("path %q does not exist: nothing to delete", w.rel)
	}
	out.Path, out.Mode = target.Name, w.mode
	if err := s.checkLeased(ctx, token); err != nil {
		return nil, out, err
	}

	// The transaction's context is not the request's: a cancelled request
	// must not roll back (and so unlock the floor row) while the file is
	// being renamed into place. The request's context still bounds the
	// wait for the floor row, and the write stops before the rename once
	// it is cancelled. Bounded all the same: a database that stops
	// answering must not hold the request forever (the commit then fails
	// and the answer says the order may be lost).
	txCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), mcpWriteTxTimeout)
	defer cancel()
	tx, err := s.b.Driver.Begin(txCtx)
	if err != nil {
		return nil, out, dbError("write", err)
	}
	if err := ops.CommitFile(ctx, s.b, tx, token, ops.PathResource(target.Name)); err != nil {
		// Commit rolled tx back, whatever the error.
		if stale, ok := errors.AsType[*gate.StaleFenceError](err); ok {
			return s.refused(out, stale)
		}
		if errors.Is(err, fence.ErrInvalidInput) {
			return nil, out, errors.New(stripPrefix(err))
		}
		return nil, out, dbError("write", err)
	}
	size, err := s.files.apply(ctx, w, s.cfg.beforeRename)
	unsynced, _ := errors.AsType[*unsyncedError](err)
	if err != nil && unsynced == nil {
		_ = tx.Rollback()
		s.log.Warn("write failed", "resource", ops.TokenName(token), "fence", token.Fence, "path", w.rel, "err", err)
		return nil, out, fmt.Errorf("%s %q failed, the file is unchanged: %w", w.mode, w.rel, err)
	}
	if err := tx.Commit(); err != nil {
		// The file is in place, but the floor row may have been let go
		// before the rename (a lost connection), so a newer holder may
		// have written first. Say so rather than claim an order.
		s.log.Error("write: commit after the file write failed", "resource", ops.TokenName(token), "fence", token.Fence, "path", w.rel, "err", err)
		return nil, out, fmt.Errorf("%s %q was done under fence %d, but its transaction failed to commit (%v): if the database connection was lost during the write, a newer holder may have written before it; check status", w.mode, w.rel, token.Fence, err)
	}
	out.Written, out.Bytes = true, size
	out.Message = fmt.Sprintf("%s %q under %s fence %d: done (%d bytes)", w.mode, target.Name, ops.TokenName(token), token.Fence, size)
	if unsynced != nil {
		// Done and ordered, so not an error the agent would retry (an
		// append twice); but not known to be on disk.
		out.Message += fmt.Sprintf("; but %v, so the change may not survive a crash of the machine", unsynced)
		s.log.Warn("write: directory not synced", "path", w.rel, "err", unsynced)
	}
	s.log.Info("write", "resource", ops.TokenName(token), "fence", token.Fence, "path", w.rel, "mode", w.mode, "bytes", size)
	return nil, out, nil
}

// unsyncedError is apply's error when the change was made but its
// directory could not be fsynced.
type unsyncedError struct{ err error }

func (e *unsyncedError) Error() string { return "fsync of the directory failed: " + e.err.Error() }
func (e *unsyncedError) Unwrap() error { return e.err }

// apply makes w on disk, atomically: a temp file in the target's
// directory, fsync, rename over the target, fsync of the directory. A
// delete is a remove and the directory's fsync. It returns the file's
// size afterwards. beforeRename, if set, runs just before the rename.
func (a *fileArea) apply(ctx context.Context, w fileWrite, beforeRename func(context.Context)) (int64, error) {
	dir := filepath.Dir(w.rel)
	if w.mode == "delete" {
		if w.recheck != nil {
			if err := w.recheck(); err != nil {
				return 0, err
			}
		}
		if err := a.root.Remove(w.rel); err != nil {
			return 0, err
		}
		return 0, a.syncDir(dir)
	}
	if err := a.root.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	perm := fs.FileMode(0o644)
	if w.exists {
		perm = w.info.Mode().Perm()
	}
	tmp := filepath.Join(dir, ".fencegate-"+strings.ToLower(crand.Text()[:12])+".tmp")
	f, err := a.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return 0, err
	}
	renamed := false
	defer func() {
		if !renamed {
			_ = a.root.Remove(tmp)
		}
	}()
	size, err := a.fill(f, w)
	if err == nil {
		err = f.Chmod(perm) // the umask may have narrowed it
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	if beforeRename != nil {
		beforeRename(ctx)
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("cancelled before the rename: %w", err)
	}
	if w.recheck != nil {
		if err := w.recheck(); err != nil {
			return 0, err
		}
	}
	if err := a.root.Rename(tmp, w.rel); err != nil {
		return 0, err
	}
	renamed = true
	return size, a.syncDir(dir)
}

// fill writes w's new content to f: for append, the old content first.
func (a *fileArea) fill(f *os.File, w fileWrite) (int64, error) {
	var size int64
	if w.mode == "append" && w.exists {
		old, err := a.root.OpenFile(w.rel, os.O_RDONLY|openNonblock, 0)
		if err != nil {
			return 0, err
		}
		defer old.Close()
		if fi, err := old.Stat(); err != nil || !fi.Mode().IsRegular() {
			return 0, fmt.Errorf("%q is no longer a regular file", w.rel)
		}
		if size, err = io.Copy(f, old); err != nil {
			return 0, err
		}
	}
	n, err := f.Write(w.content)
	return size + int64(n), err
}

// syncDir fsyncs a directory under the root, so a rename or removal in it
// survives a crash. A failure is an *unsyncedError: the change is made.
func (a *fileArea) syncDir(dir string) error {
	if !canSyncDirs {
		return nil
	}
	d, err := a.root.Open(dir)
	if err == nil {
		err = d.Sync()
		if cerr := d.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return &unsyncedError{err}
	}
	return nil
}
