package sqlite_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore/sqlite"
)

// TestOpenSaysWhy: a database SQLite cannot open gets an error that says
// why (SQLite says "unable to open database file" to each): a missing
// directory, a path that is not a regular file.
func TestOpenSaysWhy(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		path string
		want error
		says string
	}{
		{filepath.Join(dir, "nosuch", "fg.db"), sqlite.ErrNoDirectory, "nosuch (SQLite creates the file, not its directory)"},
		{dir, sqlite.ErrNotAFile, "is a directory"},
		{os.DevNull, sqlite.ErrNotAFile, "is not a regular file"},
	} {
		d, err := sqlite.Open(context.Background(), c.path)
		if err == nil {
			d.Close()
			t.Fatalf("Open(%s) succeeded", c.path)
		}
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("Open(%s) = %v; want %v, saying %q", c.path, err, c.want, c.says)
		}
	}
}

// TestWhyUnopenableReadOnly classifies a directory or file that cannot be
// written by access(2)'s errno, whoever runs the test (root passes
// permission checks, so the errno is handed in).
func TestWhyUnopenableReadOnly(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "fg.db")
	for _, errno := range []error{syscall.EROFS, syscall.EACCES, syscall.EPERM} {
		refuse := func(p string) error {
			if p == dir {
				return errno
			}
			return nil
		}
		if err := sqlite.WhyUnopenable(file, refuse); !errors.Is(err, sqlite.ErrReadOnly) || !strings.Contains(err.Error(), "its directory "+dir+" cannot be written") {
			t.Errorf("directory refused with %v: %v; want ErrReadOnly naming the directory", errno, err)
		}
	}
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	refuseFile := func(p string) error {
		if p == file {
			return syscall.EACCES
		}
		return nil
	}
	if err := sqlite.WhyUnopenable(file, refuseFile); !errors.Is(err, sqlite.ErrReadOnly) || !strings.Contains(err.Error(), file+": permission denied") {
		t.Errorf("file refused: %v; want ErrReadOnly naming the file", err)
	}
	if err := sqlite.WhyUnopenable(file, func(string) error { return nil }); err != nil {
		t.Errorf("writable: %v", err)
	}
}

// TestOpenReadOnlyDirectory: a database in a directory nobody can write
// (a read-only mount: root too) fails Open with ErrReadOnly, and
// OpenReadOnly reads it; writes through it fail.
func TestOpenReadOnlyDirectory(t *testing.T) {
	ctx := context.Background()
	var path string
	dir := dbtest.ReadOnlyDir(t, func(dir string) {
		path = filepath.Join(dir, "fg.db")
		d, err := sqlite.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := d.DB().ExecContext(ctx, `CREATE TABLE t (v TEXT); INSERT INTO t VALUES ('kept')`); err != nil {
			t.Fatal(err)
		}
		d.Close()
	})
	d, err := sqlite.Open(ctx, path)
	if err == nil {
		d.Close()
		t.Fatal("Open in a read-only directory succeeded")
	}
	if !errors.Is(err, sqlite.ErrReadOnly) || !strings.Contains(err.Error(), "cannot be written") {
		t.Fatalf("Open in a read-only directory: %v; want ErrReadOnly", err)
	}
	if _, err := sqlite.Open(ctx, filepath.Join(dir, "new.db")); !errors.Is(err, sqlite.ErrReadOnly) || !strings.Contains(err.Error(), "its directory "+dir+" cannot be written") {
		t.Fatalf("Open of a new file in a read-only directory: %v; want ErrReadOnly naming the directory", err)
	}

	ro, err := sqlite.OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatalf("OpenReadOnly: %v", err)
	}
	defer ro.Close()
	var v string
	if err := ro.DB().QueryRowContext(ctx, `SELECT v FROM t`).Scan(&v); err != nil || v != "kept" {
		t.Fatalf("read %q, %v", v, err)
	}
	if _, err := ro.DB().ExecContext(ctx, `INSERT INTO t VALUES ('new')`); err == nil {
		t.Fatal("a write through OpenReadOnly succeeded")
	}
}
