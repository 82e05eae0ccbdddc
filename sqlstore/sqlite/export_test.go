package sqlite

import "github.com/fencegate/fencegate/sqlstore/internal/sqlexec"

// WaitPrepared waits for d's background statement prepares, so that a test
// knows the statement cache is warm.
func WaitPrepared(d *Driver) { sqlexec.WaitPrepared(d.Driver) }
