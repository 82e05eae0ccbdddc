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

// pauseNextLeader stops, for d, the worker that next announces that one of
// its agents leads an election ("leading", workload.Config.Announce), or
// gives up after within: a leader stopped past its term is deposed, and
// its writes after SIGCONT must be refused.
func (f *fleet) pauseNextLeader(d, within time.Duration) bool {
	stopped := make(chan *worker, 1)
	f.mu.Lock()
	var armed []*worker
	for _, w := range f.procs {
		w.commit.mu.Lock()
		if w.commit.onAck == nil {
			w.commit.onAck = map[string]func(){}
		}
		w.commit.onAck["leading"] = func() {
			if w.cmd.Process.Signal(syscall.SIGSTOP) == nil {
				select {
				case stopped <- w:
				default:
					_ = w.cmd.Process.Signal(syscall.SIGCONT) // another stopped first
				}
			}
		}
		w.commit.mu.Unlock()
		armed = append(armed, w)
	}
	f.mu.Unlock()
	disarm := func() {
		for _, w := range armed {
			w.commit.mu.Lock()
			delete(w.commit.onAck, "leading")
			w.commit.mu.Unlock()
		}
	}
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case w := <-stopped:
		disarm()
		wait(d)
		_ = w.cmd.Process.Signal(syscall.SIGCONT)
		return true
	case <-timer.C:
		disarm()
		return false
	}
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
