//go:build unix

package mcpserver

import "syscall"

// openNonblock opens the old content of an append without blocking, should
// the file have been swapped for a named pipe since it was checked.
const openNonblock = syscall.O_NONBLOCK

// canSyncDirs: a directory can be fsynced, which makes a rename durable.
const canSyncDirs = true
