package faults

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestDiskCrashLosesWhatWasNotFlushed: a file fsynced before the crash is
// there after it, one only written (in the page cache) is not.
func TestDiskCrashLosesWhatWasNotFlushed(t *testing.T) {
	requireMachineFault(t, "OS-CRASH FAULT", CanDisk())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := NewDisk(ctx, t.TempDir(), 64, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	})
	synced, unsynced := filepath.Join(d.Mount, "synced"), filepath.Join(d.Mount, "unsynced")
	want := bytes.Repeat([]byte("fenced "), 1000)
	f, err := os.Create(synced)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(want); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	dir, err := os.Open(d.Mount) // the new name is durable only once its directory is
	if err != nil {
		t.Fatal(err)
	}
	if err := dir.Sync(); err != nil {
		t.Fatal(err)
	}
	dir.Close()
	if err := os.WriteFile(unsynced, want, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.Crash(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(synced); err == nil {
		t.Error("a read on the crashed filesystem succeeded, want EIO")
	}
	if err := d.Reattach(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(synced); err != nil || !bytes.Equal(got, want) {
		t.Errorf("the fsynced file after the crash: %d bytes, %v; want %d bytes", len(got), err, len(want))
	}
	if got, err := os.ReadFile(unsynced); err == nil && len(got) > 0 {
		t.Errorf("the file never fsynced survived the crash with %d bytes; want it gone or empty", len(got))
	}
}
