//go:build unix

package fencegatecli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/fencegate/fencegate/cmd/fencegate/internal/ops"
	"github.com/fencegate/fencegate/fence"
)

func TestRunSignalled(t *testing.T) {
	env := map[string]string{envDSN: filepath.Join(t.TempDir(), "fg.db")}
	t.Setenv(envHelper, "selfkill")
	fg(t, env, "run", "--lock", "l", "--", testExe(t)).want(t, 128+int(syscall.SIGKILL))
}

// readyToken parses the "pid token" a helper writes once it runs.
func readyToken(t *testing.T, s string) (int, fence.Token) {
	t.Helper()
	pidText, tokenText, _ := strings.Cut(s, " ")
	pid, err := strconv.Atoi(pidText)
	if err != nil {
		t.Fatalf("helper wrote %q", s)
	}
	return pid, parseToken(t, tokenText)
}

// SIGINT, SIGTERM and SIGHUP sent to run reach its command; run exits with
// the command's status and releases the lock.
func TestRunForwardsSignals(t *testing.T) {
	t.Parallel()
	dsn := filepath.Join(t.TempDir(), "fg.db")
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		ready := filepath.Join(t.TempDir(), "ready")
		cmd := subCmd(t, map[string]string{envDSN: dsn, envHelper: "trap", envFile: ready},
			"run", "--lock", "l", "--", testExe(t))
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		var waitErr error
		go func() { waitErr = cmd.Wait(); close(done) }()
		_, token := readyToken(t, waitForFile(t, ready, done))
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		<-done
		if code := cmd.ProcessState.ExitCode(); code != 42 {
			t.Fatalf("%v: run exited %d (%v), want the command's 42\n%s", sig, code, waitErr, out.String())
		}
		if got, _ := os.ReadFile(ready + ".signal"); string(got) != sig.String() {
			t.Errorf("the command got %q, want %q", got, sig)
		}
		r := fg(t, map[string]string{envDSN: dsn}, "check", token.String()).want(t, exitHeld)
		contains(t, "check after run", r.stderr, "was released")
	}
}

// When the lease is lost under it, run stops its command (SIGTERM, then
// SIGKILL after --grace) and exits 3, whatever the command's own status.
func TestRunLostLease(t *testing.T) {
	for _, tc := range []struct {
		helper string
		want   []string
	}{
		{"trap", []string{"SIGTERM now, SIGKILL in 200ms"}},                    // stops on SIGTERM, exit 42
		{"ignoreterm", []string{"still running 200ms after SIGTERM: SIGKILL"}}, // needs SIGKILL
	} {
		t.Run(tc.helper, func(t *testing.T) {
			env := map[string]string{envDSN: filepath.Join(t.TempDir(), "fg.db")}
			ready := filepath.Join(t.TempDir(), "ready")
			t.Setenv(envHelper, tc.helper)
			t.Setenv(envFile, ready)
			results := make(chan result, 1)
			done := make(chan struct{})
			go func() {
				defer close(done)
				// A ttl long enough that run keeps the lease until the
				// release below on a loaded machine (a lease lost by its
				// deadline first would make the release exit 3).
				results <- fg(t, env, "run", "--lock", "l", "--ttl", "2s", "--grace", "200ms", "--", testExe(t))
			}()
			pid, token := readyToken(t, waitForFile(t, ready, done))

			// Someone releases the lease (as a coordinator would expire
			// it); run's next renewal finds it gone.
			fg(t, env, "release", token.String()).want(t, exitOK)
			r := <-results
			r.want(t, exitHeld)
			contains(t, "run's stderr", r.stderr,
				fmt.Sprintf("lease with fence %d lost: ", token.Fence),
				"stopped after the lease on l was lost; exit 3")
			contains(t, "run's stderr", r.stderr, tc.want...)
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("the command (pid %d) is still there: %v", pid, err)
			}
		})
	}
}

// kill -9 of a run holder: the lock stays held until its ttl, the successor
// gets a higher fence, and the stale holder's fenced write is refused.
func TestRunKilled(t *testing.T) {
	t.Parallel()
	databases(t, func(t *testing.T, db database) {
		t.Parallel()
		env := map[string]string{envDSN: db.dsn}
		db.createLog(t)
		ready := filepath.Join(t.TempDir(), "ready")
		cmd := subCmd(t, map[string]string{envDSN: db.dsn, envHelper: "block", envFile: ready},
			"run", "--lock", "l", "--ttl", "5s", "--holder", "doomed", "--", testExe(t)) // outlives the helper's start and the kill, on a loaded machine too
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		pid, stale := readyToken(t, waitForFile(t, ready, done))
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) }) // if no parent-death signal got it

		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-done
		if ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("run ended with %v, not SIGKILL", cmd.ProcessState)
		}

		// Nobody released it: still held, until its ttl.
		r := fg(t, env, "claim", "--lock", "l", "--holder", "successor").want(t, exitHeld)
		contains(t, "claim's stderr", r.stderr, fmt.Sprintf(`l is held by "doomed" (fence %d)`, stale.Fence))
		staleExpiry := lockStatus(t, env).ExpiresAt

		r = fg(t, env, "claim", "--lock", "l", "--holder", "successor", "--wait", "10s").want(t, exitOK)
		next := parseToken(t, r.stdout)
		if next.Fence <= stale.Fence {
			t.Fatalf("the successor's fence %d is not above the killed holder's %d", next.Fence, stale.Fence)
		}
		if granted := lockStatus(t, env).GrantedAt; granted < staleExpiry { // ops.StampLayout sorts as it reads
			t.Errorf("the successor was granted the lock at %v, before the killed holder's lease expired at %v", granted, staleExpiry)
		}

		// The killed holder's token, used the way its command would have
		// (from the environment, through the binary), is refused.
		r = sub(t, map[string]string{envDSN: db.dsn, envToken: stale.String()},
			"gate", "--arg", strconv.FormatInt(stale.Fence, 10), "--arg", stale.Holder, "--", db.insert).want(t, exitHeld)
		contains(t, "gate's stderr", r.stderr,
			fmt.Sprintf(`refused: l fence %d from "doomed" is below the floor %d from "successor" (rejection #1`, stale.Fence, next.Fence))
		if rows := db.logRows(t); len(rows) != 0 {
			t.Errorf("the stale write landed: %v", rows)
		}
		fg(t, env, "gate", "--arg", strconv.FormatInt(next.Fence, 10), "--arg", next.Holder, next.String(), "--", db.insert).want(t, exitOK)
	})
}

// lockStatus reads the one lock's status.
func lockStatus(t *testing.T, env map[string]string) ops.LockReport {
	t.Helper()
	r := fg(t, env, "status", "--json", "--lock", "l").want(t, exitOK)
	var rep ops.StatusReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || len(rep.Locks) != 1 {
		t.Fatalf("status --json: %v\n%s", err, r.stdout)
	}
	return rep.Locks[0]
}
