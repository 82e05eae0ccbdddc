package bench_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore"
)

// BenchmarkLeaseAcquireRelease times one holder's Acquire then Release of
// one resource on every kind of store (Postgres's SQL functions over pgx
// and database/sql, the shared steps on SQLite and MySQL), for before/after
// comparisons of the lease path: run two builds' test binaries in turns.
func BenchmarkLeaseAcquireRelease(b *testing.B) {
	for _, d := range dbtest.Drivers() {
		switch d.Name {
		case "sqlite", "mysql", "postgres-sql":
			b.Run(d.Name, func(b *testing.B) {
				benchAcquireRelease(b, d.SQL(b, d.DSN(b)).Driver)
			})
		case "pgx-cache-statement":
			b.Run(d.Name, func(b *testing.B) {
				benchAcquireRelease(b, d.Pgx(b, d.DSN(b)).Driver)
			})
		}
	}
}

var (
	_ sqlstore.Driver[*sql.Tx] = nil
	_ sqlstore.Driver[pgx.Tx]  = nil
)

func benchAcquireRelease(b *testing.B, store sqlstore.Store) {
	ctx := context.Background()
	coord := lease.NewCoordinator(store, nil)
	client, err := lease.NewClient(&lease.ClientOptions{Holder: "bench", TTL: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		req, err := client.BeginAcquire("r")
		if err != nil {
			b.Fatal(err)
		}
		out, err := coord.Acquire(ctx, req)
		if err != nil || !out.OK {
			b.Fatalf("Acquire = %+v, %v", out, err)
		}
		l, err := client.CompleteAcquire(req, out.Grant)
		if err != nil {
			b.Fatal(err)
		}
		tok, err := client.Release(l)
		if err != nil {
			b.Fatal(err)
		}
		if ok, err := coord.Release(ctx, tok); err != nil || !ok {
			b.Fatalf("Release = %v, %v", ok, err)
		}
	}
}

// BenchmarkLeaseRenewBatch times Coordinator.RenewBatch of n live leases
// on the Postgres drivers, whose batch is one statement, for before/after
// comparisons of the renewal rule: run two builds' test binaries in turns.
// A renewal moves only expires_at, so the same requests renew again each
// round.
func BenchmarkLeaseRenewBatch(b *testing.B) {
	for _, d := range dbtest.Drivers() {
		var store func(b *testing.B) sqlstore.Store
		switch d.Name {
		case "postgres-sql":
			store = func(b *testing.B) sqlstore.Store { return d.SQL(b, d.DSN(b)).Driver }
		case "pgx-cache-statement":
			store = func(b *testing.B) sqlstore.Store { return d.Pgx(b, d.DSN(b)).Driver }
		default:
			continue
		}
		for _, n := range []int{1, 100, 1000} {
			b.Run(fmt.Sprintf("%s/n=%d", d.Name, n), func(b *testing.B) {
				benchRenewBatch(b, store(b), n)
			})
		}
	}
}

func benchRenewBatch(b *testing.B, store sqlstore.Store, n int) {
	ctx := context.Background()
	coord := lease.NewCoordinator(store, nil)
	client, err := lease.NewClient(&lease.ClientOptions{Holder: "bench", TTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	leases := make([]*lease.Lease, n)
	for i := range leases {
		req, err := client.BeginAcquire(fmt.Sprintf("renew/%d", i))
		if err != nil {
			b.Fatal(err)
		}
		out, err := coord.Acquire(ctx, req)
		if err != nil || !out.OK {
			b.Fatalf("Acquire = %+v, %v", out, err)
		}
		if leases[i], err = client.CompleteAcquire(req, out.Grant); err != nil {
			b.Fatal(err)
		}
	}
	reqs := make([]*lease.RenewRequest, n)
	for b.Loop() {
		for i, l := range leases {
			if reqs[i], err = client.BeginRenewal(l); err != nil {
				b.Fatal(err)
			}
		}
		outs, err := coord.RenewBatch(ctx, reqs)
		if err != nil {
			b.Fatal(err)
		}
		for i, out := range outs {
			if !out.OK {
				b.Fatalf("renewal %d refused", i)
			}
		}
	}
}
