package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/internal/dbtest"
)

// BenchmarkHotPath reports allocations per gate.Commit, acquire, renew and
// release on Postgres through pgx (go test -bench HotPath -benchmem). The
// pgx-shape rows are pgx's own cost for a statement of each path's
// arguments and columns (in a transaction for the commit), to subtract:
// what is left is fencegate's. select-1 and begin-commit are pgx's least.
func BenchmarkHotPath(b *testing.B) {
	ctx := context.Background()
	pg, err := NewPG(ctx, dbtest.PostgresURL(b), 8)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pg.Close(context.Background()) })
	e, err := newLeaseEnv(pg, 30*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	tok := Token(1)
	b.Run("pgx-select-1", func(b *testing.B) {
		for b.Loop() {
			var n int
			if err := pg.Pool.QueryRow(ctx, `SELECT 1`).Scan(&n); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("pgx-begin-commit", func(b *testing.B) {
		for b.Loop() {
			if err := pgx.BeginFunc(ctx, pg.Pool, func(pgx.Tx) error { return nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
	// pgx's cost of a statement of each hot path's shape: its arguments
	// (each a string or an int64 boxed into pgx's ...any) and its columns
	// (each text one a string pgx makes), scanned into one struct. The
	// arguments are made at run time, as the hot paths' are (a constant
	// string goes into an interface without an allocation).
	resource, holder := fmt.Sprint("alloc/", 3), fmt.Sprint("bench-", "holder")
	requestID, lockTimeout := fmt.Sprintf("%032x", 3), fmt.Sprintf("%dms", 5000)
	b.Run("pgx-shape-acquire", func(b *testing.B) {
		for b.Loop() {
			d := new(struct {
				status, resource, holder, requestID, floorHolder string
				fence, granted, expires, now, rFence, rFloor     int64
				released                                         bool
			})
			err := pg.Pool.QueryRow(ctx, `SELECT 'granted', $1::text, $2::text, 1000::bigint, $3::text, $4::bigint, $4::bigint,
  $5::text = '', $4::bigint, 0::bigint, 0::bigint, ''::text`,
				resource, holder, requestID, int64(30_000_000), lockTimeout).
				Scan(&d.status, &d.resource, &d.holder, &d.fence, &d.requestID, &d.granted, &d.expires, &d.released, &d.now,
					&d.rFence, &d.rFloor, &d.floorHolder)
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("pgx-shape-renew", func(b *testing.B) {
		fence := int64(1000)
		for b.Loop() {
			d := new(struct {
				resource, holder, requestID  string
				fence, granted, expires, now int64
				released                     bool
			})
			err := pg.Pool.QueryRow(ctx, `SELECT $1::text, $2::text, $3::bigint, 'x'::text, $4::bigint, $4::bigint, false, $4::bigint`,
				resource, holder, fence, int64(30_000_000)).
				Scan(&d.resource, &d.holder, &d.fence, &d.requestID, &d.granted, &d.expires, &d.released, &d.now)
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("pgx-shape-release", func(b *testing.B) {
		fence := int64(1000)
		for b.Loop() {
			if _, err := pg.Pool.Exec(ctx, `SELECT WHERE $1::text IS NOT NULL AND $2::text IS NOT NULL AND $3::bigint > 0`,
				resource, holder, fence); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("pgx-shape-commit", func(b *testing.B) {
		fence := int64(tok.Fence)
		for b.Loop() {
			err := pgx.BeginFunc(ctx, pg.Pool, func(tx pgx.Tx) error {
				d := new(struct {
					floor  int64
					holder string
				})
				return tx.QueryRow(ctx, `SELECT $2::bigint, $3::text WHERE $1::text IS NOT NULL`, tok.Resource, fence, tok.Holder).Scan(&d.floor, &d.holder)
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("gate-commit", func(b *testing.B) {
		for b.Loop() {
			if err := pgx.BeginFunc(ctx, pg.Pool, func(tx pgx.Tx) error { return pg.GatePgx.Commit(ctx, tx, tok) }); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("acquire+release", func(b *testing.B) {
		for b.Loop() {
			l, err := e.acquire(ctx, "alloc/1")
			if err != nil {
				b.Fatal(err)
			}
			if err := e.release(ctx, l); err != nil {
				b.Fatal(err)
			}
		}
	})
	// Each half alone, the other outside the timer (allocations are
	// counted only while it runs).
	b.Run("acquire", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			l, err := e.acquire(ctx, "alloc/3")
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if err := e.release(ctx, l); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
	b.Run("release", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			l, err := e.acquire(ctx, "alloc/4")
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if err := e.release(ctx, l); err != nil {
				b.Fatal(err)
			}
		}
	})
	l, err := e.acquire(ctx, "alloc/2")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("renew", func(b *testing.B) {
		for b.Loop() {
			if err := e.renew(ctx, l); err != nil {
				b.Fatal(err)
			}
		}
	})
}
