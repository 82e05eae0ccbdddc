package mysql_test

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/mysql"
)

// replyLoser forwards MySQL connections to the server and, once armed,
// passes the next COMMIT on to the server but never its reply, nor anything
// after it on that connection, which stays open: the client waits as after
// a reply lost in the network. Lost is closed when that COMMIT has been
// sent on.
type replyLoser struct {
	ln       net.Listener
	upstream string
	armed    atomic.Bool
	lost     chan struct{}
	lostOnce sync.Once

	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

// newReplyLoser starts a replyLoser in front of the server of the URL u and
// returns it with u pointed at it (tls=false: it reads the queries). It
// closes when t ends.
func newReplyLoser(t *testing.T, u string) (*replyLoser, string) {
	t.Helper()
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &replyLoser{ln: ln, upstream: parsed.Host, lost: make(chan struct{})}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	parsed.Host = ln.Addr().String()
	q := parsed.Query()
	q.Set("tls", "false")
	parsed.RawQuery = q.Encode()
	return p, parsed.String()
}

func (p *replyLoser) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.upstream)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, client, server)
		p.mu.Unlock()
		var swallow atomic.Bool
		p.wg.Go(func() { // server to client, until the swallowed COMMIT
			buf := make([]byte, 32<<10)
			for {
				n, err := server.Read(buf)
				if n > 0 && !swallow.Load() {
					if _, werr := client.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					client.Close()
					return
				}
			}
		})
		p.wg.Go(func() { // client to server, one packet at a time
			defer server.Close()
			header := make([]byte, 4)
			for {
				if _, err := io.ReadFull(client, header); err != nil {
					return
				}
				n := int(binary.LittleEndian.Uint32(append(header[:3:3], 0)))
				payload := make([]byte, n)
				if _, err := io.ReadFull(client, payload); err != nil {
					return
				}
				const comQuery = 0x03
				if n > 0 && payload[0] == comQuery && strings.EqualFold(strings.TrimSpace(string(payload[1:])), "COMMIT") &&
					p.armed.CompareAndSwap(true, false) {
					swallow.Store(true)
				}
				if _, err := server.Write(append(header, payload...)); err != nil {
					return
				}
				if swallow.Load() {
					p.lostOnce.Do(func() { close(p.lost) })
				}
			}
		})
	}
}

// commitBound is how long after its ctx ends a call whose COMMIT reply was
// lost may take to return: its cleanup's own bounded statements, on a
// loaded machine. A COMMIT not bounded by ctx never returns here.
const commitBound = 15 * time.Second

// lostCommit opens a migrated database through a replyLoser.
func lostCommit(t *testing.T) (*mysql.Driver, *replyLoser) {
	t.Helper()
	u := databaseURL(t, nil)
	direct := openURL(t, u)
	if err := direct.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	p, proxied := newReplyLoser(t, u)
	return openURL(t, proxied), p
}

// A fenced write whose COMMIT reply is lost returns when ctx ends, its
// outcome unknown: database/sql's Tx.Commit takes no context, and gate.Do
// under a 2 s ctx ran 12 s (here, with the connection held open, for ever).
func TestDoCommitBoundedByCtx(t *testing.T) {
	d, p := lostCommit(t)
	g := gate.New(d, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- g.Do(ctx, fence.Token{Resource: "r", Holder: "h", Fence: 1}, func(ctx context.Context, tx *sql.Tx) error {
			p.armed.Store(true)
			return nil
		})
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(2*time.Second + commitBound):
		t.Fatalf("Do had not returned %v after its deadline", commitBound)
	}
	select {
	case <-p.lost:
	default:
		t.Fatalf("Do = %v, and no COMMIT was sent", err)
	}
	if err == nil || !sqlstore.IsOutcomeUnknown(err) || !strings.Contains(err.Error(), "may or may not have been applied") {
		t.Fatalf("Do = %v, want an outcome-unknown error", err)
	}
	// The server did commit: the outcome was truly unknown.
	if f, ferr := d.Executor().FloorGet(context.Background(), "r"); ferr != nil || f.Floor != 1 {
		t.Errorf("floor = %+v, %v; want 1 (the COMMIT reached the server)", f, ferr)
	}
}

// The lease coordinator's grants commit through the driver too: an Acquire
// under a 2 s ctx, and an AcquireWait whose ctx is cancelled, return with
// the COMMIT's reply lost (AcquireWait had not returned 20 s after cancel).
func TestCoordinatorCommitBoundedByCtx(t *testing.T) {
	t.Run("Acquire", func(t *testing.T) {
		d, p := lostCommit(t)
		coord := lease.NewCoordinator(d, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		p.armed.Store(true)
		done := make(chan error, 1)
		go func() {
			_, err := coord.Acquire(ctx, &lease.AcquireRequest{Resource: "r", Holder: "h", RequestID: "q1", TTL: time.Minute})
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !sqlstore.IsOutcomeUnknown(err) {
				t.Fatalf("Acquire = %v, want an outcome-unknown error", err)
			}
		case <-time.After(2*time.Second + commitBound):
			t.Fatalf("Acquire had not returned %v after its deadline", commitBound)
		}
	})
	t.Run("AcquireWait", func(t *testing.T) {
		d, p := lostCommit(t)
		coord := lease.NewCoordinator(d, nil)
		c, err := lease.NewClient(&lease.ClientOptions{Holder: "h", TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		p.armed.Store(true)
		done := make(chan error, 1)
		go func() {
			_, err := coord.AcquireWait(ctx, c, "r")
			done <- err
		}()
		select {
		case <-p.lost:
		case err := <-done:
			t.Fatalf("AcquireWait = %v before any COMMIT was lost", err)
		}
		cancel()
		select {
		case err := <-done:
			if err == nil || !errors.Is(err, context.Canceled) {
				t.Fatalf("AcquireWait = %v, want context.Canceled", err)
			}
		case <-time.After(commitBound):
			t.Fatalf("AcquireWait had not returned %v after cancel", commitBound)
		}
	})
}
