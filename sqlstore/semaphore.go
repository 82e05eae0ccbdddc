package sqlstore

import "context"

// SemaphoreStorer is a capability an Executor may have: it stores each
// semaphore's number of permits (lease.Semaphore) in the database
// (fencegate_semaphore), so that every participant grants by the same N
// and a change of N reaches them all. The drivers of this module have it.
type SemaphoreStorer interface {
	// SemaphorePermits returns the number of permits stored for name, and
	// false when none is stored.
	SemaphorePermits(ctx context.Context, name string) (permits int, found bool, err error)
	// SetSemaphorePermits stores permits for name, replacing what was
	// stored. The caller validates permits (the table checks 1..1024).
	SetSemaphorePermits(ctx context.Context, name string, permits int) error
}
