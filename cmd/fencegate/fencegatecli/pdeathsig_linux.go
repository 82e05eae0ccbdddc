package fencegatecli

import "syscall"

// setParentDeathSignal makes Linux send the child SIGTERM if run dies (even
// by SIGKILL): nobody renews its lease any more, so it should stop.
func setParentDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGTERM }
