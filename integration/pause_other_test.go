//go:build !unix

package integration

import "time"

const canPause = false

func (f *fleet) pause(int, time.Duration) bool { return false }

func (f *fleet) pauseNextLeader(time.Duration, time.Duration) bool { return false }

func freezeThenKill(int, func()) bool { return false }
