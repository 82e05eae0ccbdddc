package fencegatecli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/fencegate/fencegate/cmd/fencegate/internal/ops"
	"github.com/fencegate/fencegate/elect"
	"github.com/fencegate/fencegate/lease"
)

func electCommand() *command {
	cmd := &command{
		name:     "elect",
		synopsis: "stand for election and run a command only while leading",
		usage:    "elect --name NAME [--ttl 30s] [--holder ID] [--grace 5s] -- CMD [ARGS...]",
		help: `Stand for the election NAME: wait in line (in the order participants
started waiting, from any process) until this one leads, then run CMD for as
long as the term lasts, and resign when CMD exits, handing the lead to the
next in line at once. Exit with CMD's status (128+N if a signal N killed it).

A term is a lease on NAME: CMD's environment has its token, fence and lock
as run gives them (` + envToken + `, ` + envFence + `, ` + envLock + `,
` + envDSN + `), so that the leader's writes are fenced: after a new leader
was elected, 'fencegate gate' refuses the old one's.

Signals are handled as run handles them: before CMD starts, SIGINT, SIGTERM
or SIGHUP stop the campaign; then they are forwarded to CMD. If the term is
lost while CMD runs (a renewal finds the lease expired or superseded, or
renewals fail until its deadline), CMD's process group gets SIGTERM, then
SIGKILL after --grace, and elect exits 3. A leader killed without resigning
blocks the election until its --ttl ends.`,
		db: true, args: true, dashes: true,
	}
	fs := cmd.flagSet()
	name := fs.String("name", "", "the election (a lock name) to stand for (required)")
	ttl := durationFlag(fs, "ttl", ops.DefaultTTL, "`duration` of a term's lease; renewed when a third of it has passed")
	holderFlag := fs.String("holder", "", "who stands (default $"+envHolder+", else host-pid)")
	grace := durationFlag(fs, "grace", defaultGrace, "after a lost term, the `duration` CMD has between SIGTERM and SIGKILL")
	cmd.exec = func(ctx context.Context, c *cli, args []string) error {
		before, argv, found := splitDashes(args)
		switch {
		case len(before) > 0:
			return usagef("unexpected %q before --; put the command after --", before)
		case !found || len(argv) == 0:
			return usagef("missing -- CMD [ARGS...]")
		}
		if *name == "" {
			return usagef("--name is required")
		}
		if err := checkLock(*name); err != nil {
			return err
		}
		if err := checkTTL(*ttl); err != nil {
			return err
		}
		if *grace < 0 {
			return usagef("--grace must not be negative")
		}
		client, err := lease.NewClient(&lease.ClientOptions{Holder: c.holder(*holderFlag), TTL: *ttl})
		if err != nil {
			return usagef("%s", err)
		}
		b, err := c.database(ctx, true)
		if err != nil {
			return err
		}
		e, err := elect.New(b.Coord, client, &elect.Options{Name: *name})
		if err != nil {
			return usagef("%s", err)
		}
		return c.lead(ctx, cmd, b, e, *grace, argv)
	}
	return cmd
}

// lead campaigns for e and runs argv (supervised as run's child is) while
// e leads, then resigns.
func (c *cli) lead(ctx context.Context, cmd *command, b *ops.Backend, e *elect.Elector, grace time.Duration, argv []string) error {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)

	// A signal during the campaign stops it; once CMD starts, signals are
	// CMD's (supervise reads sigs).
	campaign, interrupt := context.WithCancelCause(ctx)
	defer interrupt(nil)
	won := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			interrupt(fmt.Errorf("interrupted by %v while campaigning", s))
		case <-won:
		}
	}()
	term, err := e.Campaign(campaign)
	close(won)
	if held, ok := errors.AsType[*lease.HeldError](err); ok {
		return heldBy(held) // the campaign was stopped: as run's wait
	}
	if err != nil {
		return err
	}
	c.logf(cmd, "%s: leading as %q with fence %d", e.Name(), e.Identity(), term.Fence())
	out, err := c.supervise(term.Context(), cmd, term.Lease(), b.DSN, argv, grace, sigs)
	if rerr := term.Resign(ctx); rerr != nil && !out.lost {
		c.logf(cmd, "warning: %v", rerr)
	}
	switch {
	case err != nil:
		return err
	case out.lost:
		return heldf("%s stopped after the term on %s was lost; exit %d", argv[0], e.Name(), exitHeld)
	case out.interrupted:
		return fmt.Errorf("interrupted: %v", context.Cause(ctx))
	}
	return exitWith(out.status)
}

func leaderCommand() *command {
	cmd := &command{
		name:     "leader",
		synopsis: "print who leads an election (holder, fence, until)",
		usage:    "leader [--json] NAME",
		help: `Print who leads the election NAME: the holder, the term's fence, and when
the term ends unless renewed, in the database's clock. Exit 3 when nobody
leads (the last term, if any, expired or was resigned: its holder and fence
are still printed). Like status, this is a snapshot.`,
		db: true, args: true,
	}
	fs := cmd.flagSet()
	asJSON := fs.Bool("json", false, "print JSON")
	cmd.exec = func(ctx context.Context, c *cli, args []string) error {
		if len(args) != 1 {
			return usagef("want one election NAME, got %d arguments", len(args))
		}
		if err := checkLock(args[0]); err != nil {
			return err
		}
		b, err := c.database(ctx, true)
		if err != nil {
			return err
		}
		st, err := b.Coord.Status(ctx, args[0])
		if err != nil {
			return err
		}
		if *asJSON {
			rep := struct {
				Name    string `json:"name"`
				Leading bool   `json:"leading"`
				Holder  string `json:"holder"`
				Fence   int64  `json:"fence"`
				Until   string `json:"until"`
			}{args[0], st.Held, st.Holder, st.Fence, ops.Stamp(st.ExpiresAt.Time())}
			if err := json.NewEncoder(c.stdout).Encode(rep); err != nil {
				return err
			}
		} else if st.Fence != 0 {
			fmt.Fprintf(c.stdout, "%s\tfence %d\tuntil %s\n", st.Holder, st.Fence, ops.Stamp(st.ExpiresAt.Time()))
		}
		switch {
		case st.Fence == 0:
			return heldf("%s never had a leader", args[0])
		case !st.Held:
			return heldf("%s has no leader now: the term of %q (fence %d) is over", args[0], st.Holder, st.Fence)
		}
		return nil
	}
	return cmd
}
