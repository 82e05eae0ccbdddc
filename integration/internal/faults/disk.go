package faults

import "sync"

// Disk is an ext4 filesystem on a loop device, backed by an image file,
// mounted at Mount. Crash shuts it down the way a power cut or a kernel
// panic would look to the files on it: what was not flushed is gone once
// it is mounted again. Crash may be called from any goroutine. It needs root (losetup, mount).
type Disk struct {
	Mount string // where the filesystem is mounted

	img string // the backing file
	dev string // the loop device, while attached

	mu      sync.Mutex
	crashed bool // shut down since it was last attached
}
