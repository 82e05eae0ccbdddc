// Package faults injects the failures the reliability harness runs under: a
// TCP proxy that cuts Postgres (or MySQL) connections (at random moments, or right
// after a COMMIT went through) and can be re-pointed at another server, a
// throwaway Postgres cluster (or mariadbd) that can be crashed and
// restarted, and a primary with a streaming standby that can fail over.
package faults

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy forwards TCP connections from a loopback port to a Postgres server
// and cuts them on command. It reads the client's side of the Postgres wire
// protocol so that it can cut a connection just after a COMMIT went through
// to the server: the server may commit, the client never hears, and the
// outcome is unknown to it.
type Proxy struct {
	ln    net.Listener
	mysql bool // the client speaks the MySQL protocol, not Postgres's

	mu       sync.Mutex
	upstream string
	links    map[*link]struct{}
	closed   bool
	wg       sync.WaitGroup

	armMu      sync.Mutex
	armed      map[string]int // normalized query text → connections still to cut after it
	cutAll     atomic.Int64   // CutAll calls
	connsCut   atomic.Int64   // connections closed by CutAll
	commitCuts atomic.Int64   // connections cut after an armed statement
	accepted   atomic.Int64

	delayBy    atomic.Int64 // how long each client message is held (nanoseconds) ...
	delayUntil atomic.Int64 // ... until then (Unix nanoseconds)
	delays     atomic.Int64 // DelayFor calls
}

// ProxyStats counts what a Proxy did.
type ProxyStats struct {
	Accepted   int64 // connections accepted
	CutAll     int64 // times every live connection was cut
	ConnsCut   int64 // connections those cuts closed
	CommitCuts int64 // connections cut right after forwarding an armed statement (a COMMIT)
	Delays     int64 // times traffic was delayed (DelayFor)
}

// NewProxy listens on a free loopback port and forwards to upstream
// ("127.0.0.1:5432").
func NewProxy(upstream string) (*Proxy, error) { return newProxy(upstream, false) }

func newProxy(upstream string, mysql bool) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, mysql: mysql, upstream: upstream, links: map[*link]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

// NewMySQLProxy is NewProxy for a MySQL or MariaDB server: it reads the
// client's side of the MySQL protocol instead (a COMMIT is a COM_QUERY).
func NewMySQLProxy(upstream string) (*Proxy, error) { return newProxy(upstream, true) }

// SetUpstream points new connections at another server (a promoted
// standby) and cuts every live one, as a failover moves clients.
func (p *Proxy) SetUpstream(addr string) {
	p.mu.Lock()
	p.upstream = addr
	p.mu.Unlock()
	p.cut()
}

// Addr is the proxy's listening address, "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Stats returns the counters.
func (p *Proxy) Stats() ProxyStats {
	return ProxyStats{Accepted: p.accepted.Load(), CutAll: p.cutAll.Load(), ConnsCut: p.connsCut.Load(), CommitCuts: p.commitCuts.Load(), Delays: p.delays.Load()}
}

// DelayFor holds every message a client sends (a statement, a COMMIT) for
// by before forwarding it, for the next d: the server sees each request
// late, as behind a congested link, while the client dated its deadlines
// from when it sent them. A renewal then lands after its lease expired, a
// release after its lease was taken over.
func (p *Proxy) DelayFor(by, d time.Duration) {
	p.delayBy.Store(int64(by))
	p.delayUntil.Store(time.Now().Add(d).UnixNano())
	p.delays.Add(1)
}

// forward writes a client's message to the server, first holding it while
// a DelayFor lasts.
func (p *Proxy) forward(l *link, msg []byte) error {
	if time.Now().UnixNano() < p.delayUntil.Load() {
		time.Sleep(time.Duration(p.delayBy.Load())) // the fault: a slow link
	}
	_, err := l.server.Write(msg)
	return err
}

// CutAll closes both sides of every live connection and returns how many it
// closed.
func (p *Proxy) CutAll() int {
	n := p.cut()
	p.cutAll.Add(1)
	p.connsCut.Add(int64(n))
	return n
}

func (p *Proxy) cut() int {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.close()
	}
	return len(links)
}

// ArmCommitCuts makes the proxy cut the next n connections that send a
// COMMIT, right after forwarding it: the client's side at once, the
// server's side once the server has answered (into the void), so the COMMIT
// lands and its answer never arrives.
func (p *Proxy) ArmCommitCuts(n int) { p.ArmQueryCuts("commit", n) }

// ArmQueryCuts is ArmCommitCuts for any statement sent with the simple query
// protocol (pgx uses it for statements without arguments), matched by its
// text, ignoring case and surrounding blanks and semicolons.
func (p *Proxy) ArmQueryCuts(query string, n int) {
	p.armMu.Lock()
	defer p.armMu.Unlock()
	if p.armed == nil {
		p.armed = map[string]int{}
	}
	p.armed[normalize([]byte(query))] += n
}

// Close stops accepting, cuts every connection and waits for the proxy's
// goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	_ = p.ln.Close()
	p.CutAll()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		p.wg.Go(func() { p.serve(c) })
	}
}

