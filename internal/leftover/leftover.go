// Package leftover names the schemas and databases that tests create on a
// shared server so that a later run can tell, from the name alone, which
// ones a killed run left behind, and how old they are.
//
// A test drops what it creates when it ends, but a run killed by go test's
// timeout (or by a signal) never reaches its cleanups. The test helpers
// therefore drop, once per process and before they create anything, every
// name of their own shape older than MaxAge. Age matters as much as shape:
// other runs on the same server (a colleague's, CI's) may be using theirs
// right now, and must never lose them mid-run.
package leftover

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// MaxAge is how old a name must be before a sweep drops it: far longer than
// any test run, so that only a killed run's leftovers qualify.
const MaxAge = 2 * time.Hour

// Name returns a fresh name for a schema or database made at now:
// prefix_<unix seconds>_<12 random hex digits>. It is a valid unquoted
// identifier in Postgres and MySQL when prefix is one.
func Name(prefix string, now time.Time) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "_" + strconv.FormatInt(now.Unix(), 10) + "_" + hex.EncodeToString(b)
}

// Stale reports whether name is one that Name made with prefix more than
// MaxAge before now. A name of any other shape is never stale: it may be
// another run's, named some other way.
func Stale(name, prefix string, now time.Time) bool {
	rest, ok := strings.CutPrefix(name, prefix+"_")
	if !ok {
		return false
	}
	secs, random, ok := strings.Cut(rest, "_")
	if !ok || len(random) != 12 || strings.Trim(random, "0123456789abcdef") != "" {
		return false
	}
	at, err := strconv.ParseInt(secs, 10, 64)
	if err != nil || at <= 0 {
		return false
	}
	return now.Sub(time.Unix(at, 0)) > MaxAge
}
