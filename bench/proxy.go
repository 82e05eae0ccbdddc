package bench

import (
	"errors"
	"net"
	"slices"
	"sync"
	"time"
)

// Bounds of a DelayProxy: it refuses connections beyond maxProxyConns, holds
// at most proxyQueue chunks of proxyChunk bytes per direction of a
// connection (a full queue stops reading, so a fast sender waits), and
// closes itself after its lifetime even if nobody calls Close.
const (
	maxProxyConns = 512
	proxyQueue    = 64
	proxyChunk    = 32 << 10
)

// DelayProxy forwards TCP connections from a loopback port to a server and
// delivers every chunk of bytes a fixed delay after it arrived, in each
// direction, so a benchmark on one machine pays a network's round trip:
// with a one-way delay of 0.5 ms, every request and its answer cost 1 ms
// more. Chunks queue rather than wait for each other, so the delay is
// latency, not a bandwidth cap, and a pipelined batch pays it once.
//
// It listens on 127.0.0.1 only. Close, or the end of its lifetime, closes
// the listener and every connection through it.
type DelayProxy struct {
	ln     net.Listener
	target string
	delay  time.Duration
	expire *time.Timer

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// StartDelayProxy listens on a free loopback port and forwards to target
// (host:port), delaying each direction by oneWay, for at most lifetime.
func StartDelayProxy(target string, oneWay, lifetime time.Duration) (*DelayProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	// The kernel wakes a sleeper late (timer slack, scheduling): start each
	// sleep that much early, so that the delay delivered is about oneWay.
	p := &DelayProxy{ln: ln, target: target, delay: oneWay - wakeLate(oneWay), conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	p.mu.Lock()
	p.expire = time.AfterFunc(lifetime, func() { _ = p.Close() })
	p.mu.Unlock()
	return p, nil
}

// wakeLate is how late a sleep of d typically wakes (the median of a few),
// at most half of d.
func wakeLate(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	late := make([]time.Duration, 15)
	for i := range late {
		t := time.Now()
		sleepUntil(t.Add(d))
		late[i] = time.Since(t) - d
	}
	slices.Sort(late)
	return min(max(late[len(late)/2], 0), d/2)
}

// Addr is the proxy's host:port.
func (p *DelayProxy) Addr() string { return p.ln.Addr().String() }

// Close stops accepting, closes every connection and waits for the
// forwarding goroutines to end. It is safe to call more than once.
func (p *DelayProxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	if p.expire != nil {
		p.expire.Stop()
	}
	err := p.ln.Close()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

// track registers c, or reports false when the proxy is closed or full.
func (p *DelayProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.conns) >= maxProxyConns {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *DelayProxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		_ = c.Close()
		delete(p.conns, c)
	}
}

func (p *DelayProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if !p.track(client) {
			_ = client.Close()
			continue
		}
		p.wg.Go(func() {
			server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
			if err != nil || !p.track(server) {
				if server != nil {
					_ = server.Close()
				}
				p.untrack(client)
				return
			}
			var both sync.WaitGroup
			both.Go(func() { p.forward(server, client) })
			both.Go(func() { p.forward(client, server) })
			both.Wait()
			p.untrack(client, server)
		})
	}
}

// forward copies src to dst, each chunk delayed; when either side ends it
// closes both, which ends the other direction too.
func (p *DelayProxy) forward(dst, src net.Conn) {
	type chunk struct {
		b   []byte
		due time.Time
	}
	q := make(chan chunk, proxyQueue)
	var reader sync.WaitGroup
	reader.Go(func() {
		defer close(q)
		buf := make([]byte, proxyChunk)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				q <- chunk{append([]byte(nil), buf[:n]...), time.Now().Add(p.delay)}
			}
			if err != nil {
				return
			}
		}
	})
	for c := range q {
		sleepUntil(c.due)
		if _, err := dst.Write(c.b); err != nil {
			break
		}
	}
	_ = src.Close()
	_ = dst.Close()
	for range q { // the reader ends on the closed src; let it
	}
	reader.Wait()
}