func (p *Proxy) serve(client net.Conn) {
	p.mu.Lock()
	upstream := p.upstream
	p.mu.Unlock()
	server, err := net.DialTimeout("tcp", upstream, 2*time.Second)
	if err != nil {
		_ = client.Close() // the server is down (restarting): the client sees a dead connection
		return
	}
	l := &link{client: client, server: server}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.close()
		return
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.links, l)
		p.mu.Unlock()
	}()

	var wg sync.WaitGroup
	wg.Go(func() {
		_, _ = io.Copy(toClient{l}, server)
		l.close()
	})
	pump := p.pumpClient
	if p.mysql {
		pump = p.pumpMySQLClient
	}
	if pump(l) {
		// The client's side is closed just after its COMMIT went through.
		// Keep the server's side until the server answers (and the answer
		// goes nowhere), so that the COMMIT is not lost to a reset
		// before the server read it; give up after a second.
		t := time.AfterFunc(time.Second, l.close)
		wg.Wait()
		t.Stop()
	}
	l.close()
	wg.Wait()
}

// Postgres protocol codes sent in place of a startup message.
const (
	sslRequest    = 80877103
	gssEncRequest = 80877104
	cancelRequest = 80877102
)

// pumpClient forwards the client's messages one at a time, until either side
// fails or it cuts the client off after a COMMIT (it then reports true). The
// first message (and any after an SSL or GSS encryption request) has no type
// byte; every later one is a type byte and a length.
func (p *Proxy) pumpClient(l *link) (cutAfterCommit bool) {
	r := bufio.NewReaderSize(l.client, 64<<10)
	startup := true
	var msg []byte
	for {
		var hdr []byte
		if startup {
			hdr = make([]byte, 4)
		} else {
			hdr = make([]byte, 5)
		}
		if _, err := io.ReadFull(r, hdr); err != nil {
			return false
		}
		n := int(binary.BigEndian.Uint32(hdr[len(hdr)-4:])) - 4
		if n < 0 || n > 1<<30 {
			return false
		}
		msg = append(msg[:0], hdr...)
		msg = append(msg, make([]byte, n)...)
		if _, err := io.ReadFull(r, msg[len(hdr):]); err != nil {
			return false
		}
		if cut, err := p.pass(l, msg, !startup && hdr[0] == 'Q' && p.take(msg[5:])); err != nil || cut {
			return cut
		}
		if startup {
			code := uint32(0)
			if n >= 4 {
				code = binary.BigEndian.Uint32(msg[4:8])
			}
			startup = code == sslRequest || code == gssEncRequest
		}
	}
}

// pass forwards a client's message to the server. When cut (the message
// is an armed statement) it mutes the server's side first, so that not even
// a fast answer reaches the client, and closes the client's side after: it
// reports whether it cut.
func (p *Proxy) pass(l *link, msg []byte, cut bool) (bool, error) {
	if cut {
		l.muted.Store(true)
	}
	if err := p.forward(l, msg); err != nil {
		return false, err
	}
	if cut {
		p.commitCuts.Add(1)
		_ = l.client.Close()
	}
	return cut, nil
}

// comQuery is the MySQL command byte of a text query.
const comQuery = 0x03

// pumpMySQLClient is pumpClient for the MySQL protocol, where every client
// packet is a 3-byte little-endian length, a sequence byte and the payload,
// whose first byte is the command (after the handshake response). It needs
// a connection without TLS or compression, go-sql-driver/mysql's default.
func (p *Proxy) pumpMySQLClient(l *link) (cutAfterCommit bool) {
	r := bufio.NewReaderSize(l.client, 64<<10)
	hdr := make([]byte, 4)
	var msg []byte
	for {
		if _, err := io.ReadFull(r, hdr); err != nil {
			return false
		}
		n := int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16
		msg = append(msg[:0], hdr...)
		msg = append(msg, make([]byte, n)...)
		if _, err := io.ReadFull(r, msg[4:]); err != nil {
			return false
		}
		// The handshake response is sequence 1; a command starts at 0.
		if cut, err := p.pass(l, msg, hdr[3] == 0 && n > 1 && msg[4] == comQuery && p.take(msg[5:])); err != nil || cut {
			return cut
		}
	}
}

// take consumes one armed cut for query, if any.
func (p *Proxy) take(query []byte) bool {
	p.armMu.Lock()
	defer p.armMu.Unlock()
	q := normalize(query)
	if p.armed[q] <= 0 {
		return false
	}
	p.armed[q]--
	return true
}

func normalize(query []byte) string {
	return strings.ToLower(string(bytes.Trim(query, "\x00; \n\t")))
}

type link struct {
	client, server net.Conn
	once           sync.Once
	// muted drops what the server sends from then on: set before an armed
	// statement is forwarded, so that its answer cannot reach the client
	// before the client's side is closed (a fast server's OK could).
	muted atomic.Bool
}

// toClient writes the server's side of l to its client, until l is muted;
// then it drops it.
type toClient struct{ l *link }

func (w toClient) Write(b []byte) (int, error) {
	if w.l.muted.Load() {
		return len(b), nil // the answer goes nowhere
	}
	return w.l.client.Write(b)
}

func (l *link) close() {
	l.once.Do(func() {
		_ = l.client.Close()
		_ = l.server.Close()
	})
}
