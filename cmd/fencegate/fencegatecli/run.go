package fencegatecli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"time"

	"github.com/fencegate/fencegate/cmd/fencegate/internal/ops"
	"github.com/fencegate/fencegate/lease"
)

// defaultGrace is how long run waits after SIGTERM before SIGKILL.
const defaultGrace = 5 * time.Second

// childWaitDelay bounds how long run waits, after its child exits, for the
// child's output to drain when stdout or stderr is not a file (a grandchild
// may keep the pipe open).
const childWaitDelay = time.Second

func runCommand() *command {
	cmd := &command{
		name:     "run",
		synopsis: "hold a lock for the whole life of a command",
		usage:    "run (--lock NAME | --path FILE... [--root DIR]) [--ttl 30s] [--holder ID] [--wait D] [--grace 5s] -- CMD [ARGS...]",
		help: `Claim the lock, run CMD while renewing the lease in the background, and
release the lock when CMD exits. Exit with CMD's status (128+N if a signal N
killed it).

CMD's environment has ` + envToken + ` (its token), ` + envLock + `, ` + envFence + ` and
` + envDSN + `, so that it can make fenced writes itself:
    fencegate run --lock deploy-slot -- sh -c 'fencegate gate -- "UPDATE ..."'

SIGINT, SIGTERM and SIGHUP sent to run are forwarded to CMD. CMD runs in a
process group of its own (so it should not read from the terminal); on
Linux it gets SIGTERM if run itself dies.

If the lock is held, or busy (in use by another transaction, such as the
previous holder's write), exit 3 without starting CMD (with --wait, wait
up to that long for it first, in line with other waiters, as claim does). --ttl is at least 100ms. If the lease
is lost while CMD runs (a renewal finds it expired, released or superseded,
or renewals fail until its deadline), CMD's process group gets SIGTERM, then
SIGKILL after --grace, and run exits 3. The lease is a signal, not a guard:
CMD's writes are safe only behind 'fencegate gate' (or gate.Commit).

--path (repeatable) and --root hold files instead of a lock, as claim's do.`,
		db: true, args: true, dashes: true,
	}
	fs := cmd.flagSet()
	lock := fs.String("lock", "", "the lock (resource) to hold (or --path)")
	pf := addPathFlags(fs)
	ttl := durationFlag(fs, "ttl", ops.DefaultTTL, "`duration` of the lease; renewed when a third of it has passed")
	holderFlag := fs.String("holder", "", "who holds it (default $"+envHolder+", else host-pid)")
	wait := durationFlag(fs, "wait", 0, "if the lock is held, keep trying for this `duration` before exiting 3")
	grace := durationFlag(fs, "grace", defaultGrace, "after a lost lease, the `duration` CMD has between SIGTERM and SIGKILL")
	cmd.exec = func(ctx context.Context, c *cli, args []string) error {
		before, argv, found := splitDashes(args)
		switch {
		case len(before) > 0:
			return usagef("unexpected %q before --; put the command after --", before)
		case !found || len(argv) == 0:
			return usagef("missing -- CMD [ARGS...]")
		}
		resources, name, err := pf.resources(*lock)
		if err != nil {
			return err
		}
		if err := checkTTL(*ttl); err != nil {
			return err
		}
		if *wait < 0 || *grace < 0 {
			return usagef("--wait and --grace must not be negative")
		}
		client, err := lease.NewClient(&lease.ClientOptions{Holder: c.holder(*holderFlag), TTL: *ttl})
		if err != nil {
			return usagef("%s", err)
		}
		b, err := c.database(ctx, true)
		if err != nil {
			return err
		}
		return c.runLocked(ctx, cmd, b, client, resources, name, *wait, *grace, argv)
	}
	return cmd
}

