package observe

import (
	"testing"
	"time"
)

func TestParseChange(t *testing.T) {
	cases := []struct {
		line string
		want Mark
		ok   bool
	}{
		{`fg_events: INSERT: id[bigint]:7 kind[text]:'write' resource[text]:'hot-1' fence[bigint]:5 holder[text]:'p0.1/a2' agent[text]:'p0/a2' op_id[text]:'p0.1/a2#3' at[timestamp with time zone]:'2026-12-01 09:30:00.5+00'`,
			Mark{Kind: Write, Resource: "hot-1", Fence: 5, Holder: "p0.1/a2", OpID: "p0.1/a2#3"}, true},
		{`fg_events: INSERT: id[bigint]:8 kind[text]:'raise' resource[text]:'hot-1' fence[bigint]:6 holder[text]:'x' agent[text]:'' op_id[text]:null at[timestamp with time zone]:'2026-12-01 09:30:00+00'`,
			Mark{}, false},
		{`fencegate_lease: UPDATE: resource[text]:'it''s' holder[text]:'p1.1/a0' fence[bigint]:12 request_id[text]:'r 1' granted_at[timestamp with time zone]:'2026-12-01 09:30:00.123456+00' expires_at[timestamp with time zone]:'2026-12-01 09:30:00.373456+00' released[boolean]:false`,
			Mark{Kind: Lease, Resource: "it's", Fence: 12, Holder: "p1.1/a0",
				GrantedAt: time.Date(2026, 12, 1, 9, 30, 0, 123456000, time.UTC), ExpiresAt: time.Date(2026, 12, 1, 9, 30, 0, 373456000, time.UTC)}, true},
		{`fencegate_floor: UPDATE: old-key: resource[text]:'a' new-tuple: resource[text]:'b' floor[bigint]:3 holder[text]:'h' updated_at[timestamp with time zone]:'2026-12-01 09:30:00+00'`,
			Mark{Kind: Floor, Resource: "b", Fence: 3, Holder: "h"}, true},
		{`fencegate_floor: DELETE: resource[text]:'a'`, Mark{}, false},
		{`fencegate_rejection: INSERT: seq[bigint]:1`, Mark{}, false},
	}
	for _, c := range cases {
		m, ok, err := parseChange(c.line)
		if err != nil || ok != c.ok || ok && !(m.Kind == c.want.Kind && m.Resource == c.want.Resource && m.Fence == c.want.Fence &&
			m.Holder == c.want.Holder && m.OpID == c.want.OpID && m.GrantedAt.Equal(c.want.GrantedAt) && m.ExpiresAt.Equal(c.want.ExpiresAt) && m.Released == c.want.Released) {
			t.Errorf("parseChange(%s) = %+v, %v, %v; want %+v, %v", c.line, m, ok, err, c.want, c.ok)
		}
	}
	if _, _, err := parseChange(`fg_events: INSERT: id[bigint]:1 kind[text]:'write`); err == nil {
		t.Error("an unterminated value parsed")
	}
}
