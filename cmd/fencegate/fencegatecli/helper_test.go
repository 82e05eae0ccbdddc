package fencegatecli

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/fencegate/fencegate/fence"
)

// helperTimeout ends a helper that was left waiting, should a test fail to
// stop it.
const helperTimeout = 60 * time.Second

// helper runs the helper named name, as the command of `fencegate run`, and
// returns its exit status. Helpers learn their token from the environment
// that run gives them.
func helper(name string) int {
	file := os.Getenv(envFile)
	switch name {
	case "exit":
		code, _ := strconv.Atoi(os.Getenv(envCode))
		return code

	case "markers":
		// A critical section: markers around a fenced write, to show that
		// no two holders overlap and that fences grow.
		token, err := fence.Parse(os.Getenv(envToken))
		if err != nil {
			return fail(err)
		}
		fence := strconv.FormatInt(token.Fence, 10)
		if fence != os.Getenv(envFence) {
			return fail(fmt.Errorf("%s=%s, but the token's fence is %s", envFence, os.Getenv(envFence), fence))
		}
		if err := appendLine(file, "start "+fence); err != nil {
			return fail(err)
		}
		gate := exec.Command(os.Getenv(envBin), "gate", "--arg", fence, "--arg", token.Holder, "--", os.Getenv(envSQL))
		gate.Stdout, gate.Stderr = os.Stderr, os.Stderr
		if err := gate.Run(); err != nil {
			return fail(fmt.Errorf("fenced write: %w", err))
		}
		if err := appendLine(file, "end "+fence); err != nil {
			return fail(err)
		}
		return 0

	case "block":
		if err := ready(file); err != nil {
			return fail(err)
		}
		time.Sleep(helperTimeout)
		return 0

	case "renewcheck":
		// Outlive the ttl several times over, then ask whether the lease is
		// still ours (run renewed it) and still refused to others.
		d, err := time.ParseDuration(os.Getenv(envSleep))
		if err != nil {
			return fail(err)
		}
		time.Sleep(d)
		bin := os.Getenv(envBin)
		check := exec.Command(bin, "check")
		check.Stderr = os.Stderr
		_ = check.Run()
		claim := exec.Command(bin, "claim", "--lock", os.Getenv(envLock), "--holder", "intruder")
		_ = claim.Run()
		return writeResult(file, fmt.Sprintf("check=%d claim=%d", check.ProcessState.ExitCode(), claim.ProcessState.ExitCode()))
	}
	if code, ok := unixHelper(name, file); ok {
		return code
	}
	return fail(fmt.Errorf("unknown helper %q", name))
}

// ready writes "pid token" to file, once.
func ready(file string) error {
	return writeFileAtomic(file, fmt.Sprintf("%d %s", os.Getpid(), os.Getenv(envToken)))
}

func writeResult(file, s string) int {
	if err := writeFileAtomic(file, s); err != nil {
		return fail(err)
	}
	return 0
}

// appendLine appends one line with a single write, which O_APPEND makes
// atomic with respect to other appenders.
func appendLine(file, line string) error {
	f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func fail(err error) int {
	fmt.Fprintln(os.Stderr, "helper:", err)
	return 99
}
