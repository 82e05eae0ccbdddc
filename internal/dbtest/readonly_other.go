//go:build !linux

package dbtest

import "testing"

// ReadOnlyDir skips: a directory that binds root too is a read-only tmpfs
// mount, made on Linux only.
func ReadOnlyDir(t testing.TB, fill func(dir string)) string {
	t.Helper()
	t.Skip("SKIP: a read-only directory (a read-only tmpfs mount) is made on Linux only")
	return ""
}
