package sqlstore

// WaitPrepared waits for d's background statement prepares, so that a test
// knows the statement cache is warm.
func WaitPrepared(d *SQLDriver) { d.stmts.wg.Wait() }
