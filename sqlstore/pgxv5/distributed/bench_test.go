package distributed_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
)

// benchDrivers are the profile and the default pgx driver, each on a fresh
// schema, for figures side by side.
type benchDriver struct {
	name string
	open func(b *testing.B) sqlstore.Driver[pgx.Tx]
}

func benchDrivers() []benchDriver {
	return []benchDriver{
		{"pgxv5", func(b *testing.B) sqlstore.Driver[pgx.Tx] {
			d := pgxv5.New(openPool(b, dbtest.PostgresSchemaURL(b), nil))
			if err := d.Migrate(context.Background()); err != nil {
				b.Fatal(err)
			}
			return d
		}},
		{"distributed", func(b *testing.B) sqlstore.Driver[pgx.Tx] { return open(b, "", nil, nil) }},
	}
}

// An acquisition and its release, one after another on one resource: the
// profile's steps (one statement each) against the default driver's one
// function call.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, bd := range benchDrivers() {
		b.Run(bd.name, func(b *testing.B) {
			ctx := context.Background()
			d := bd.open(b)
			c := lease.NewCoordinator(d, &lease.CoordinatorOptions{TTL: time.Minute})
			client, _ := lease.NewClient(&lease.ClientOptions{Holder: "h"})
			for b.Loop() {
				req, _ := client.BeginAcquire("r")
				out, err := c.Acquire(ctx, req)
				if err != nil || !out.OK {
					b.Fatalf("acquire = %+v, %v", out, err)
				}
				l, _ := client.CompleteAcquire(req, out.Grant)
				tok, _ := client.Release(l)
				if _, err := c.Release(ctx, tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A fenced transaction with nothing else in it: BEGIN, the floor check,
// COMMIT (the profile's floor upsert writes the row; the default driver's
// only locks it for an equal fence).
func BenchmarkCommit(b *testing.B) {
	for _, bd := range benchDrivers() {
		b.Run(bd.name, func(b *testing.B) {
			ctx := context.Background()
			d := bd.open(b)
			g := gate.New(d, nil)
			tok := fence.Token{Resource: "r", Holder: "h", Fence: 1}
			for b.Loop() {
				tx, err := d.Begin(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := g.Commit(ctx, tx, tok); err != nil {
					b.Fatal(err)
				}
				if err := d.Commit(ctx, tx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
