package faults

import (
	"io"
	"net"
	"sync"
	"testing"
)

// echo is an upstream that answers every byte at once, faster than any
// database: the fastest answer a cut must still keep from the client.
func echo(t *testing.T) string {
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

// An armed cut closes the client's side with nothing of the statement's
// answer delivered, however fast the server answers: the client must not
// learn that its COMMIT went through.
func TestArmedCutDeliversNoAnswer(t *testing.T) {
	upstream := echo(t)
	for _, tc := range []struct {
		name  string
		proxy func(string) (*Proxy, error)
		msg   []byte
	}{
		// A MySQL COM_QUERY "COMMIT", sequence 0.
		{"mysql", NewMySQLProxy, []byte{7, 0, 0, 0, comQuery, 'C', 'O', 'M', 'M', 'I', 'T'}},
		// A Postgres simple query "COMMIT" (after a startup message).
		{"postgres", NewProxy, append([]byte{0, 0, 0, 8, 0, 3, 0, 0}, 'Q', 0, 0, 0, 11, 'C', 'O', 'M', 'M', 'I', 'T', 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tc.proxy(upstream)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			for i := range 100 {
				c, err := net.Dial("tcp", p.Addr())
				if err != nil {
					t.Fatal(err)
				}
				p.ArmCommitCuts(1)
				if _, err := c.Write(tc.msg); err != nil {
					t.Fatal(err)
				}
				got, _ := io.ReadAll(c)
				c.Close()
				answer := tc.msg
				if tc.name == "postgres" {
					answer = tc.msg[:8] // the startup message's echo comes before the cut
				}
				if len(got) > len(answer) || (tc.name == "mysql" && len(got) > 0) {
					t.Fatalf("try %d: the cut client read %d bytes %q: the answer reached it", i, len(got), got)
				}
			}
			if got := p.Stats().CommitCuts; got != 100 {
				t.Errorf("%d cuts, want 100", got)
			}
		})
	}
}
