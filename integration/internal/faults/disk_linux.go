package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ext4IOCShutdown is EXT4_IOC_SHUTDOWN, _IOR('X', 125, __u32), and
// ext4GoingFlagsNoLogFlush its EXT4_GOING_FLAGS_NOLOGFLUSH: the filesystem
// stops at once, and neither its dirty pages nor its uncommitted journal
// reach the device. What was fsynced is on the device; nothing else is.
const (
	ext4IOCShutdown          = 0x8004587d
	ext4GoingFlagsNoLogFlush = 2
)

// CanDisk reports why NewDisk cannot run here, or nil: ErrMachineFaultsOff
// without EnvMachineFaults=1, then root and the tools.
func CanDisk() error {
	if err := machineFaults(); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("faults: a loop-device filesystem needs root")
	}
	for _, tool := range []string{"losetup", "mkfs.ext4", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("faults: a loop-device filesystem needs %s: %w", tool, err)
		}
	}
	return nil
}

// NewDisk makes an image of sizeMB megabytes in dir, formats it ext4,
// attaches it to a free loop device and mounts it at dir/mnt, owned by
// uid:gid (or root's when uid < 0). Close undoes all of it.
func NewDisk(ctx context.Context, dir string, sizeMB int, uid, gid int) (*Disk, error) {
	if err := CanDisk(); err != nil {
		return nil, err
	}
	d := &Disk{img: filepath.Join(dir, "disk.img"), Mount: filepath.Join(dir, "mnt")}
	if err := os.MkdirAll(d.Mount, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(d.img)
	if err != nil {
		return nil, err
	}
	err = f.Truncate(int64(sizeMB) << 20)
	if err = errors.Join(err, f.Close()); err != nil {
		return nil, err
	}
	// No lazy initialisation: no kernel thread writes to it behind the test.
	if out, err := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", d.img).CombinedOutput(); err != nil {
		_ = os.Remove(d.img)
		return nil, fmt.Errorf("faults: mkfs.ext4: %w\n%s", err, out)
	}
	if err := d.attach(ctx); err != nil {
		_ = os.Remove(d.img)
		return nil, err
	}
	if uid >= 0 {
		if err := os.Chown(d.Mount, uid, gid); err != nil {
			_ = d.Close()
			return nil, err
		}
	}
	return d, nil
}

// attach attaches the image to a free loop device and mounts it.
func (d *Disk) attach(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, "losetup", "-f", "--show", d.img).CombinedOutput()
	if err != nil {
		return fmt.Errorf("faults: losetup: %w\n%s", err, out)
	}
	d.dev = strings.TrimSpace(string(out))
	if out, err := exec.CommandContext(ctx, "mount", "-t", "ext4", d.dev, d.Mount).CombinedOutput(); err != nil {
		_ = exec.Command("losetup", "-d", d.dev).Run()
		d.dev = ""
		return fmt.Errorf("faults: mount %s: %w\n%s", d.dev, err, out)
	}
	return nil
}

// Crash shuts the filesystem down without flushing anything: every later
// operation on it fails (EIO), and what it had not written to the device
// never will be. The processes using it are the caller's to kill. Once
// crashed, it stays so until Reattach: a second Crash does nothing.
func (d *Disk) Crash() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.crashed {
		return nil
	}
	fd, err := unix.Open(d.Mount, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return fmt.Errorf("faults: open %s: %w", d.Mount, err)
	}
	defer unix.Close(fd)
	if err := unix.IoctlSetPointerInt(fd, ext4IOCShutdown, ext4GoingFlagsNoLogFlush); err != nil {
		return fmt.Errorf("faults: EXT4_IOC_SHUTDOWN of %s: %w", d.Mount, err)
	}
	d.crashed = true
	return nil
}

// Reattach brings a crashed filesystem back as a reboot would: it unmounts
// it (waiting, up to a deadline, for the processes that had it open to be
// gone), detaches the loop device, attaches the image again and mounts it,
// which replays the journal up to what had reached the device.
func (d *Disk) Reattach(ctx context.Context) error {
	if err := d.detach(ctx); err != nil {
		return err
	}
	if err := d.attach(ctx); err != nil {
		return err
	}
	d.mu.Lock()
	d.crashed = false
	d.mu.Unlock()
	return nil
}

// detach unmounts the filesystem and detaches the loop device, retrying
// while the mount is busy until ctx is done.
func (d *Disk) detach(ctx context.Context) error {
	if d.dev == "" {
		return nil
	}
	for {
		out, err := exec.Command("umount", d.Mount).CombinedOutput()
		if err == nil {
			break
		}
		if !strings.Contains(string(out), "busy") {
			return fmt.Errorf("faults: umount %s: %w\n%s", d.Mount, err, out)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("faults: umount %s: still busy: %w\n%s", d.Mount, ctx.Err(), out)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if out, err := exec.Command("losetup", "-d", d.dev).CombinedOutput(); err != nil {
		return fmt.Errorf("faults: losetup -d %s: %w\n%s", d.dev, err, out)
	}
	d.dev = ""
	return nil
}

// Close unmounts the filesystem (lazily, if something still holds it),
// detaches the loop device and removes the image. It is safe to call
// more than once, and after a failed Reattach.
func (d *Disk) Close() error {
	var err error
	if d.dev != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = d.detach(ctx)
		cancel()
		if err != nil { // still busy: let go of it anyway, the device detaches when the last user does
			_ = exec.Command("umount", "-l", d.Mount).Run()
			_ = exec.Command("losetup", "-d", d.dev).Run()
			d.dev = ""
		}
	}
	return errors.Join(err, os.Remove(d.img))
}
