//go:build windows

package pathid

import (
	"io/fs"
	"os"
	"syscall"
)

// linkCount is the file's number of hard links, from its handle's file
// information (os.FileInfo does not carry it on Windows).
func linkCount(root *os.Root, name string, _ fs.FileInfo) (uint64, error) {
	f, err := root.Open(name)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var info syscall.ByHandleFileInformation
	if err := syscall.GetFileInformationByHandle(syscall.Handle(f.Fd()), &info); err != nil {
		return 0, err
	}
	return uint64(info.NumberOfLinks), nil
}
