//go:build !linux

package faults

import (
	"context"
	"errors"
)

var errNoDisk = errors.New("faults: a loop-device filesystem needs Linux")

// CanDisk reports why NewDisk cannot run here: ErrMachineFaultsOff without
// EnvMachineFaults=1, and then that it needs Linux.
func CanDisk() error {
	if err := machineFaults(); err != nil {
		return err
	}
	return errNoDisk
}

// NewDisk needs Linux.
func NewDisk(context.Context, string, int, int, int) (*Disk, error) { return nil, errNoDisk }

// Crash needs Linux.
func (d *Disk) Crash() error { return errNoDisk }

// Reattach needs Linux.
func (d *Disk) Reattach(context.Context) error { return errNoDisk }

// Close needs Linux.
func (d *Disk) Close() error { return errNoDisk }

// StartClusterOnDisk needs Linux.
func StartClusterOnDisk(context.Context, int) (*Cluster, error) { return nil, errNoDisk }

// OSCrash needs Linux.
func (c *Cluster) OSCrash(context.Context) error { return errNoDisk }

// Disk is nil here.
func (c *Cluster) Disk() *Disk { return nil }
