package fencegatecli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/cmd/fencegate/internal/confined"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/sqlstore"
)

// TestExitCode: how a command ends decides its exit status in one place,
// and what it says: a usage error with the command's usage on stderr, help
// on stdout, a child's status with nothing added.
func TestExitCode(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		err    error
		code   int
		stdout string // "" for nothing
		stderr string // "" for nothing
	}{
		{name: "success", err: nil, code: exitOK},
		{name: "help", err: flag.ErrHelp, code: exitOK, stdout: "usage: fencegate x [--f]\n\nWhat x does.\n\nflags:\n  -f\ta flag\n"},
		{name: "usage", err: usagef("missing %s", "--f"), code: exitUsage,
			stderr: "fencegate x: missing --f\nusage: fencegate x [--f]\n\nflags:\n  -f\ta flag\nRun 'fencegate x --help' for more.\n"},
		{name: "wrapped usage", err: fmt.Errorf("reading: %w", usagef("bad")), code: exitUsage, stderr: "fencegate x: reading: bad\nusage: fencegate x [--f]\n"},
		{name: "invalid input", err: fmt.Errorf("lock: %w", fence.ErrInvalidInput), code: exitUsage, stderr: "fencegate x: lock: invalid input\n"},
		{name: "invalid DSN", err: fmt.Errorf("%w: no scheme", sqlstore.ErrInvalidDSN), code: exitUsage, stderr: "fencegate x: invalid DSN: no scheme\n"},
		{name: "invalid statement", err: fmt.Errorf("statement 1: %w", confined.ErrInvalidStatement), code: exitUsage, stderr: "fencegate x: statement 1: "},
		{name: "held", err: heldf("l is held by %q", "a"), code: exitHeld, stderr: "fencegate x: l is held by \"a\"\n"},
		{name: "wrapped held", err: errors.Join(heldf("stale"), errors.New("and the log failed")), code: exitHeld, stderr: "fencegate x: stale\nand the log failed\n"},
		{name: "error", err: errors.New("fencegate: connection refused"), code: exitError, stderr: "fencegate x: connection refused\n"},
		{name: "cancelled", err: context.Canceled, code: exitError, stderr: "fencegate x: context canceled\n"},
		{name: "child exit 0", err: exitWith(0), code: exitOK},
		{name: "child exit 1", err: exitWith(1), code: 1},
		{name: "child exit 2", err: exitWith(2), code: 2},
		{name: "child exit 3", err: exitWith(3), code: 3},
		{name: "child killed by SIGKILL", err: exitWith(128 + 9), code: 137},
		{name: "child status over a usage error", err: errors.Join(exitWith(7), usagef("bad")), code: 7},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := exitCode(tc.err); got != tc.code {
				t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.code)
			}
			var stdout, stderr bytes.Buffer
			c := &cli{stdout: &stdout, stderr: &stderr}
			cmd := &command{name: "x", usage: "x [--f]", help: "What x does."}
			cmd.flagSet().Bool("f", false, "a flag")
			c.report(cmd, tc.err)
			for _, out := range []struct {
				name       string
				got, want  string
				exactMatch bool
			}{
				{"stdout", stdout.String(), tc.stdout, tc.name == "help"},
				{"stderr", stderr.String(), tc.stderr, tc.name == "usage"},
			} {
				switch {
				case out.want == "" && out.got != "":
					t.Errorf("%s: want nothing, got %q", out.name, out.got)
				case out.exactMatch && out.got != out.want:
					t.Errorf("%s: got %q, want %q", out.name, out.got, out.want)
				case !strings.HasPrefix(out.got, out.want):
					t.Errorf("%s: got %q, want it to start with %q", out.name, out.got, out.want)
				}
			}
		})
	}
}
