//go:build !unix

package faults

// reachHint has nothing to say where servers do not run as another user.
func reachHint(who, dir string, uid, gid int) string { return "" }
