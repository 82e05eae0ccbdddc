package integration

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fencegate/fencegate/integration/internal/check"
)

// porcupine's picture (1 to 1.5 MB) is kept only for a history that failed
// its checks; a passing run used to leave one in the temporary directory.
func TestKeepPictureOnlyOnFailure(t *testing.T) {
	src := filepath.Join(t.TempDir(), "linearizability.html")
	if err := os.WriteFile(src, []byte("<html></html>"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if got := keepPicture(&check.Report{Visualization: src}, dir); got != "" {
		t.Errorf("a passing history kept %s", got)
	}
	if got := keepPicture(&check.Report{}, dir); got != "" {
		t.Errorf("a history without a picture kept %s", got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("passing histories left %d files behind", len(entries))
	}
	failed := &check.Report{Visualization: src, Violations: []check.Violation{{}}}
	got := keepPicture(failed, dir)
	if filepath.Dir(got) != dir {
		t.Fatalf("a failed history's picture went to %q, want it in %s", got, dir)
	}
	if b, err := os.ReadFile(got); err != nil || string(b) != "<html></html>" {
		t.Fatalf("kept picture: %q, %v", b, err)
	}
}
