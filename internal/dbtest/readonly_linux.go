package dbtest

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// ReadOnlyDir returns a directory that nobody, root included, can write:
// a tmpfs mounted on a fresh directory, filled by fill while it is still
// writable, then remounted read-only (unmounted when t ends). Directory
// permissions would not do: root ignores them. It needs root (or
// CAP_SYS_ADMIN) and skips, saying so, without.
func ReadOnlyDir(t testing.TB, fill func(dir string)) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP: a read-only directory that binds root too is a read-only tmpfs mount, which needs root")
	}
	dir := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=4m"); err != nil {
		t.Skipf("SKIP: mount a tmpfs for a read-only directory: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	fill(dir)
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		t.Fatal(fmt.Errorf("remount %s read-only: %w", dir, err))
	}
	return dir
}
