package fence_test

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fencegate/fencegate/fence"
)

func TestTokenRoundTrip(t *testing.T) {
	for _, tok := range []fence.Token{
		{Resource: "deploy-slot", Holder: "agent-a", Fence: 42},
		{Resource: "orders/42: east", Holder: "pod 7 %", Fence: 1},
		{Resource: "ключ", Holder: "エージェント", Fence: 1<<63 - 1},
	} {
		s := tok.String()
		got, err := fence.Parse(s)
		if err != nil || got != tok {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", s, got, err, tok)
		}
	}
	if s := (fence.Token{Resource: "deploy-slot", Holder: "agent-a", Fence: 42}).String(); s != "fg1:42:deploy-slot:agent-a" {
		t.Errorf("String = %q", s)
	}
}

func TestParseRejectsMalformed(t *testing.T) {
	for _, s := range []string{
		"", "fg1", "fg1:1:r", "fg1:1:r:h:extra", "fg2:1:r:h", "FG1:1:r:h",
		"fg1:0:r:h", "fg1:-1:r:h", "fg1:+1:r:h", "fg1:01:r:h", "fg1:x:r:h", "fg1:99999999999999999999:r:h",
		"fg1:1::h", "fg1:1:r:", "fg1:1:%zz:h", "fg1:1:r:%", "fg1:1:a%3Ab:h%00",
		"fg1:1:" + strings.Repeat("x", fence.MaxNameLen+1) + ":h",
		"fg1:1:r%20:h", // not canonical: String escapes a space as "+"
		"fg1:1:\xff:h", // invalid UTF-8
		"fg1:1:%FF:h",  // escaped invalid UTF-8
		" fg1:1:r:h",   // surrounding space
	} {
		_, err := fence.Parse(s)
		var inv *fence.InvalidInputError
		if !errors.Is(err, fence.ErrInvalidInput) || !errors.As(err, &inv) || inv.Reason == "" {
			t.Errorf("Parse(%q) = %v, want a clear ErrInvalidInput", s, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"fg1:42:deploy-slot:agent-a", "fg1:1:a+b:c%3Ad", "fg1:0:r:h", "fg1::r:h", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := fence.Parse(s)
		if err != nil {
			if !errors.Is(err, fence.ErrInvalidInput) {
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
		err := fence.ValidateResource(name)
		if err != nil {
			if !errors.Is(err, fence.ErrInvalidInput) {
				t.Fatalf("error %v does not match ErrInvalidInput", err)
			}
			return
		}
		// Every accepted name survives the token text form.
		tok := fence.Token{Resource: name, Holder: "h", Fence: 1}
		got, err := fence.Parse(tok.String())
		if err != nil || got != tok {
			t.Fatalf("accepted name %q does not round-trip: %+v, %v", name, got, err)
		}
	})
}

// The doc promises no control characters: C1 (U+0080 to U+009F) included.
func TestNamesRefuseEveryControlCharacter(t *testing.T) {
	for _, r := range []rune{0, 0x1f, 0x7f, 0x80, 0x85, 0x9f} {
		name := "a" + string(r) + "b"
		if err := fence.ValidateResource(name); !errors.Is(err, fence.ErrInvalidInput) {
			t.Errorf("ValidateResource(%q) = %v, want ErrInvalidInput", name, err)
		}
		if err := fence.ValidateHolder(name); !errors.Is(err, fence.ErrInvalidInput) {
			t.Errorf("ValidateHolder(%q) = %v, want ErrInvalidInput", name, err)
		}
	}
	for _, name := range []string{"a\u00a0b", "\u00a1", "ключ"} {
		if err := fence.ValidateResource(name); err != nil {
			t.Errorf("ValidateResource(%q) = %v", name, err)
		}
	}
}

// The longest valid token (two names of MaxNameLen bytes that escape to
// three characters each, the largest fence) was over Parse's length limit.
func TestLongestTokenRoundTrips(t *testing.T) {
	name := strings.Repeat("%", fence.MaxNameLen)
	tok := fence.Token{Resource: name, Holder: strings.Repeat("é", fence.MaxNameLen/2), Fence: 1<<63 - 1}
	if got, err := fence.Parse(tok.String()); err != nil || got != tok {
		t.Fatalf("Parse(String()) of the longest token = %+v, %v", got, err)
	}
}

// randomName draws a valid name from characters that escape differently:
// plain, reserved, multi-byte, and the edges of the control ranges. One in
// four is MaxNameLen bytes of characters that all escape to three times
// their length, the longest text a name can have.
func randomName(rng *rand.Rand) string {
	alphabet := []rune{'a', 'Z', '0', '-', '/', ':', '%', '+', ' ', '~', '\u00a0', 'é', 'ж', '€', '🦀', '\u2028', 0x7e, 0xa0}
	n := 1 + rng.IntN(fence.MaxNameLen)
	if rng.IntN(4) == 0 {
		alphabet, n = []rune{'%', ':', '/', '€', '🦀', 'é'}, fence.MaxNameLen
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
		n := 1 + rng.Int64N(1<<63-1)
		if i%10 == 0 {
			n = 1<<63 - 1
		}
		tok := fence.Token{Resource: randomName(rng), Holder: randomName(rng), Fence: n}
		if err := tok.Validate(); err != nil {
			t.Fatalf("generator made an invalid token: %v", err)
		}
		if got, err := fence.Parse(tok.String()); err != nil || got != tok {
			t.Fatalf("Parse(%q) = %+v, %v; want %+v", tok.String(), got, err, tok)
		}
	}
}

func FuzzTokenRoundTrip(f *testing.F) {
	f.Add("deploy-slot", "agent-a", int64(42))
	f.Add(strings.Repeat("%", fence.MaxNameLen), strings.Repeat("%", fence.MaxNameLen), int64(1<<63-1))
	f.Add("a\u0085b", "h", int64(1))
	f.Fuzz(func(t *testing.T, resource, holder string, n int64) {
		tok := fence.Token{Resource: resource, Holder: holder, Fence: n}
		if tok.Validate() != nil {
			return
		}
		if got, err := fence.Parse(tok.String()); err != nil || got != tok {
			t.Fatalf("Parse(%q) = %+v, %v; want %+v", tok.String(), got, err, tok)
		}
	})
}

func TestSetTokenRoundTrip(t *testing.T) {
	tok, err := fence.NewSetToken([]string{"path:src/", "b:c", "path:go.mod"}, "agent a", 43)
	if err != nil {
		t.Fatal(err)
	}
	s := tok.String()
	if s != "fg2:43:agent+a:b%3Ac:path%3Ago.mod:path%3Asrc%2F" {
		t.Fatalf("String = %q", s)
	}
	back, err := fence.Parse(s)
	if err != nil || back != tok || !back.IsSet() || back.Resource != "" {
		t.Fatalf("Parse(%q) = %+v, %v", s, back, err)
	}
	if !tok.Covers("path:src/x/y.go") || tok.Covers("path:srcx") || !tok.Covers("b:c") || tok.Covers("path:go.sum") {
		t.Fatal("Covers")
	}
	// A set of one is the plain token, in the old form.
	one, err := fence.NewSetToken([]string{"deploy-slot"}, "agent-a", 42)
	if err != nil || one.IsSet() || one.String() != "fg1:42:deploy-slot:agent-a" {
		t.Fatalf("set of one: %v, %v", one, err)
	}
	// Old tokens keep parsing as they were.
	old, err := fence.Parse("fg1:42:deploy-slot:agent-a")
	if err != nil || old != (fence.Token{Resource: "deploy-slot", Holder: "agent-a", Fence: 42}) || old.IsSet() {
		t.Fatalf("old token: %+v, %v", old, err)
	}
}

func TestSetAndPathBadInput(t *testing.T) {
	long := strings.Repeat("a/", 200)
	many := make([]string, fence.MaxSetMembers+1)
	for i := range many {
		many[i] = strings.Repeat("r", i+1)
	}
	for name, set := range map[string][]string{
		"empty":               {},
		"duplicate":           {"a", "b", "a"},
		"path and its dir":    {"path:src/a.go", "path:src/"},
		"nested dirs":         {"path:a/", "path:a/b/"},
		"absolute":            {"path:/etc/passwd"},
		"dot dot":             {"path:a/../b"},
		"dot":                 {"path:./a"},
		"empty component":     {"path:a//b"},
		"empty path":          {"path:"},
		"root dir":            {"path:/"},
		"backslash":           {`path:a\b`},
		"NUL":                 {"path:a\x00b"},
		"invalid UTF-8":       {"path:a\xffb"},
		"too long":            {"path:" + long},
		"more than the limit": many,
	} {
		if _, err := fence.ValidateSet(set); !errors.Is(err, fence.ErrInvalidInput) {
			t.Errorf("%s: ValidateSet(%q) = %v", name, set, err)
		}
		if _, err := fence.NewSetToken(set, "h", 1); !errors.Is(err, fence.ErrInvalidInput) {
			t.Errorf("%s: NewSetToken = %v", name, err)
		}
	}
	for _, rel := range []string{"", "/a", "a/../b", "..", ".", "a//b", "a\x00", "\xff", `a\b`, long} {
		if _, err := fence.PathResource(rel); !errors.Is(err, fence.ErrInvalidInput) {
			t.Errorf("PathResource(%q) = %v", rel, err)
		}
	}
	for _, s := range []string{
		"fg2:1:h:a",                        // one member
		"fg2:1:h:b:a",                      // not sorted
		"fg2:1:h:a:a",                      // duplicate
		"fg2:1:h:path%3Aa%2F:path%3Aa%2Fb", // a path with its directory
		"fg2:0:h:a:b",
		"fg2:1::a:b",
		"fg2:1:h:a:%00",
		"fg2:1:h:a:",
	} {
		if _, err := fence.Parse(s); !errors.Is(err, fence.ErrInvalidInput) {
			t.Errorf("Parse(%q) = %v", s, err)
		}
	}
	var zero fence.Token
	if err := zero.Validate(); !errors.Is(err, fence.ErrInvalidInput) {
		t.Error("zero token valid")
	}
}
