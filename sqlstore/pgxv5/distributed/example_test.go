package distributed_test

import (
	"context"
	"errors"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore/pgxv5/distributed"
)

// A lease and a fenced write on a CockroachDB cluster whose nodes' clocks
// may differ by up to 500 ms (its default --max-offset): the margin comes
// off the lease's TTL, and g.Do runs the write again when the engine
// aborts it with a serialization failure. (Not run: it needs a server.)
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close() // the driver has no Close: the pool stays the caller's
	d, err := distributed.New(pool, &distributed.Options{MaxClockOffset: 500 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	if err := d.Migrate(ctx); err != nil { // from one process: no migration lock
		log.Fatal(err)
	}

	coord := lease.NewCoordinator(d, &lease.CoordinatorOptions{TTL: 30 * time.Second})
	client, err := lease.NewClient(&lease.ClientOptions{Holder: "worker-a"})
	if err != nil {
		log.Fatal(err)
	}
	l, err := coord.AcquireWait(ctx, client, "account/42") // hand-over by polling
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("fence %d, %v left (at most 29.5 s)", l.Token().Fence, l.Remaining())

	g := gate.New(d, &gate.Options{VerifyIssued: true})
	err = g.Do(ctx, l.Token(), func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance - $1 WHERE id = $2`, 10, 42)
		return err
	})
	if errors.Is(err, gate.ErrStaleFence) {
		log.Printf("superseded: %v", err) // nothing was written
	} else if err != nil {
		log.Fatal(err)
	}
	if tok, err := client.Release(l); err == nil {
		_, _ = coord.Release(ctx, tok)
	}
}
