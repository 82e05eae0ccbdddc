// Package clock holds the two clocks a lease is read on, as two types that
// do not mix: Instant, a reading of the holder's clock, and DBTime, a
// timestamp the database took.
//
// A holder dates its lease from its own clock (a Clock: System in
// production, Manual in tests) and compares the deadline only with its own
// readings; the coordinator's expiry is a DBTime, kept for logs. Subtracting
// one from the other does not compile: a holder cannot know how its clock
// relates to the database's, so a comparison between them would be a guess.
//
// System is the process's monotonic clock, moved forward by every step
// forward of the wall clock, so a machine that was suspended, or a VM that
// was paused, wakes with the time it lost counted. Manual moves only when
// told, and by a fixed step after every reading, so a test can put a
// deadline between a lease check and the write that trusted it.
//
// The package imports nothing of fencegate's: package lease and its clients
// stand on it.
package clock
