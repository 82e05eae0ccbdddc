//go:build !unix

package mcpserver

// openNonblock is 0 where named pipes cannot stand in for a file.
const openNonblock = 0

// canSyncDirs is false where a directory cannot be opened for fsync
// (Windows): there a rename is as durable as the file system makes it.
const canSyncDirs = false
