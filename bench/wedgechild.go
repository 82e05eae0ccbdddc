//go:build unix

package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/fencegate/fencegate/lease"
)

// wedgedChild is the stale holder A's process, frozen after its guard and
// before its write.
type wedgedChild struct {
	cmd   *exec.Cmd
	lines *bufio.Scanner
}

// startWedged runs cfg.Self with args, waits for its "ACQUIRED <id>" line,
// stops it with SIGSTOP and returns the id. The caller ends it with close.
func startWedged(ctx context.Context, cfg Config, args ...string) (*wedgedChild, string, error) {
	cmd := exec.CommandContext(ctx, cfg.Self, args...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	c := &wedgedChild{cmd: cmd, lines: bufio.NewScanner(stdout)}
	first := c.line()
	id, ok := strings.CutPrefix(first, "ACQUIRED ")
	if !ok {
		c.close()
		return nil, "", fmt.Errorf("child: %s", first)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		c.close()
		return nil, "", err
	}
	return c, id, nil
}

func (c *wedgedChild) line() string {
	if c.lines.Scan() {
		return c.lines.Text()
	}
	return "RESULT (no output)"
}

// resume continues the child (SIGCONT) and returns what it said of its late
// write.
func (c *wedgedChild) resume() (string, error) {
	if err := c.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return "", err
	}
	said := strings.TrimPrefix(c.line(), "RESULT ")
	if len(said) > 140 {
		said = said[:140] + "…"
	}
	return said, nil
}

func (c *wedgedChild) close() { _ = c.cmd.Process.Kill(); _ = c.cmd.Wait() }

// takeOver is the successor B acquiring resource from coord, trying again
// until the frozen holder's lease has expired.
func takeOver(ctx context.Context, coord *lease.Coordinator, resource string) (*lease.Lease, error) {
	client, _ := lease.NewClient(&lease.ClientOptions{Holder: "B", TTL: wedgeTTL})
	for {
		req, _ := client.BeginAcquire(resource)
		out, err := coord.Acquire(ctx, req)
		if err != nil {
			return nil, err
		}
		if out.OK {
			return client.CompleteAcquire(req, out.Grant)
		}
		time.Sleep(min(out.RetryAfter, 100*time.Millisecond) + time.Millisecond)
	}
}
