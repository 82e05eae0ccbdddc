package faults

import (
	"errors"
	"os"
	"sync"
)

// EnvMachineFaults opts in to the faults that change the machine itself,
// beyond temporary files and processes of their own: a Disk attaches a loop
// device, runs mkfs.ext4 and mounts it; StepClockForward steps the wall
// clock. Unless it is "1" (.ci/run sets it), CanDisk and CanStepClock
// answer ErrMachineFaultsOff and the tests that need them go without.
const EnvMachineFaults = "FENCEGATE_MACHINE_FAULTS"

// ErrMachineFaultsOff is CanDisk's and CanStepClock's answer without
// EnvMachineFaults=1.
var ErrMachineFaultsOff = errors.New("faults: a loop-device filesystem (losetup, mkfs.ext4, mount) or a step of the wall clock changes the machine: set " + EnvMachineFaults + "=1 to allow it")

// machineFaults is nil once the user opted in to faults that change the
// machine, ErrMachineFaultsOff before.
func machineFaults() error {
	if os.Getenv(EnvMachineFaults) != "1" {
		return ErrMachineFaultsOff
	}
	return nil
}

// Disk is an ext4 filesystem on a loop device, backed by an image file,
// mounted at Mount. Crash shuts it down the way a power cut or a kernel
// panic would look to the files on it: what was not flushed is gone once
// it is mounted again. Crash may be called from any goroutine. It needs root (losetup, mount) and EnvMachineFaults=1.
type Disk struct {
	Mount string // where the filesystem is mounted

	img string // the backing file
	dev string // the loop device, while attached

	mu      sync.Mutex
	crashed bool // shut down since it was last attached
}
