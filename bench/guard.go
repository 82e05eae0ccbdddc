package bench

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/guard"
)

// The guard scenario's variants.
const (
	vGuardPlain  = "gate.Commit tx, unguarded table"
	vGuardFixed  = "gate.Commit tx, guarded table (fixed resource)"
	vGuardByRow  = "gate.Commit tx, guarded table (resource per row)"
	updateGuardA = `UPDATE bench_guard_fixed SET n = n + 1 WHERE id = $1`
	updateGuardB = `UPDATE bench_guard_row SET n = n + 1 WHERE id = $1`
)

// Guard measures a guarded table's trigger: the fenced write of scenario 1
// on an unguarded table against the same write on a table guarded by one
// fixed resource and on one guarded by a resource expression per row.
func Guard(ctx context.Context, cfg Config, pg *PG, r *Report) error {
	r.f("## guard. A fenced write on a guarded table against the same write unguarded\n\n")
	r.f("Each op is BEGIN, gate.Commit, `UPDATE … SET n = n + 1 WHERE id = $1`, COMMIT, 1 writer, pgx, %d interleaved rounds of %s. "+
		"The guarded tables (package guard) carry the AFTER row trigger that looks up the resource's floor row and checks that this transaction holds it; "+
		"one names a fixed resource (item/1, the key's own when writing key 1 only), the other computes it per row (`resource` column).\n\n", cfg.Rounds, cfg.Duration)
	if _, err := pg.Pool.Exec(ctx, `
CREATE TABLE bench_guard_fixed (id int PRIMARY KEY, n bigint NOT NULL);
INSERT INTO bench_guard_fixed SELECT g, 0 FROM generate_series(1, 64) g;
CREATE TABLE bench_guard_row (id int PRIMARY KEY, n bigint NOT NULL, resource text NOT NULL);
INSERT INTO bench_guard_row SELECT g, 0, 'item/' || g FROM generate_series(1, 64) g;`); err != nil {
		return err
	}
	admin, err := guard.New(pg.DB, "postgres")
	if err != nil {
		return err
	}
	if _, err := admin.Install(ctx, guard.Spec{Table: "bench_guard_fixed", Resource: Token(1).Resource}); err != nil {
		return err
	}
	if _, err := admin.Install(ctx, guard.Spec{Table: "bench_guard_row", ResourceExpr: "resource"}); err != nil {
		return err
	}
	pgs, err := onNets(ctx, cfg, pg, 2, ExecModes[0])
	if err != nil {
		return err
	}
	defer closeAll(ctx, pgs)
	var g grid
	for _, t := range pgs {
		fenced := func(stmt string) Op {
			return func(ctx context.Context, key int) error {
				return pgx.BeginFunc(ctx, t.Pool, func(tx pgx.Tx) error {
					if err := t.GatePgx.Commit(ctx, tx, Token(key)); err != nil {
						return err
					}
					_, err := tx.Exec(ctx, stmt, key)
					return err
				})
			}
		}
		g.add(t.Net, vGuardPlain, fenced(updateItem))
		g.add(t.Net, vGuardFixed, fenced(updateGuardA))
		g.add(t.Net, vGuardByRow, fenced(updateGuardB))
	}
	g.run(ctx, cfg, 1, OneKey, "guard")
	for _, t := range pgs {
		res := g.rows(t.Net, vGuardPlain, vGuardFixed, vGuardByRow)
		r.f("### Postgres, %s\n\n", t.Net)
		r.table(res, 0)
		r.set(Ratio(res[1], res[0]), "guard", t.Net, "fixed")
		r.set(Ratio(res[2], res[0]), "guard", t.Net, "per row")
	}
	return nil
}
