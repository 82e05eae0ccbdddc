package pg

import (
	"testing"
	"time"

	"github.com/fencegate/fencegate/sqlstore"
)

func TestParseLeaseChange(t *testing.T) {
	for _, c := range []struct {
		payload string
		want    sqlstore.LeaseChange
		ours    bool
	}{
		{"r", sqlstore.LeaseChange{Resource: "r"}, true},                       // the resource alone: anyone's
		{"r\x1f42\x1fs", sqlstore.LeaseChange{Resource: "r", First: 42}, true}, // the first waiter named
		{"r\x1f\x1fs", sqlstore.LeaseChange{Resource: "r"}, true},              // no waiter queued
		{"r\x1f42\x1fother", sqlstore.LeaseChange{}, false},                    // another schema's queue
		{"a b 7", sqlstore.LeaseChange{Resource: "a b 7"}, true},               // digits in a name are the name's
		{"r\x1fx\x1fs", sqlstore.LeaseChange{Resource: "r"}, true},             // a place that does not parse is not guessed
		{"r\x1f-3\x1fs", sqlstore.LeaseChange{Resource: "r"}, true},            // nor one that cannot be a place
		{"r/\u00e9\x1f9\x1fs", sqlstore.LeaseChange{Resource: "r/\u00e9", First: 9}, true},
		{"r\x1f42\x1fs\x1fgranted\x1f7\x1freq1\x1f1000000\x1f4000000", sqlstore.LeaseChange{Resource: "r", First: 42, Granted: true,
			Lease: sqlstore.LeaseRow{Found: true, Resource: "r", Fence: 7, RequestID: "req1", GrantedAt: time.UnixMicro(1000000).UTC(), ExpiresAt: time.UnixMicro(4000000).UTC()}}, true}, // a hand-over to 42
		{"r\x1f42\x1fother\x1fgranted\x1f7\x1freq1\x1f1\x1f4", sqlstore.LeaseChange{}, false},                      // in another schema
		{"r\x1f42\x1fs\x1fsomething\x1f7\x1freq1\x1f1\x1f4", sqlstore.LeaseChange{Resource: "r", First: 42}, true}, // an unknown kind is a plain change
		{"r\x1f42\x1fs\x1fgranted\x1fx\x1freq1\x1f1\x1f4", sqlstore.LeaseChange{Resource: "r", First: 42}, true},   // a grant that does not parse is not believed
		{"r\x1f\x1fs\x1fgranted\x1f7\x1freq1\x1f1\x1f4", sqlstore.LeaseChange{Resource: "r"}, true},                // granted to no place
		{"r\x1f42\x1fs\x1fgranted", sqlstore.LeaseChange{Resource: "r"}, true},                                     // a form no migration sends
	} {
		got, ours := ParseLeaseChange(c.payload, "s")
		if got != c.want || ours != c.ours {
			t.Errorf("ParseLeaseChange(%q) = %+v, %v; want %+v, %v", c.payload, got, ours, c.want, c.ours)
		}
	}
}
