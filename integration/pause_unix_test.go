//go:build unix

package integration

import (
	"os"
	"syscall"
	"time"
)

// canPause reports whether workers can be paused (SIGSTOP/SIGCONT).
const canPause = true

// pause stops worker i for d, as a long GC pause or a descheduled VM would:
// its agents, its lease renewals and its in-flight transactions all freeze,
// then resume as if nothing happened.
func (f *fleet) pause(i int, d time.Duration) bool {
	f.mu.Lock()
	w := f.procs[i]
	f.mu.Unlock()
	if w == nil || w.cmd.Process.Signal(syscall.SIGSTOP) != nil {
		return false
	}
	wait(d)
	_ = w.cmd.Process.Signal(syscall.SIGCONT)
	return true
}

// freezeThenKill stops process pid (SIGSTOP), runs frozen, and kills it
// (SIGKILL): whatever it was about to do, it never does.
func freezeThenKill(pid int, frozen func()) bool {
	p, err := os.FindProcess(pid)
	if err != nil || p.Signal(syscall.SIGSTOP) != nil {
		return false
	}
	frozen()
	return p.Signal(syscall.SIGKILL) == nil
}
