package confined_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/fencegate/fencegate/cmd/fencegate/internal/confined"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore/sqlite"
)

// A fenced write of SQL handed in from outside: it commits under the
// token's fence, and SQL that tries to commit early commits nothing.
func ExampleWrite() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "fencegate-confined")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(ctx, filepath.Join(dir, "fencegate.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := store.DB().ExecContext(ctx, `CREATE TABLE deploys (slot INTEGER, version TEXT)`); err != nil {
		log.Fatal(err)
	}
	g := gate.New(store, &gate.Options{VerifyIssued: true})
	coord := lease.NewCoordinator(store, nil)
	client, _ := lease.NewClient(&lease.ClientOptions{Holder: "agent-a"})
	req, _ := client.BeginAcquire("deploy-slot")
	out, err := coord.Acquire(ctx, req)
	if err != nil {
		log.Fatal(err)
	}
	l, _ := client.CompleteAcquire(req, out.Grant)

	res, err := confined.Write(ctx, store, g, l.Token(), []confined.Statement{
		{SQL: `INSERT INTO deploys VALUES ($1, $2)`, Args: []any{1, "v1"}},
		{SQL: `UPDATE deploys SET version = $1 WHERE slot = $2`, Args: []any{"v2", 1}},
	})
	fmt.Println(res.Outcome, res.RowsAffected, err)

	res, err = confined.Write(ctx, store, g, l.Token(), []confined.Statement{
		{SQL: `DELETE FROM deploys`},
		{SQL: `COMMIT`},
	})
	fmt.Println(res.Outcome, errors.Is(err, confined.ErrTransactionControl))
	// Output:
	// committed [1 1] <nil>
	// not committed true
}
