package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// StartClusterOnDisk is StartCluster with the data directory on a Disk of
// its own (an ext4 filesystem on a loop device), so that OSCrash can lose
// what the server had not flushed. The log and the socket stay off the
// disk, readable after a crash. Stop also removes the disk. Root only.
func StartClusterOnDisk(ctx context.Context, sizeMB int) (*Cluster, error) {
	if err := CanDisk(); err != nil {
		return nil, err
	}
	c, err := newCluster()
	if err != nil {
		return nil, err
	}
	uid, gid := -1, -1
	if fi, err := os.Stat(c.Dir); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			uid, gid = int(st.Uid), int(st.Gid) // the cluster's owner (newCluster chowned it)
		}
	}
	if c.disk, err = NewDisk(ctx, c.Dir, sizeMB, uid, gid); err != nil {
		c.remove()
		return nil, err
	}
	c.data = filepath.Join(c.disk.Mount, "data")
	if out, err := c.run(ctx, "initdb", "-D", c.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		c.remove()
		return nil, fmt.Errorf("faults: initdb: %w\n%s", err, out)
	}
	// The server must not restart by itself on a filesystem that is gone.
	if err := c.appendConf("restart_after_crash = off"); err != nil {
		c.remove()
		return nil, err
	}
	// initdb ran with --no-sync and appendConf does not fsync: flush them
	// now, as a machine that has been up for a while would have, or the
	// first crash takes the cluster itself.
	syscall.Sync()
	if err := c.start(ctx); err == nil {
		err = c.readPID()
	}
	if err != nil {
		_ = c.Stop()
		return nil, err
	}
	return c, nil
}

// Disk is the data directory's filesystem (StartClusterOnDisk), or nil.
func (c *Cluster) Disk() *Disk { return c.disk }

// OSCrash crashes the server the way a crash of the OS would: the data
// directory's filesystem is shut down without flushing (Disk.Crash), every
// server process is killed, and the disk comes back as after a reboot,
// holding only what the server had fsynced; then the server starts again
// and recovers from that. The caller may have crashed the disk itself
// (Disk().Crash), at a moment of its choosing. Only for a cluster from StartClusterOnDisk.
func (c *Cluster) OSCrash(ctx context.Context) error {
	if c.disk == nil {
		return errors.New("faults: OSCrash needs a cluster from StartClusterOnDisk")
	}
	pid := c.pmPID
	if err := c.disk.Crash(); err != nil { // unless the caller already did
		return err
	}
	// SIGQUIT is pg_ctl's immediate shutdown: the postmaster kills every
	// backend and exits. pg_ctl itself cannot read postmaster.pid now.
	_ = syscall.Kill(pid, syscall.SIGQUIT)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for alive(pid) {
		select {
		case <-ctx.Done():
			_ = syscall.Kill(pid, syscall.SIGKILL)
			return fmt.Errorf("faults: the postmaster (pid %d) outlived its filesystem: %w", pid, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := c.disk.Reattach(ctx); err != nil { // waits for the backends to let go of it
		return err
	}
	// After a reboot no postmaster runs, whatever postmaster.pid says; the
	// dead one (a zombie, where nothing reaps it) would still answer
	// kill(pid, 0) and keep the new one from starting.
	if err := os.Remove(filepath.Join(c.data, "postmaster.pid")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	return c.readPID()
}

// readPID keeps the postmaster's pid, which OSCrash needs once
// postmaster.pid can no longer be read.
func (c *Cluster) readPID() error {
	b, err := os.ReadFile(filepath.Join(c.data, "postmaster.pid"))
	if err != nil {
		return err
	}
	c.pmPID, err = strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	if err != nil {
		return fmt.Errorf("faults: postmaster.pid: %w", err)
	}
	return nil
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
