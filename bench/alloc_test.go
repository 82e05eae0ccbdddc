package bench

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/internal/dbtest"
)

// BenchmarkHotPath reports allocations per gate.Commit, acquire, renew and
// release on Postgres through pgx (go test -bench HotPath -benchmem). The
// plain-tx and select-1 rows are pgx's own cost for a transaction and for a
// statement, to subtract: what is left is fencegate's.
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
