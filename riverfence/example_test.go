package riverfence_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/riverfence"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
)

// The floor of a job rises in the transaction that hands it to a new
// attempt. Here the attempt is raised by hand, the way River's fetch raises
// it, twice (a rescue in between): attempt 1 is then refused, whatever it
// tries to commit, and attempt 2 admitted.
func ExampleMigrate() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	store := pgxv5.New(pool)
	if err := store.Migrate(ctx); err != nil { // fencegate's tables first,
		log.Fatal(err)
	}
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil { // River's,
		log.Fatal(err)
	}
	if err := riverfence.Migrate(ctx, pool); err != nil { // then the trigger
		log.Fatal(err)
	}

	client, err := river.NewClient(driver, &river.Config{}) // inserts only
	if err != nil {
		log.Fatal(err)
	}
	ins, err := client.Insert(ctx, effectArgs{}, nil)
	if err != nil {
		log.Fatal(err)
	}
	for range 2 {
		if _, err := pool.Exec(ctx, `UPDATE river_job SET attempt = attempt + 1, state = 'running' WHERE id = $1`, ins.Job.ID); err != nil {
			log.Fatal(err)
		}
	}

	g := gate.New(store, nil) // VerifyIssued off: River, not fencegate, issues these fences
	for _, attempt := range []int{1, 2} {
		token, err := riverfence.Token(&rivertype.JobRow{ID: ins.Job.ID, Attempt: attempt})
		if err != nil {
			log.Fatal(err)
		}
		tx, err := pool.Begin(ctx)
		if err != nil {
			log.Fatal(err)
		}
		err = g.Commit(ctx, tx, token) // then the job's writes, CompleteTx, tx.Commit
		if errors.Is(err, gate.ErrStaleFence) {
			fmt.Printf("attempt %d refused\n", attempt)
			continue
		} else if err != nil {
			log.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("attempt %d admitted\n", attempt)
	}
	// Output:
	// attempt 1 refused
	// attempt 2 admitted
}
