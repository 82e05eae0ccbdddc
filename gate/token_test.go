package gate_test

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

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

// The doc promises no control characters: C1 (U+0080 to U+009F) included.
func TestNamesRefuseEveryControlCharacter(t *testing.T) {
	for _, r := range []rune{0, 0x1f, 0x7f, 0x80, 0x85, 0x9f} {
		name := "a" + string(r) + "b"
		if err := gate.ValidateResource(name); !errors.Is(err, gate.ErrInvalidInput) {
			t.Errorf("ValidateResource(%q) = %v, want ErrInvalidInput", name, err)
		}
		if err := gate.ValidateHolder(name); !errors.Is(err, gate.ErrInvalidInput) {
			t.Errorf("ValidateHolder(%q) = %v, want ErrInvalidInput", name, err)
		}
	}
	for _, name := range []string{"a\u00a0b", "\u00a1", "ключ"} {
		if err := gate.ValidateResource(name); err != nil {
			t.Errorf("ValidateResource(%q) = %v", name, err)
		}
	}
}

// The longest valid token (two names of MaxNameLen bytes that escape to
// three characters each, the largest fence) was over Parse's length limit.
func TestLongestTokenRoundTrips(t *testing.T) {
	name := strings.Repeat("%", gate.MaxNameLen)
	tok := gate.Token{Resource: name, Holder: strings.Repeat("é", gate.MaxNameLen/2), Fence: 1<<63 - 1}
	if got, err := gate.Parse(tok.String()); err != nil || got != tok {
		t.Fatalf("Parse(String()) of the longest token = %+v, %v", got, err)
	}
}

// randomName draws a valid name from characters that escape differently:
// plain, reserved, multi-byte, and the edges of the control ranges. One in
// four is MaxNameLen bytes of characters that all escape to three times
// their length, the longest text a name can have.
func randomName(rng *rand.Rand) string {
	alphabet := []rune{'a', 'Z', '0', '-', '/', ':', '%', '+', ' ', '~', '\u00a0', 'é', 'ж', '€', '🦀', '\u2028', 0x7e, 0xa0}
	n := 1 + rng.IntN(gate.MaxNameLen)
	if rng.IntN(4) == 0 {
		alphabet, n = []rune{'%', ':', '/', '€', '🦀', 'é'}, gate.MaxNameLen
	}
	var b strings.Builder
	for {
		r := alphabet[rng.IntN(len(alphabet))]
		if b.Len()+utf8.RuneLen(r) > n {
			break
		}
		b.WriteRune(r)
	}
	for b.Len() < n {
		b.WriteByte('%')
	}
	return b.String()
}

// Parse(t.String()) == t for every valid t.
func TestTokenRoundTripProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 2026))
	for i := range 5000 {
		fence := 1 + rng.Int64N(1<<63-1)
		if i%10 == 0 {
			fence = 1<<63 - 1
		}
		tok := gate.Token{Resource: randomName(rng), Holder: randomName(rng), Fence: fence}
		if err := tok.Validate(); err != nil {
			t.Fatalf("generator made an invalid token: %v", err)
		}
		if got, err := gate.Parse(tok.String()); err != nil || got != tok {
			t.Fatalf("Parse(%q) = %+v, %v; want %+v", tok.String(), got, err, tok)
		}
	}
}

func FuzzTokenRoundTrip(f *testing.F) {
	f.Add("deploy-slot", "agent-a", int64(42))
	f.Add(strings.Repeat("%", gate.MaxNameLen), strings.Repeat("%", gate.MaxNameLen), int64(1<<63-1))
	f.Add("a\u0085b", "h", int64(1))
	f.Fuzz(func(t *testing.T, resource, holder string, fence int64) {
		tok := gate.Token{Resource: resource, Holder: holder, Fence: fence}
		if tok.Validate() != nil {
			return
		}
		if got, err := gate.Parse(tok.String()); err != nil || got != tok {
			t.Fatalf("Parse(%q) = %+v, %v; want %+v", tok.String(), got, err, tok)
		}
	})
}
