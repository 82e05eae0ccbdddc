//go:build !linux

package faults

import (
	"errors"
	"time"
)

var errNoClockStep = errors.New("faults: stepping the machine's clock needs Linux")

// CanStepClock reports why StepClockForward cannot run here:
// ErrMachineFaultsOff without EnvMachineFaults=1, then that it needs Linux.
func CanStepClock() error {
	if err := machineFaults(); err != nil {
		return err
	}
	return errNoClockStep
}

// StepClockForward needs Linux.
func StepClockForward(time.Duration) error { return errNoClockStep }
