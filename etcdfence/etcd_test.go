package etcdfence_test

import (
	"net/url"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// startEtcd runs a one-member etcd in the test's process, on loopback ports
// the system picks, with its data in a temporary directory, and returns a
// client of it. Both end with the test.
func startEtcd(t *testing.T) *clientv3.Client {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Dir = t.TempDir()
	cfg.LogLevel = "error"
	// Short ticks make a lapsed lease expire about a second after its
	// ttl instead of a few (etcd's shortest lease is 1.5 election ticks).
	cfg.TickMs, cfg.ElectionMs = 20, 200
	local := []url.URL{{Scheme: "http", Host: "127.0.0.1:0"}}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = local, local
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = local, local
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		t.Fatal("etcd did not become ready in 60s")
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Clients[0].Addr().String()}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
