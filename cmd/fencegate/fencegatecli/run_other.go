//go:build !unix

package fencegatecli

import (
	"os"
	"os/exec"
)

// forwardedSignals are the signals run acts on while its child runs. Outside
// Unix a signal cannot be forwarded to another process, so it kills the
// child.
var forwardedSignals = []os.Signal{os.Interrupt}

// prepareChild does nothing outside Unix.
func prepareChild(*exec.Cmd) {}

// signalChild kills the child: outside Unix there is no way to pass a
// signal on.
func signalChild(cmd *exec.Cmd, _ os.Signal) error { return cmd.Process.Kill() }

// terminateChild kills the child: outside Unix there is no SIGTERM.
func terminateChild(cmd *exec.Cmd) error { return cmd.Process.Kill() }

// killChild kills the child.
func killChild(cmd *exec.Cmd) error { return cmd.Process.Kill() }

// exitStatus returns a finished process's exit status.
func exitStatus(state *os.ProcessState) int { return state.ExitCode() }
