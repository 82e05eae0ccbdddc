package faults

import (
	"context"
	"os"
	"path/filepath"
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
