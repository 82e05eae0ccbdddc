package bench

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore"
)

// setSizes are the claim sizes the sets scenario compares.
var setSizes = []int{1, 4, 16}

// setNames are the k resources of row key's claim: k = 1 is the plain name
// of scenario 1 and 3 (the one-statement path), more a set.
func setNames(prefix string, key, k int) []string {
	if k == 1 {
		return []string{fmt.Sprintf("%s/%d", prefix, key)}
	}
	out := make([]string, k)
	for i := range k {
		out[i] = fmt.Sprintf("%s/%d/%02d", prefix, key, i)
	}
	return out
}

// setToken is the token over row key's k floors, at the floor's fence.
func setToken(key, k int) fence.Token {
	if k == 1 {
		return Token(key)
	}
	t, err := fence.NewSetToken(setNames("item", key, k), Holder, Fence)
	if err != nil {
		panic(err)
	}
	return t
}

// Sets is scenario sets: claims of k resources at once (k = 1, 4, 16).
// acquire+release of a k-set, and the write under a k-set's token (Commit
// judging k floors) against the identical unfenced transaction, on
// Postgres (pgx, loopback) and SQLite, one worker.
func Sets(ctx context.Context, cfg Config, r *Report) error {
	pgs, done, err := schemaOnNets(ctx, cfg, 8)
	if err != nil {
		return err
	}
	defer done()
	pg := pgs[0]
	lite, err := NewSQLite(ctx)
	if err != nil {
		return err
	}
	defer lite.Close()
	stores := []struct {
		name  string
		store sqlstore.Store
		plain Op
		admit func(context.Context, fence.Token) error
		write func(k int) Op
	}{
		{"postgres", pg.Pgx, pg.PgPlainTx, pg.GatePgx.Admit, func(k int) Op {
			return func(ctx context.Context, key int) error {
				tok := setToken(key, k)
				return pgx.BeginFunc(ctx, pg.Pool, func(tx pgx.Tx) error {
					if err := pg.GatePgx.Commit(ctx, tx, tok); err != nil {
						return err
					}
					_, err := tx.Exec(ctx, updateItem, key)
					return err
				})
			}
		}},
		{"sqlite", lite.D, lite.PlainTx, lite.Gate.Admit, func(k int) Op {
			return func(ctx context.Context, key int) error {
				tok := setToken(key, k)
				return sqlTx(ctx, lite.D.DB(), func(tx *sql.Tx) error {
					if err := lite.Gate.Commit(ctx, tx, tok); err != nil {
						return err
					}
					_, err := tx.ExecContext(ctx, updateItemSQLite, key)
					return err
				})
			}
		}},
	}
	var g grid
	for _, s := range stores {
		coord := lease.NewCoordinator(s.store, &lease.CoordinatorOptions{TTL: 30 * time.Second})
		client, err := lease.NewClient(&lease.ClientOptions{Holder: Holder, TTL: 30 * time.Second})
		if err != nil {
			return err
		}
		g.add(s.name, vSetPlain, s.plain)
		for _, k := range setSizes {
			// The floors a k-set's write judges: admitted once, as a
			// lease's grant would.
			for key := 1; key <= Keys; key++ {
				if err := s.admit(ctx, setToken(key, k)); err != nil {
					return err
				}
			}
			g.add(s.name, vSetCommit(k), s.write(k))
			g.add(s.name, vSetLease(k), func(ctx context.Context, key int) error {
				req, err := client.BeginAcquireSet(setNames("lease", key, k))
				if err != nil {
					return err
				}
				out, err := coord.Acquire(ctx, req)
				if err != nil {
					return err
				}
				if !out.OK {
					return fmt.Errorf("held by %s", out.HeldBy)
				}
				l, err := client.CompleteAcquire(req, out.Grant)
				if err != nil {
					return err
				}
				tok, err := client.Release(l)
				if err != nil {
					return err
				}
				_, err = coord.Release(ctx, tok)
				return err
			})
		}
	}
	g.run(ctx, cfg, 1, Distinct, "sets")

	r.f("## Sets: claims of k resources at once\n\n")
	r.f("One worker. *Commit, k members* is BEGIN, gate.Commit with a token of k resources (k = 1: the plain token of scenario 1; more: a set token, one floor statement per member), the UPDATE, COMMIT, against the identical unfenced transaction; *acquire+release, k members* is BeginAcquireSet (k = 1: BeginAcquire, the one-statement path), Coordinator.Acquire, CompleteAcquire, Release, Coordinator.Release.\n\n")
	for _, s := range stores {
		names := []string{vSetPlain}
		for _, k := range setSizes {
			names = append(names, vSetCommit(k))
		}
		for _, k := range setSizes {
			names = append(names, vSetLease(k))
		}
		res := g.rows(s.name, names...)
		r.f("### %s\n\n", s.name)
		r.table(res, 0)
	}
	return nil
}

const vSetPlain = "unfenced BEGIN/UPDATE/COMMIT"

func vSetCommit(k int) string { return fmt.Sprintf("Commit, %d members", k) }
func vSetLease(k int) string  { return fmt.Sprintf("acquire+release, %d members", k) }
