package fencegatecli

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// run propagates its command's exit status, and releases the lock after.
func TestRunExitStatus(t *testing.T) {
	env := map[string]string{envDSN: filepath.Join(t.TempDir(), "fg.db")}
	t.Setenv(envHelper, "exit")
	for _, code := range []int{0, 1, 2, 3, 7, 255} {
		t.Setenv(envCode, strconv.Itoa(code))
		fg(t, env, "run", "--lock", "l", "--", testExe(t)).want(t, code)
	}
	// Released each time: a new claim succeeds at once.
	fg(t, env, "claim", "--lock", "l", "--holder", "after").want(t, exitOK)

	// Held by someone else: exit 3 without running the command.
	r := fg(t, env, "run", "--lock", "l", "--", testExe(t)).want(t, exitHeld)
	contains(t, "stderr", r.stderr, `fencegate run: l is held by "after"`, "retry after")

	// A command that cannot start is an error, and the lock is released.
	r = fg(t, env, "run", "--lock", "m", "--", filepath.Join(t.TempDir(), "no-such-command")).want(t, exitError)
	contains(t, "stderr", r.stderr, "fencegate run: start ")
	fg(t, env, "claim", "--lock", "m", "--holder", "after").want(t, exitOK)

	// Through the binary as well.
	r = sub(t, map[string]string{envDSN: env[envDSN], envHelper: "exit", envCode: "5"}, "run", "--lock", "n", "--", testExe(t))
	r.want(t, 5)
}

// run renews the lease for as long as its command runs, however many ttls
// that is, and the command can see its lease is current and held.
func TestRunRenews(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "fg.db")
	file := filepath.Join(t.TempDir(), "result")
	t.Setenv(envHelper, "renewcheck")
	t.Setenv(envFile, file)
	t.Setenv(envBin, binary(t))
	t.Setenv(envSleep, "3300ms") // the command's work: over three ttls
	// A ttl long enough that each renewal (bounded by a third of it) gets
	// through on a loaded machine, while the helper's own check and claim
	// contend for the SQLite file: 400 ms left 133 ms per renewal.
	fg(t, map[string]string{envDSN: dsn}, "run", "--lock", "l", "--ttl", "1s", "--", testExe(t)).want(t, exitOK)
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "check=0 claim=3" {
		t.Errorf("after three ttls the command saw %q, want check=0 claim=3", got)
	}
	r := fg(t, map[string]string{envDSN: dsn}, "status", "--lock", "l").want(t, exitOK)
	contains(t, "status after run", r.stdout, "released")
}

// Processes running `fencegate run` on one lock take turns: exactly one
// command runs at a time, and each has a higher fence than the one before.
func TestRunContention(t *testing.T) {
	t.Parallel()
	databases(t, func(t *testing.T, db database) {
		t.Parallel()
		bin := binary(t)
		db.createLog(t) // fencegate's own tables: the runs race to create them
		markers := filepath.Join(t.TempDir(), "markers")
		const n = 4
		cmds := make([]*exec.Cmd, n)
		outs := make([]bytes.Buffer, n)
		for i := range cmds {
			cmds[i] = subCmd(t, map[string]string{
				envDSN: db.dsn, envHelper: "markers", envFile: markers, envBin: bin, envSQL: db.insert,
			}, "run", "--lock", "shared", "--ttl", "10s", "--wait", "20s", "--", testExe(t))
			cmds[i].Stdout, cmds[i].Stderr = &outs[i], &outs[i]
			if err := cmds[i].Start(); err != nil {
				t.Fatal(err)
			}
		}
		for i, cmd := range cmds {
			if err := cmd.Wait(); err != nil {
				t.Errorf("run %d: %v\n%s", i, err, outs[i].String())
			}
		}
		data, err := os.ReadFile(markers)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(lines) != 2*n {
			t.Fatalf("want %d markers, got:\n%s", 2*n, data)
		}
		var fences []int64
		for i := 0; i < len(lines); i += 2 {
			var start, end int64
			if _, err := fmt.Sscanf(lines[i], "start %d", &start); err != nil {
				t.Fatalf("line %d: %q: %v\n%s", i+1, lines[i], err, data)
			}
			if _, err := fmt.Sscanf(lines[i+1], "end %d", &end); err != nil || end != start {
				t.Fatalf("critical sections overlap: line %d is %q after %q\n%s", i+2, lines[i+1], lines[i], data)
			}
			if len(fences) > 0 && start <= fences[len(fences)-1] {
				t.Fatalf("fence %d after %d\n%s", start, fences[len(fences)-1], data)
			}
			fences = append(fences, start)
		}
		if got := db.logRows(t); fmt.Sprint(got) != fmt.Sprint(fences) {
			t.Errorf("fenced writes %v, want %v", got, fences)
		}
	})
}
