package gate

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNameLen is the longest resource or holder name, in bytes, that fencegate
// accepts. Names are stored as primary keys; a bound keeps indexes small and
// turns runaway input (a whole prompt pasted as a lock name) into an error.
const MaxNameLen = 256

// tokenPrefix starts every token's text form and names its version.
const tokenPrefix = "fg1"

// maxTokenLen is the longest text form of a valid token: the prefix, three
// colons, a 19-digit fence, and two names of MaxNameLen bytes that each
// escape to three characters a byte.
const maxTokenLen = len(tokenPrefix) + 3 + 19 + 2*3*MaxNameLen

// Token is the proof of ownership a holder presents to the gate: the resource
// it writes, who it is, and the fence of its generation of ownership.
//
// The zero Token is invalid: every method that takes a Token rejects it with
// ErrInvalidInput.
type Token struct {
	// Resource names the guarded thing ("deploy-slot", "orders/42").
	Resource string
	// Holder names the lease holder; it is recorded with the floor and in the
	// rejection log so that overlapping holders can be identified.
	Holder string
	// Fence is the generation number. It only grows between generations and
	// is at least 1.
	Fence int64
}

// String returns the token's text form, which Parse reads back:
//
//	fg1:<fence>:<resource>:<holder>
//
// Resource and holder are escaped with url.QueryEscape, so neither can contain
// a bare colon, and the form is safe to pass through environment variables
// and shell arguments. Example: "fg1:42:deploy-slot:agent-a".
func (t Token) String() string {
	return tokenPrefix + ":" + strconv.FormatInt(t.Fence, 10) + ":" +
		url.QueryEscape(t.Resource) + ":" + url.QueryEscape(t.Holder)
}

// Validate reports whether the token could have been issued: a valid resource
// and holder name and a positive fence. Errors match ErrInvalidInput.
func (t Token) Validate() error {
	if err := ValidateResource(t.Resource); err != nil {
		return err
	}
	if err := ValidateHolder(t.Holder); err != nil {
		return err
	}
	if t.Fence <= 0 {
		return invalidf("fence", "must be positive, got %d", t.Fence)
	}
	return nil
}

// Parse reads a token from the text form produced by Token.String. It accepts
// only the canonical form (no sign or leading zeros on the fence, the same
// escaping String produces), so Parse(s).String() == s for every accepted s.
// Errors match ErrInvalidInput.
func Parse(s string) (Token, error) {
	if len(s) > maxTokenLen {
		return Token{}, invalidf("token", "%d bytes is too long", len(s))
	}
	parts := strings.Split(s, ":")
	if len(parts) != 4 || parts[0] != tokenPrefix {
		return Token{}, invalidf("token", "want the form %s:<fence>:<resource>:<holder>, got %q", tokenPrefix, s)
	}
	fence, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return Token{}, invalidf("token", "fence %q is not a decimal integer", parts[1])
	}
	resource, err := url.QueryUnescape(parts[2])
	if err != nil {
		return Token{}, invalidf("token", "resource %q is not escaped correctly", parts[2])
	}
	holder, err := url.QueryUnescape(parts[3])
	if err != nil {
		return Token{}, invalidf("token", "holder %q is not escaped correctly", parts[3])
	}
	t := Token{Resource: resource, Holder: holder, Fence: fence}
	if err := t.Validate(); err != nil {
		return Token{}, err
	}
	if t.String() != s {
		return Token{}, invalidf("token", "%q is not in canonical form (want %q)", s, t.String())
	}
	return t, nil
}

// ValidateResource checks a resource name: 1 to MaxNameLen bytes of valid
// UTF-8 without NUL or other control characters (C0, DEL and C1: U+0000 to
// U+001F and U+007F to U+009F). Errors match ErrInvalidInput.
func ValidateResource(name string) error { return validateName("resource", name) }

// ValidateHolder checks a holder name with the same rules as ValidateResource.
func ValidateHolder(name string) error { return validateName("holder", name) }

func validateName(field, name string) error {
	switch {
	case name == "":
		return invalidf(field, "must not be empty")
	case len(name) > MaxNameLen:
		return invalidf(field, "%d bytes is longer than the limit of %d", len(name), MaxNameLen)
	case !utf8.ValidString(name):
		return invalidf(field, "%q is not valid UTF-8", name)
	}
	for _, r := range name {
		if unicode.IsControl(r) { // C0, DEL and C1
			return invalidf(field, "%q contains the control character %U", name, r)
		}
	}
	return nil
}

func invalidf(field, format string, args ...any) error {
	return &InvalidInputError{Field: field, Reason: fmt.Sprintf(format, args...)}
}
