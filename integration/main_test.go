package integration

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"

	"github.com/fencegate/fencegate/integration/internal/faults"
	"github.com/fencegate/fencegate/internal/dbtest"
)

// EnvSoak turns on the soak: "1" or "true" for 30 minutes, or a duration.
const EnvSoak = "FENCEGATE_SOAK"

var soakFlag = flag.Duration("soak", 0, "run histories for this long per dialect (the soak); also "+EnvSoak)

// workerBin is the fgworker binary TestMain builds.
var workerBin string

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "fencegate-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := buildWorker(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stopContainer := registerContainerFallback()
	defer stopContainer()
	defer stopCluster()

	code := m.Run()
	printSummary(os.Stdout)
	return code
}

// buildWorker builds cmd/fgworker without the race detector: the workers
// are many and busy, and the race detector guards the harness, which runs
// in this process.
func buildWorker(dir string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	workerBin = filepath.Join(dir, "fgworker")
	if runtime.GOOS == "windows" {
		workerBin += ".exe"
	}
	cmd := exec.Command(goBin, "build", "-o", workerBin, "./cmd/fgworker")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building fgworker: %v\n%s", err, out)
	}
	return nil
}

// registerContainerFallback lets dbtest start a testcontainers Postgres when
// no URL is set, but only when a Docker engine answers.
func registerContainerFallback() (stop func()) {
	var ctr *tcpostgres.PostgresContainer
	dbtest.Fallback = func() (string, error) {
		if !dockerAnswers() {
			return "", nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		c, err := tcpostgres.Run(ctx, "postgres:16-alpine",
			tcpostgres.WithDatabase("test"),
			tcpostgres.WithUsername("postgres"),
			tcpostgres.WithPassword("postgres"),
			tcpostgres.BasicWaitStrategies())
		if err != nil {
			_ = testcontainers.TerminateContainer(c)
			return "", err
		}
		ctr = c
		return c.ConnectionString(ctx, "sslmode=disable")
	}
	return func() {
		if ctr != nil {
			_ = testcontainers.TerminateContainer(ctr)
		}
	}
}

// dockerAnswers is testcontainers.SkipIfProviderIsNotHealthy without a
// *testing.T: the provider must exist and pass its health check.
func dockerAnswers() (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	p, err := testcontainers.ProviderDefault.GetProvider()
	if err != nil {
		return false
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return p.Health(ctx) == nil
}

// soak returns how long each dialect's histories run in soak mode, or 0.
func soak() time.Duration {
	if *soakFlag > 0 {
		return *soakFlag
	}
	switch v := strings.TrimSpace(os.Getenv(EnvSoak)); strings.ToLower(v) {
	case "", "0", "false":
		return 0
	case "1", "true":
		return 30 * time.Minute
	default:
		d, err := time.ParseDuration(v)
		if err != nil {
			panic(fmt.Sprintf("%s=%q: want 1 or a duration such as 30m", EnvSoak, v))
		}
		return d
	}
}

// The Postgres server the histories run on, shared by the tests.
var (
	pgOnce    sync.Once
	pgCluster *faults.Cluster
	pgNote    string
)

// postgresServer returns the URL of a database on the server the Postgres
// histories use, and the cluster when it is a throwaway one the harness may
// crash. It skips t (fails it under FENCEGATE_REQUIRE_POSTGRES=true) when
// there is no Postgres at all.
func postgresServer(t *testing.T) (string, *faults.Cluster) {
	t.Helper()
	pgOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		c, err := faults.StartCluster(ctx)
		if err != nil {
			pgNote = fmt.Sprintf("\n*** POSTGRES RESTART FAULT SKIPPED: no throwaway cluster (%v).\n"+
				"*** The histories run on the shared server, which the harness never restarts. ***", err)
			return
		}
		pgCluster = c
	})
	if pgCluster != nil {
		return pgCluster.URL("postgres"), pgCluster
	}
	url := dbtest.PostgresURL(t)
	t.Log(pgNote)
	return url, nil
}

func stopCluster() {
	if pgCluster != nil {
		if err := pgCluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the throwaway Postgres:", err)
		}
	}
}
