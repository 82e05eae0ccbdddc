//go:build unix

package fencegatecli

import (
	"os"
	"os/signal"
	"syscall"
	"time"
)

// unixHelper runs the helpers that need Unix signals.
func unixHelper(name, file string) (int, bool) {
	switch name {
	case "trap":
		// Report the first signal that arrives, and exit 42.
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
		if err := ready(file); err != nil {
			return fail(err), true
		}
		select {
		case s := <-sigs:
			if err := writeFileAtomic(file+".signal", s.String()); err != nil {
				return fail(err), true
			}
			return 42, true
		case <-time.After(helperTimeout):
			return 98, true
		}

	case "ignoreterm":
		signal.Ignore(syscall.SIGTERM)
		if err := ready(file); err != nil {
			return fail(err), true
		}
		time.Sleep(helperTimeout)
		return 0, true

	case "selfkill":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		time.Sleep(helperTimeout)
		return 0, true
	}
	return 0, false
}
