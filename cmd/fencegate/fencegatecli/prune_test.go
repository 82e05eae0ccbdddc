package fencegatecli

import "testing"

// prune deletes nothing a fresh database needs, says what it deleted, and
// refuses bad flags with a usage error, changing nothing.
func TestPrune(t *testing.T) {
	t.Parallel()
	databases(t, func(t *testing.T, db database) {
		t.Parallel()
		env := map[string]string{envDSN: db.dsn}
		fg(t, env, "claim", "--lock", "l", "--holder", "a").want(t, exitOK)
		r := fg(t, env, "prune", "--keep-rejections", "10").want(t, exitOK)
		contains(t, "prune", r.stdout, "pruned 0 requests, 0 waiters, 0 rejections")
		fg(t, env, "prune", "--batch", "0").want(t, exitUsage)
		fg(t, env, "prune", "--request-age", "1h").want(t, exitUsage) // below the MaxTTL: fence.ErrInvalidInput
		r = fg(t, env, "status").want(t, exitOK)
		contains(t, "status after prune", r.stdout, "l")
	})
}
