package ops

import (
	"context"
	"database/sql"
	"os"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore/sqlite"
	"github.com/fencegate/fencegate/sqlstore/sqlopen"
)

// OpenTimeout bounds connecting to the database and migrating it.
const OpenTimeout = 30 * time.Second

// HostPID names this process: "host-pid".
func HostPID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return host + "-" + strconv.Itoa(os.Getpid()) // no colon: tokens would escape it
}

// Backend is an open database with fencegate's coordinator and gate on it:
// what the commands and the MCP server act through. Open makes one.
type Backend struct {
	Driver sqlopen.Driver
	DSN    string // the DSN, made absolute for SQLite, to hand to run's child
	Coord  *lease.Coordinator
	Gate   *gate.Gate[*sql.Tx]
}

// Open connects to the database dsn (already resolved: sqlopen.Resolve)
// and, unless migrate is false, applies fencegate's migrations, which is
// idempotent: every command that uses the tables migrates first, so a new
// database needs no set-up. mp and tp may be nil (the global providers).
// Connecting and migrating are bounded by OpenTimeout.
func Open(ctx context.Context, dsn string, migrate bool, mp metric.MeterProvider, tp trace.TracerProvider) (*Backend, error) {
	ctx, cancel := context.WithTimeout(ctx, OpenTimeout)
	defer cancel()
	d, err := sqlopen.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	if migrate {
		if err := d.Migrate(ctx); err != nil { // idempotent; retries a concurrent first migration
			d.Close()
			return nil, err
		}
	}
	return newBackend(d, dsn, mp, tp), nil
}

// OpenReadOnly opens the SQLite file dsn names for reading only
// (sqlite.OpenReadOnly), for a command that only reads when Open failed
// with sqlite.ErrReadOnly. It does not migrate.
func OpenReadOnly(ctx context.Context, dsn string, mp metric.MeterProvider, tp trace.TracerProvider) (*Backend, error) {
	ctx, cancel := context.WithTimeout(ctx, OpenTimeout)
	defer cancel()
	d, err := sqlite.OpenReadOnly(ctx, dsn)
	if err != nil {
		return nil, err
	}
	return newBackend(d, dsn, mp, tp), nil
}

func newBackend(d sqlopen.Driver, dsn string, mp metric.MeterProvider, tp trace.TracerProvider) *Backend {
	return &Backend{
		Driver: d,
		DSN:    dsn,
		Coord:  lease.NewCoordinator(d, &lease.CoordinatorOptions{MeterProvider: mp, TracerProvider: tp}),
		Gate:   gate.New(d, &gate.Options{VerifyIssued: true, MeterProvider: mp, TracerProvider: tp}),
	}
}

// Close stops the coordinator's background work (Coordinator.Close), then
// closes the database.
func (b *Backend) Close() error {
	b.Coord.Close()
	return b.Driver.Close()
}

// Dur formats a duration for people: to the millisecond below a minute, to
// the second above.
func Dur(d time.Duration) string {
	if d >= time.Minute || d <= -time.Minute {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Millisecond).String()
}

// StampLayout is the one way the command and the MCP server print a time,
// in text and in JSON: RFC 3339 in UTC with exactly three decimals.
const StampLayout = "2006-01-02T15:04:05.000Z07:00"

// Stamp formats a database timestamp in StampLayout.
func Stamp(t time.Time) string { return t.UTC().Format(StampLayout) }
