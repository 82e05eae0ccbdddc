package lease

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore/pgsql"
)

// envWaitIn makes this test binary, re-run by
// TestAcquireWaitInAnotherProcess, the waiting process: "URL resource".
const envWaitIn = "FENCEGATE_TEST_WAIT_IN"

// A waiter in another process (this test binary, run again) is granted on
// the release's announcement and its process ends at once: its fallback
// looks (a third of an hour's WaiterTTL, the holder's hour-long term) come
// far too late to help, and its listening connection would linger an hour
// after the grant. It closes its store, as the command does, and pgsql.Open's
// pool once waited for the lingering listener: a waiter a second late in
// another process (issue 36).
func TestAcquireWaitInAnotherProcess(t *testing.T) {
	if spec := os.Getenv(envWaitIn); spec != "" {
		os.Exit(waitInThisProcess(spec))
	}
	ctx := context.Background()
	url := dbtest.PostgresSchemaURL(t)
	store, err := pgsql.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	coord := NewCoordinator(store, nil)
	a := newClient(t, "a", ClientOptions{TTL: time.Hour})
	r := resourceName(t)
	held := acquire(t, a, coord, r)

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cctx, kill := context.WithCancel(ctx)
	defer kill() // a waiter still waiting when the test gives up
	cmd := exec.CommandContext(cctx, exe, "-test.run=^TestAcquireWaitInAnotherProcess$")
	cmd.Env = append(os.Environ(), envWaitIn+"="+url+" "+r)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 8)
	go func() {
		for s := bufio.NewScanner(stdout); s.Scan(); {
			lines <- s.Text()
		}
		close(lines)
	}()
	expect := func(want string) {
		t.Helper()
		if got := recv(t, lines, "line "+want+" from the waiting process"); got != want {
			t.Fatalf("the waiting process said %q, want %q; its stderr:\n%s", got, want, stderr.String())
		}
	}
	expect("listening")
	releaseOK(t, a, coord, held)
	expect("granted")
	expect("closed")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the waiting process: %v; its stderr:\n%s", err, stderr.String())
	}
}

// waitInThisProcess is the waiting process of TestAcquireWaitInAnotherProcess:
// it says "listening" once its Coordinator listens for announcements, then
// "granted" and "closed" as it gets there. It returns the exit status.
func waitInThisProcess(spec string) int {
	url, resource, _ := strings.Cut(spec, " ")
	ctx := context.Background()
	store, err := pgsql.Open(ctx, url)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	coord := NewCoordinator(store, &CoordinatorOptions{WaiterTTL: time.Hour})
	said := make(chan struct{})
	coord.waits.hooks = &waitHooks{linger: time.Hour, listening: func() {
		select {
		case <-said:
		default:
			close(said)
			fmt.Println("listening")
		}
	}}
	client, err := NewClient(&ClientOptions{Holder: "b"})
	if err == nil {
		_, err = coord.AcquireWait(ctx, client, resource)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("granted")
	if err := store.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("closed")
	return 0
}
