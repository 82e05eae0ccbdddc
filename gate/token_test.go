package gate_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/gate"
)

func TestTokenRoundTrip(t *testing.T) {
	for _, tok := range []gate.Token{
		{Resource: "deploy-slot", Holder: "agent-a", Fence: 42},
		{Resource: "orders/42: east", Holder: "pod 7 %", Fence: 1},
		{Resource: "ключ", Holder: "エージェント", Fence: 1<<63 - 1},
	} {
		s := tok.String()
		got, err := gate.Parse(s)
		if err != nil || got != tok {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", s, got, err, tok)
		}
	}
	if s := (gate.Token{Resource: "deploy-slot", Holder: "agent-a", Fence: 42}).String(); s != "fg1:42:deploy-slot:agent-a" {
		t.Errorf("String = %q", s)
	}
}

func TestParseRejectsMalformed(t *testing.T) {
	for _, s := range []string{
		"", "fg1", "fg1:1:r", "fg1:1:r:h:extra", "fg2:1:r:h", "FG1:1:r:h",
		"fg1:0:r:h", "fg1:-1:r:h", "fg1:+1:r:h", "fg1:01:r:h", "fg1:x:r:h", "fg1:99999999999999999999:r:h",
		"fg1:1::h", "fg1:1:r:", "fg1:1:%zz:h", "fg1:1:r:%", "fg1:1:a%3Ab:h%00",
		"fg1:1:" + strings.Repeat("x", gate.MaxNameLen+1) + ":h",
		"fg1:1:r%20:h", // not canonical: String escapes a space as "+"
		"fg1:1:\xff:h", // invalid UTF-8
		"fg1:1:%FF:h",  // escaped invalid UTF-8
		" fg1:1:r:h",   // surrounding space
	} {
		_, err := gate.Parse(s)
		var inv *gate.InvalidInputError
		if !errors.Is(err, gate.ErrInvalidInput) || !errors.As(err, &inv) || inv.Reason == "" {
			t.Errorf("Parse(%q) = %v, want a clear ErrInvalidInput", s, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"fg1:42:deploy-slot:agent-a", "fg1:1:a+b:c%3Ad", "fg1:0:r:h", "fg1::r:h", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := gate.Parse(s)
		if err != nil {
			if !errors.Is(err, gate.ErrInvalidInput) {
				t.Fatalf("Parse(%q) error %v does not match ErrInvalidInput", s, err)
			}
			return
		}
		if tok.String() != s {
			t.Fatalf("Parse(%q).String() = %q", s, tok.String())
		}
		if err := tok.Validate(); err != nil {
			t.Fatalf("Parse(%q) accepted an invalid token: %v", s, err)
		}
	})
}

func FuzzValidateResource(f *testing.F) {
	for _, s := range []string{"deploy-slot", "", "a\x00b", "\xff", strings.Repeat("y", 300)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := gate.ValidateResource(name)
		if err != nil {
			if !errors.Is(err, gate.ErrInvalidInput) {
				t.Fatalf("error %v does not match ErrInvalidInput", err)
			}
			return
		}
		// Every accepted name survives the token text form.
		tok := gate.Token{Resource: name, Holder: "h", Fence: 1}
		got, err := gate.Parse(tok.String())
		if err != nil || got != tok {
			t.Fatalf("accepted name %q does not round-trip: %+v, %v", name, got, err)
		}
	})
}
