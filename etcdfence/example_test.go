package etcdfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"net/url"
	"os"
	"path/filepath"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/fencegate/fencegate/etcdfence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/sqlstore/sqlite"
)

// Two workers take the same etcd lock in turn. Each Lock returns a token
// the gate has already admitted, so the first worker, whose lock has been
// granted to the second, has its late write refused.
func ExampleLocker_Lock() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "etcdfence-example")
	defer os.RemoveAll(dir)

	// An etcd in this process, for the example; use your cluster's client.
	cfg := embed.NewConfig()
	cfg.Dir, cfg.LogLevel = filepath.Join(dir, "etcd"), "error"
	local := []url.URL{{Scheme: "http", Host: "127.0.0.1:0"}}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls, cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = local, local, local, local
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	<-e.Server.ReadyNotify()
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Clients[0].Addr().String()}, Logger: zap.NewNop()})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	store, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	g := gate.New(store, nil)

	lockAs := func(holder string) *etcdfence.Lock {
		session, err := concurrency.NewSession(client, concurrency.WithTTL(10))
		if err != nil {
			log.Fatal(err)
		}
		locker, err := etcdfence.New(session, g, &etcdfence.Options{Epoch: 1})
		if err != nil {
			log.Fatal(err)
		}
		lock, err := locker.Lock(ctx, "orders/42", holder)
		if err != nil {
			log.Fatal(err)
		}
		return lock
	}
	write := func(lock *etcdfence.Lock) error {
		return g.Do(ctx, lock.Token(), func(ctx context.Context, tx *sql.Tx) error {
			return nil // the writes, after the fence
		})
	}

	a := lockAs("worker-a")
	_ = a.Unlock(ctx) // or its session expires while it stalls
	b := lockAs("worker-b")
	defer b.Unlock(ctx)

	floor, _ := g.Floor(ctx, "orders/42")
	fmt.Println("b's fence is the floor:", floor.Floor == b.Token().Fence)
	fmt.Println("b's fence is above a's:", b.Token().Fence > a.Token().Fence)
	fmt.Println("epoch 1:", b.Token().Fence>>etcdfence.RevisionBits)
	fmt.Println("a's late write refused:", errors.Is(write(a), gate.ErrStaleFence))
	fmt.Println("b writes:", write(b))
	// Output:
	// b's fence is the floor: true
	// b's fence is above a's: true
	// epoch 1: 1
	// a's late write refused: true
	// b writes: <nil>
}
