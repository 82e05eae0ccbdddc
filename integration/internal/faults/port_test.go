package faults

import (
	"fmt"
	"net"
	"testing"
)

// freePort hands out distinct ports below the ephemeral range, each free
// to bind when handed out, so no outgoing connection's source port can
// take one before its server binds it.
func TestFreePortIsOutsideTheEphemeralRange(t *testing.T) {
	lo := ephemeralLow()
	seen := map[int]bool{}
	for range 200 {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		if port < minFreePort || port >= lo {
			t.Fatalf("port %d is outside [%d, %d)", port, minFreePort, lo)
		}
		if seen[port] {
			t.Fatalf("port %d handed out twice", port)
		}
		seen[port] = true
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Fatalf("port %d was handed out but cannot be bound: %v", port, err)
		}
		ln.Close()
	}
}
