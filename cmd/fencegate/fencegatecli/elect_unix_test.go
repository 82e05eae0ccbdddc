//go:build unix

package fencegatecli

import (
	"bytes"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Two elect processes on one election: the second waits in line while the
// first's command runs; leader names the first; SIGTERM ends the first's
// command, it resigns, and the second leads at once with a higher fence.
func TestElectHandOver(t *testing.T) {
	t.Parallel()
	databases(t, func(t *testing.T, db database) {
		t.Parallel()
		env := map[string]string{envDSN: db.dsn}
		ready := filepath.Join(t.TempDir(), "ready")
		first := subCmd(t, map[string]string{envDSN: db.dsn, envHelper: "block", envFile: ready},
			"elect", "--name", "e", "--ttl", "30s", "--holder", "first", "--", testExe(t))
		if err := first.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { _ = first.Wait(); close(done) }()
		pid, tok := readyToken(t, waitForFile(t, ready, done))
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })

		r := fg(t, env, "leader", "e").want(t, exitOK)
		contains(t, "leader", r.stdout, "first\tfence "+strconv.FormatInt(tok.Fence, 10))

		second := subCmd(t, map[string]string{envDSN: db.dsn, envHelper: "exit", envCode: "0"},
			"elect", "--name", "e", "--ttl", "30s", "--holder", "second", "--", testExe(t))
		var out bytes.Buffer
		second.Stdout, second.Stderr = &out, &out
		if err := second.Start(); err != nil {
			t.Fatal(err)
		}
		secondDone := make(chan error, 1)
		go func() { secondDone <- second.Wait() }()

		if err := first.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		<-done
		if code := first.ProcessState.ExitCode(); code != 128+int(syscall.SIGTERM) {
			t.Errorf("first elect exited %d, want %d (its command's SIGTERM)", code, 128+int(syscall.SIGTERM))
		}
		if err := <-secondDone; err != nil {
			t.Fatalf("second elect: %v\n%s", err, out.String())
		}
		var fence int64
		for _, f := range strings.Fields(out.String()) {
			if n, err := strconv.ParseInt(f, 10, 64); err == nil {
				fence = n
			}
		}
		if !strings.Contains(out.String(), `leading as "second"`) || fence <= tok.Fence {
			t.Errorf("the second's log %q: want it leading with a fence above %d", out.String(), tok.Fence)
		}
	})
}
