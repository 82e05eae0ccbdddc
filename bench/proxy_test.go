package bench_test

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/bench"
)

// echoServer answers every connection with what it sent, until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { defer c.Close(); _, _ = io.Copy(c, c) })
		}
	})
	return ln.Addr().String()
}

// Bytes come back whole and in order through the proxy, both ways at once,
// and Close ends the connections through it and the listener.
func TestDelayProxy(t *testing.T) {
	p, err := bench.StartDelayProxy(echoServer(t), 100*time.Microsecond, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := make([]byte, 1<<20)
	for i := range want {
		want[i] = byte(i * 7 / 3)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for b := want; len(b) > 0; b = b[min(len(b), 1000):] {
			if _, err := c.Write(b[:min(len(b), 1000)]); err != nil {
				t.Error(err)
				return
			}
		}
	})
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if !bytes.Equal(got, want) {
		t.Fatal("bytes changed or reordered through the proxy")
	}

	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("a connection through a closed proxy still reads")
	}
	if c2, err := net.Dial("tcp", p.Addr()); err == nil {
		c2.Close()
		t.Fatal("a closed proxy still accepts")
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// The proxy closes itself at the end of its lifetime.
func TestDelayProxyLifetime(t *testing.T) {
	p, err := bench.StartDelayProxy(echoServer(t), 0, time.Nanosecond)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			return // closed by itself
		}
		// Accepted before the timer fired, or refused just after: either
		// way the connection ends.
		_, _ = c.Read(make([]byte, 1))
		c.Close()
	}
}
