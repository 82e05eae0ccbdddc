package sqlite

import (
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/internal/sqlexec"
)

// WaitPrepared waits for d's background statement prepares, so that a test
// knows the statement cache is warm.
func WaitPrepared(d *Driver) { sqlexec.WaitPrepared(d.impl) }

// ClassifyCode is Classify for an error of the given SQLite result code,
// which a test cannot make a *sqlite.Error of.
func ClassifyCode(code int) sqlstore.ErrorClass { return classifyCode(code, "") }

// WhyUnopenable is whyUnopenable, for a test that hands it the errno
// access(2) would return.
var WhyUnopenable = whyUnopenable
