package faults

import (
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// StepClockForward moves the wall clock ahead of the monotonic clock by the
// step, at once, and leaves a slew pending to take back every step taken:
// a step clears the kernel's pending slew, so each must add its own to the
// one it found.
func TestStepClockForward(t *testing.T) {
	requireMachineFault(t, "CLOCK STEP", CanStepClock())
	ahead := func() time.Duration { // how far the wall clock has run ahead of the monotonic one since origin
		now := time.Now()
		return now.Round(0).Sub(origin.Round(0)) - now.Sub(origin)
	}
	pending := func() time.Duration {
		tx := unix.Timex{Modes: unix.ADJ_OFFSET_SS_READ}
		if _, err := unix.Adjtimex(&tx); err != nil {
			t.Fatal(err)
		}
		return time.Duration(tx.Offset) * time.Microsecond
	}
	before, slew := ahead(), pending()
	const step = 4 * time.Millisecond
	for range 2 {
		if err := StepClockForward(step); err != nil {
			t.Fatal(err)
		}
	}
	if got := ahead() - before; got < 2*step-time.Millisecond || got > 2*step+time.Millisecond {
		t.Errorf("the wall clock moved %v ahead of the monotonic clock, want %v", got, 2*step)
	}
	// The pending slew drains at most 0.5 ms a second while this runs.
	if got := pending() - slew; got > -2*step+time.Millisecond || got < -2*step-time.Millisecond {
		t.Errorf("the pending slew grew by %v, want %v (both steps taken back)", got, -2*step)
	}
}

var origin = time.Now()

// requireMachineFault skips t when a fault that changes the machine cannot
// run (err, from CanDisk or CanStepClock), loudly; it fails t instead under
// FENCEGATE_REQUIRE_POSTGRES=true unless only the opt-in is missing.
func requireMachineFault(t *testing.T, fault string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if !errors.Is(err, ErrMachineFaultsOff) && os.Getenv("FENCEGATE_REQUIRE_POSTGRES") == "true" {
		t.Fatalf("%v (and FENCEGATE_REQUIRE_POSTGRES=true makes that a failure)", err)
	}
	t.Skipf("\n*** %s SKIPPED: %v ***\n", fault, err)
}

// Without the opt-in the clock is left alone, root or not.
func TestStepClockNeedsOptIn(t *testing.T) {
	t.Setenv(EnvMachineFaults, "")
	if err := StepClockForward(time.Millisecond); !errors.Is(err, ErrMachineFaultsOff) {
		t.Fatalf("StepClockForward without %s=1: %v, want ErrMachineFaultsOff", EnvMachineFaults, err)
	}
}
