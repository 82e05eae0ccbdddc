package pg

import (
	"testing"

	"github.com/fencegate/fencegate/sqlstore"
)

func TestParseLeaseChange(t *testing.T) {
	for _, c := range []struct {
		payload string
		want    sqlstore.LeaseChange
		ours    bool
	}{
		{"r", sqlstore.LeaseChange{Resource: "r"}, true},                       // migration 00005's triggers: anyone's
		{"r\x1f42\x1fs", sqlstore.LeaseChange{Resource: "r", First: 42}, true}, // the first waiter named
		{"r\x1f\x1fs", sqlstore.LeaseChange{Resource: "r"}, true},              // no waiter queued
		{"r\x1f42\x1fother", sqlstore.LeaseChange{}, false},                    // another schema's queue
		{"a b 7", sqlstore.LeaseChange{Resource: "a b 7"}, true},               // digits in a name are the name's
		{"r\x1fx\x1fs", sqlstore.LeaseChange{Resource: "r"}, true},             // a place that does not parse is not guessed
		{"r\x1f-3\x1fs", sqlstore.LeaseChange{Resource: "r"}, true},            // nor one that cannot be a place
		{"r/\u00e9\x1f9\x1fs", sqlstore.LeaseChange{Resource: "r/\u00e9", First: 9}, true},
		{"r\x1f42\x1fs\x1fgranted", sqlstore.LeaseChange{Resource: "r", First: 42, Granted: true}, true}, // a hand-over to 42
		{"r\x1f42\x1fother\x1fgranted", sqlstore.LeaseChange{}, false},                                   // in another schema
		{"r\x1f42\x1fs\x1fsomething", sqlstore.LeaseChange{Resource: "r", First: 42}, true},              // an unknown kind is a plain change
		{"r\x1f\x1fs\x1fgranted", sqlstore.LeaseChange{Resource: "r"}, true},                             // granted to no place: not believed
	} {
		got, ours := ParseLeaseChange(c.payload, "s")
		if got != c.want || ours != c.ours {
			t.Errorf("ParseLeaseChange(%q) = %+v, %v; want %+v, %v", c.payload, got, ours, c.want, c.ours)
		}
	}
}
