//go:build unix

package sqlite

import "syscall"

// writable reports whether path can be written, as access(2) with W_OK
// does: a read-only mount and an immutable file bind root too.
func writable(path string) error { return syscall.Access(path, 2 /* W_OK */) }
