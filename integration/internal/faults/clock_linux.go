package faults

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// CanStepClock reports why StepClockForward cannot run here:
// ErrMachineFaultsOff without EnvMachineFaults=1, then that it needs root.
func CanStepClock() error {
	if err := machineFaults(); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("faults: stepping the machine's clock needs root (CAP_SYS_TIME)")
	}
	return nil
}

// slewing orders the steps and the reads and writes of the kernel's one
// pending slew.
var slewing sync.Mutex

// StepClockForward moves the machine's wall clock d forward at once
// (adjtimex ADJ_SETOFFSET) and leaves its monotonic clock where it was:
// what a VM resumed from a pause, or a machine woken from suspend, sees
// when its clock is set right. Every process and the database see it. It
// then asks the kernel to slew the wall clock d back (adjtime, at most
// 0.5 ms a second), which moves the monotonic clock at the same rate, so
// the machine ends right without a step backward that a deadline could
// see. It needs root and EnvMachineFaults=1.
func StepClockForward(d time.Duration) error {
	if err := CanStepClock(); err != nil {
		return err
	}
	if d <= 0 {
		return fmt.Errorf("faults: a step forward of %v", d)
	}
	// A step clears the kernel's pending slew (ntp_clear): read it first.
	slewing.Lock()
	defer slewing.Unlock()
	pending := unix.Timex{Modes: unix.ADJ_OFFSET_SS_READ}
	if _, err := unix.Adjtimex(&pending); err != nil {
		return fmt.Errorf("faults: read the pending slew: %w", err)
	}
	step := unix.Timex{Modes: unix.ADJ_SETOFFSET | unix.ADJ_NANO}
	step.Time.Sec, step.Time.Usec = int64(d/time.Second), int64(d%time.Second) // Usec is nanoseconds with ADJ_NANO
	if _, err := unix.Adjtimex(&step); err != nil {
		return fmt.Errorf("faults: step the wall clock %v forward: %w", d, err)
	}
	slew := unix.Timex{Modes: unix.ADJ_OFFSET_SINGLESHOT, Offset: pending.Offset - d.Microseconds()} // µs
	if _, err := unix.Adjtimex(&slew); err != nil {
		return fmt.Errorf("faults: slew the wall clock %v back: %w", d, err)
	}
	return nil
}
