package faults

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMariaDBWithReadOnlyTMPDIR: the throwaway server starts under a
// TMPDIR that only its owner may write (mode 0755, root's when the tests
// run as root, while mariadbd runs as the mysql user): its temporary files
// go to its own directory.
func TestMariaDBWithReadOnlyTMPDIR(t *testing.T) {
	skipWithoutMariaDB(t)
	tmp := t.TempDir()
	for _, dir := range []string{filepath.Dir(tmp), tmp} { // t.TempDir's are 0700
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("TMPDIR", tmp)
	m, err := StartMariaDB(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
}

// TestMariaDBUnreachableTMPDIR: under a TMPDIR the mysql user cannot enter
// (t.TempDir's parent is 0700), the failure says in one line what to do.
func TestMariaDBUnreachableTMPDIR(t *testing.T) {
	skipWithoutMariaDB(t)
	if os.Geteuid() != 0 {
		t.Skip("as root only: otherwise mariadbd runs as the user who made TMPDIR")
	}
	tmp := t.TempDir()
	if err := os.Chmod(filepath.Dir(tmp), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", tmp)
	m, err := StartMariaDB(context.Background())
	if err == nil {
		m.Stop()
		t.Fatal("mariadbd started under a TMPDIR the mysql user cannot enter")
	}
	if want := "the mysql OS user cannot enter " + filepath.Dir(tmp) + " (mode 0700): set TMPDIR"; !strings.Contains(err.Error(), want) {
		t.Errorf("StartMariaDB: %v\nwant it to say %q", err, want)
	}
}
