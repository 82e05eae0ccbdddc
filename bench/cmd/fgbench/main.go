// Command fgbench runs fencegate's benchmarks side by side with Postgres
// advisory locks, cirello.io/pglock, MariaDB's GET_LOCK and the unfenced
// baseline, on loopback and through a proxy that adds a network's round
// trip, shows progress on stderr, and writes RESULTS.md and chart.svg.
//
//	cd bench && go run ./cmd/fgbench            # full run, about 20 minutes
//	cd bench && go run ./cmd/fgbench -quick     # a few minutes
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/fencegate/fencegate/bench"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == bench.ChildRole {
		os.Exit(bench.WedgedChild(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == bench.MySQLChildRole {
		os.Exit(bench.WedgedMySQLChild(os.Args[2:]))
	}
	var (
		dsn     = flag.String("postgres", envOr("FENCEGATE_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "Postgres server URL (a schema of its own is created and dropped)")
		myDSN   = flag.String("mysql", envOr("FENCEGATE_BENCH_MYSQL_URL", envOr("FENCEGATE_TEST_MYSQL_URL", "mysql://root@127.0.0.1:3306/")), "MySQL/MariaDB server URL for the MariaDB column (a database of its own is created and dropped; empty: skip it)")
		quick   = flag.Bool("quick", false, "short rounds and small tables: a few minutes")
		dur     = flag.Duration("duration", 1500*time.Millisecond, "run time per variant per round")
		rounds  = flag.Int("rounds", 3, "interleaved A/B rounds")
		out     = flag.String("out", ".", "directory for RESULTS.md and chart.svg")
		only    = flag.String("only", "", "comma-separated scenarios to run (1,fencesql,guard,batch,2,3,4,5,6,7,fairness,mariadb,hold,queue,otel,elect,sets,notify,soak,wal); default every one")
		fair    = flag.Duration("fair", 10*time.Second, "run time per variant of the fairness scenario (-quick: 2s)")
		writers = flag.String("writers", "1,16,64", "writer counts for scenario 2 and notify")
		soak    = flag.Duration("soak", time.Minute, "length of the soak scenario")
		rtt     = flag.Duration("rtt", time.Millisecond, "round trip a delaying proxy adds for the second network path (0: loopback only)")
	)
	flag.Parse()
	cfg := bench.Config{
		PostgresURL: *dsn, MySQLURL: *myDSN, RTT: *rtt, Duration: *dur, Rounds: *rounds, BigFloors: 1_000_000, Leases: []int{1000, 10_000},
		HoldLeases:   []int{1000, 10_000, 100_000},
		Progress:     func(s string) { fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05"), s) },
		FairDuration: *fair,
		SoakDuration: *soak,
	}
	for _, w := range strings.Split(*writers, ",") {
		var n int
		if _, err := fmt.Sscan(w, &n); err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "bad -writers %q\n", *writers)
			os.Exit(2)
		}
		cfg.Writers = append(cfg.Writers, n)
	}
	if *quick {
		cfg.Duration, cfg.Rounds, cfg.BigFloors, cfg.Leases, cfg.HoldLeases = 250*time.Millisecond, 2, 100_000, []int{1000}, []int{1000, 10_000}
		cfg.FairDuration = min(cfg.FairDuration, 2*time.Second)
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cfg.Self = self
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := bench.RunAll(ctx, cfg, *out, *only, *quick); err != nil {
		fmt.Fprintln(os.Stderr, "fgbench:", err)
		os.Exit(1)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
