//go:build unix

package fencegatecli

import (
	"os"
	"os/exec"
	"syscall"
)

// forwardedSignals are the signals run passes on to its child.
var forwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// prepareChild puts the child in a process group of its own, so that a
// signal forwarded by run reaches it (and its own children) once, and a lost
// lease stops the whole group.
func prepareChild(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setParentDeathSignal(cmd.SysProcAttr)
}

// signalChild sends s to the child's process group.
func signalChild(cmd *exec.Cmd, s os.Signal) error {
	sig, ok := s.(syscall.Signal)
	if !ok {
		return cmd.Process.Signal(s)
	}
	return groupKill(cmd, sig)
}

// terminateChild asks the child's process group to stop.
func terminateChild(cmd *exec.Cmd) error { return groupKill(cmd, syscall.SIGTERM) }

// killChild kills the child's process group.
func killChild(cmd *exec.Cmd) error { return groupKill(cmd, syscall.SIGKILL) }

func groupKill(cmd *exec.Cmd, sig syscall.Signal) error {
	err := syscall.Kill(-cmd.Process.Pid, sig)
	if err == syscall.ESRCH {
		return os.ErrProcessDone
	}
	return err
}

// exitStatus returns a finished process's exit status, 128+N if signal N
// killed it, as shells report it.
func exitStatus(state *os.ProcessState) int {
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return state.ExitCode()
}
