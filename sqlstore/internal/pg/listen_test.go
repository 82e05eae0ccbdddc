package pg

import (
	"testing"

	"github.com/fencegate/fencegate/sqlstore"
)

func TestParseLeaseChange(t *testing.T) {
	for _, c := range []struct {
		payload string
		want    sqlstore.LeaseChange
	}{
		{"r", sqlstore.LeaseChange{Resource: "r"}},                  // no waiter, or migration 00005's triggers
		{"r\x1f42", sqlstore.LeaseChange{Resource: "r", First: 42}}, // the first waiter named
		{"a b 7", sqlstore.LeaseChange{Resource: "a b 7"}},          // digits in a name are the name's
		{"r\x1fx", sqlstore.LeaseChange{Resource: "r"}},             // a place that does not parse is not guessed
		{"r\x1f-3", sqlstore.LeaseChange{Resource: "r"}},            // nor one that cannot be a place
		{"r/\u00e9\x1f9", sqlstore.LeaseChange{Resource: "r/\u00e9", First: 9}},
	} {
		if got := ParseLeaseChange(c.payload); got != c.want {
			t.Errorf("ParseLeaseChange(%q) = %+v, want %+v", c.payload, got, c.want)
		}
	}
}