// runLocked runs argv while holding resources (named name in messages)
// for client's holder, once it is
// free or wait has passed, and returns how run ends: with argv's own exit
// status if it ran to its end.
func (c *cli) runLocked(ctx context.Context, cmd *command, b *ops.Backend, client *lease.Client, resources []string, name string, wait, grace time.Duration, argv []string) error {
	// From here on, signals are ours to forward (or, before CMD starts, to
	// stop waiting): run must live to release the lease.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)

	// A signal before CMD starts stops the wait; from CMD's start on,
	// signals are CMD's.
	waitCtx, interrupt := context.WithCancelCause(ctx)
	defer interrupt(nil)
	stopWatch, watchDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watchDone)
		select {
		case s := <-sigs:
			interrupt(fmt.Errorf("interrupted by %v while waiting", s))
		case <-stopWatch:
		}
	}()
	unwatch := sync.OnceFunc(func() { close(stopWatch); <-watchDone })
	defer unwatch()
	var opts []lease.HoldOption
	if wait > 0 {
		opts = append(opts, lease.Wait(wait))
	}

	var (
		started bool
		out     childOutcome
		holdErr error
	)
	err := ops.HoldSet(waitCtx, client, b, resources, func(ctx context.Context, l *lease.Lease) error {
		unwatch()
		if err := context.Cause(waitCtx); err != nil {
			return err // interrupted as the lease was granted: CMD never starts
		}
		started = true
		var err error
		out, err = c.supervise(ctx, cmd, l, b.DSN, argv, grace, sigs)
		return err
	}, opts...)
	if started {
		holdErr, err = err, nil // not a failure to start: CMD ran
	}
	if held, ok := errors.AsType[*lease.HeldError](err); ok {
		return heldBy(held)
	}
	if errors.Is(err, lease.ErrLeaseLost) { // granted with no time left: CMD never started
		return heldf("%v", err)
	}
	if errors.Is(err, lease.ErrBusy) { // CMD never started
		return busy(name, err)
	}
	if err != nil {
		return err
	}
	switch {
	case out.lost:
		if holdErr != nil && !errors.Is(holdErr, lease.ErrLeaseLost) {
			c.logf(cmd, "%v", holdErr)
		}
		return heldf("%s stopped after the lease on %s was lost; exit %d", argv[0], name, exitHeld)
	case out.interrupted:
		return fmt.Errorf("interrupted: %v", context.Cause(ctx))
	case holdErr != nil && !out.ran:
		return holdErr
	case holdErr != nil:
		// CMD ran to its end; only the release failed. The lease expires by
		// itself at its ttl.
		c.logf(cmd, "warning: %v", holdErr)
	}
	return exitWith(out.status)
}

// childOutcome is how the child of run ended.
type childOutcome struct {
	ran         bool // it started and exited
	status      int  // its exit status, 128+N for signal N
	lost        bool // the lease was lost, and the child stopped for it
	interrupted bool // run's context ended, and the child stopped for it
}

// supervise runs argv with l's token in its environment, forwarding the
// signals that arrive on sigs, until it exits. When ctx ends (the lease was
// lost, or run was cancelled) it stops the child's process group: SIGTERM,
// then SIGKILL after grace.
func (c *cli) supervise(ctx context.Context, cmd *command, l *lease.Lease, dsn string, argv []string, grace time.Duration, sigs <-chan os.Signal) (childOutcome, error) {
	token := l.Token()
	child := exec.Command(argv[0], argv[1:]...)
	child.Stdin, child.Stdout, child.Stderr = c.stdin, c.childStdout, c.childStderr
	child.Env = append(os.Environ(),
		envToken+"="+token.String(),
		envLock+"="+ops.TokenName(token),
		envFence+"="+strconv.FormatInt(token.Fence, 10),
		envDSN+"="+dsn,
	)
	child.WaitDelay = childWaitDelay
	prepareChild(child)
	if err := child.Start(); err != nil {
		return childOutcome{}, fmt.Errorf("start %s: %w", argv[0], err)
	}
	done := make(chan struct{})
	go func() {
		_ = child.Wait() // the status is in child.ProcessState
		close(done)
	}()

	var (
		out     childOutcome
		ctxDone = ctx.Done()
		kill    <-chan time.Time // set once the child was sent SIGTERM
	)
	for {
		select {
		case <-done:
			out.ran, out.status = true, exitStatus(child.ProcessState)
			if out.lost || out.interrupted {
				_ = killChild(child) // whatever of its group is left
			}
			return out, nil

		case s := <-sigs:
			if err := signalChild(child, s); err != nil && !errors.Is(err, os.ErrProcessDone) {
				c.logf(cmd, "forwarding %v to %s: %v", s, argv[0], err)
			}

		case <-ctxDone:
			ctxDone = nil
			cause := context.Cause(ctx)
			if errors.Is(cause, lease.ErrLeaseLost) {
				out.lost = true
				c.logf(cmd, "%v", cause)
			} else {
				out.interrupted = true
			}
			c.logf(cmd, "stopping %s: SIGTERM now, SIGKILL in %s", argv[0], ops.Dur(grace))
			_ = terminateChild(child)
			timer := time.NewTimer(grace)
			defer timer.Stop()
			kill = timer.C

		case <-kill:
			kill = nil
			c.logf(cmd, "%s is still running %s after SIGTERM: SIGKILL", argv[0], ops.Dur(grace))
			_ = killChild(child)
		}
	}
}
