//go:build unix

package faults

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// reachHint is one line saying what to do when the OS user uid:gid (a
// throwaway server's, as root) cannot reach dir because a directory above
// it is closed to that user, as a TMPDIR of mode 0700 is; "" when none is
// or it cannot tell.
func reachHint(who, dir string, uid, gid int) string {
	if uid < 0 {
		return ""
	}
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return ""
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return ""
		}
		need := os.FileMode(0o001)
		switch {
		case int(st.Uid) == uid:
			need = 0o100
		case int(st.Gid) == gid:
			need = 0o010
		}
		if fi.Mode().Perm()&need == 0 {
			return fmt.Sprintf("\nfaults: the %s OS user cannot enter %s (mode %#o): set TMPDIR to a directory it can reach, such as /tmp", who, p, fi.Mode().Perm())
		}
		if p == filepath.Dir(p) {
			return ""
		}
	}
}
