//go:build unix && !linux

package fencegatecli

import "syscall"

// setParentDeathSignal does nothing: only Linux can signal a child when its
// parent dies. If run dies, its child keeps running as a stale holder, and
// the gate refuses its fenced writes once the lock passes to someone else.
func setParentDeathSignal(*syscall.SysProcAttr) {}
