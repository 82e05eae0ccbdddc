//go:build unix

package pathid

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// linkCount is the file's number of hard links, from its stat.
func linkCount(_ *os.Root, _ string, fi fs.FileInfo) (uint64, error) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, errors.New("no link count in the file's status")
	}
	return uint64(st.Nlink), nil
}
