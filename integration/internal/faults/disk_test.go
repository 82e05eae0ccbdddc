package faults

import (
	"context"
	"errors"
	"os"
	"testing"
)

// TestDiskNeedsOptIn: without FENCEGATE_MACHINE_FAULTS=1 no loop device is
// attached, nothing is formatted or mounted, whoever runs the tests (root
// included), and the error says how to opt in.
func TestDiskNeedsOptIn(t *testing.T) {
	t.Setenv(EnvMachineFaults, "")
	if err := CanDisk(); !errors.Is(err, ErrMachineFaultsOff) {
		t.Fatalf("CanDisk without %s=1: %v, want ErrMachineFaultsOff", EnvMachineFaults, err)
	}
	dir := t.TempDir()
	if d, err := NewDisk(context.Background(), dir, 64, -1, -1); !errors.Is(err, ErrMachineFaultsOff) {
		if d != nil {
			_ = d.Close()
		}
		t.Fatalf("NewDisk without %s=1: %v, want ErrMachineFaultsOff", EnvMachineFaults, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("NewDisk refused but left %v behind", entries)
	}
	if c, err := StartClusterOnDisk(context.Background(), 64); !errors.Is(err, ErrMachineFaultsOff) {
		if c != nil {
			_ = c.Stop()
		}
		t.Fatalf("StartClusterOnDisk without %s=1: %v, want ErrMachineFaultsOff", EnvMachineFaults, err)
	}
}
