package fence

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNameLen is the longest resource or holder name, in bytes, that fencegate
// accepts. Names are stored as primary keys; a bound keeps indexes small and
// turns runaway input (a whole prompt pasted as a lock name) into an error.
const MaxNameLen = 256

// tokenPrefix starts the text form of a token of one resource and names its
// version; setTokenPrefix starts that of a set token.
const (
	tokenPrefix    = "fg1"
	setTokenPrefix = "fg2"
)

// maxTokenLen is the longest text form of a valid single-resource token: the
// prefix, three colons, a 19-digit fence, and two names of MaxNameLen bytes
// that each escape to three characters a byte. maxSetTokenLen is that of a
// set token: the prefix, the fence, the holder, and MaxSetMembers names.
const (
	maxTokenLen    = len(tokenPrefix) + 3 + 19 + 2*3*MaxNameLen
	maxSetTokenLen = len(setTokenPrefix) + 2 + 19 + 3*MaxNameLen + MaxSetMembers*(1+3*MaxNameLen)
)

// setSep joins a set token's members in Token.set: a NUL, which no valid
// name contains.
const setSep = "\x00"

// Token is the proof of ownership a holder presents to the gate: the resource
// it writes, who it is, and the fence of its generation of ownership. The
// lease coordinator issues it (lease.Lease.Token); NewToken builds one from
// a lock service outside the database.
//
// A token may instead name a set of resources claimed together, under one
// fence (lease.Client.BeginAcquireSet, NewSetToken): Resource is then empty
// and Members lists them. gate.Gate.Commit checks and holds the floor of
// every member. Tokens are comparable values; two set tokens are equal when
// they name the same members, holder and fence.
//
// The zero Token is invalid: every method that takes a Token rejects it with
// ErrInvalidInput.
type Token struct {
	// Resource names the guarded thing ("deploy-slot", "orders/42",
	// "path:src/a.go"); empty in a set token.
	Resource string
	// Holder names the lease holder; it is recorded with the floor and in the
	// rejection log so that overlapping holders can be identified.
	Holder string
	// Fence is the generation number. It only grows between generations and
	// is at least 1.
	Fence int64

	// set holds a set token's members, sorted, joined by setSep; empty for
	// a token of one resource. Unexported so that Token stays comparable
	// and a set can only be made valid (NewSetToken, Parse).
	set string
}

// NewToken builds the token of a lock granted outside fencegate (etcd,
// Consul, ZooKeeper, a Kubernetes Lease): resource names the guarded thing,
// holder who was granted it, and fence the lock service's number for that
// grant, which must be strictly greater for every later grant of resource
// and never reused (see "Fences from outside" in package gate's doc). It
// checks what Token.Validate checks and returns an error matching
// ErrInvalidInput for a bad name or a fence below 1.
//
// A token from NewToken is admitted at once with gate.Gate.Admit, before
// the holder reads anything its writes depend on.
func NewToken(resource, holder string, fence int64) (Token, error) {
	t := Token{Resource: resource, Holder: holder, Fence: fence}
	if err := t.Validate(); err != nil {
		return Token{}, err
	}
	return t, nil
}

// NewSetToken builds the token of a claim of several resources under one
// fence: resources as ValidateSet accepts them (in any order), holder and
// fence as in NewToken. A set of one resource is that resource's plain
// token, with the same text form as before sets existed. Errors match
// ErrInvalidInput.
func NewSetToken(resources []string, holder string, fence int64) (Token, error) {
	members, err := ValidateSet(resources)
	if err != nil {
		return Token{}, err
	}
	t := Token{Resource: members[0], Holder: holder, Fence: fence}
	if len(members) > 1 {
		t = Token{Holder: holder, Fence: fence, set: strings.Join(members, setSep)}
	}
	if err := t.Validate(); err != nil {
		return Token{}, err
	}
	return t, nil
}

// IsSet reports whether t names a set of resources (Resource is empty).
func (t Token) IsSet() bool { return t.set != "" }

// Members returns the resources the token claims, sorted: Resource alone
// for a token of one resource, every member of a set. The slice is new on
// every call.
func (t Token) Members() []string {
	if t.set == "" {
		return []string{t.Resource}
	}
	return strings.Split(t.set, setSep)
}

// Covers reports whether the token's claim covers the file resource f (a
// name from PathResource): a member is f itself, or a directory above it.
// For a plain name it is equality with a member.
func (t Token) Covers(f string) bool {
	for _, m := range t.Members() {
		if covers(m, f) {
			return true
		}
	}
	return false
}

// Name returns what the token claims, for messages and logs: Resource, or
// a set's members in braces ("{path:a/, path:b.go}").
func (t Token) Name() string {
	if t.set == "" {
		return t.Resource
	}
	return "{" + strings.ReplaceAll(t.set, setSep, ", ") + "}"
}

// String returns the token's text form, which Parse reads back. A token of
// one resource is
//
//	fg1:<fence>:<resource>:<holder>
//
// and a set token
//
//	fg2:<fence>:<holder>:<member>:<member>...
//
// with the members sorted. Names are escaped with url.QueryEscape, so none
// can contain a bare colon, and the form is safe to pass through
// environment variables and shell arguments. Examples:
// "fg1:42:deploy-slot:agent-a", "fg2:43:agent-a:path%3Asrc%2F:path%3Ago.mod".
func (t Token) String() string {
	if t.set != "" {
		var b strings.Builder
		b.WriteString(setTokenPrefix + ":" + strconv.FormatInt(t.Fence, 10) + ":" + url.QueryEscape(t.Holder))
		for m := range strings.SplitSeq(t.set, setSep) {
			b.WriteString(":" + url.QueryEscape(m))
		}
		return b.String()
	}
	return tokenPrefix + ":" + strconv.FormatInt(t.Fence, 10) + ":" +
		url.QueryEscape(t.Resource) + ":" + url.QueryEscape(t.Holder)
}

// Validate reports whether the token could have been issued: a valid resource
// (or, for a set token, a valid set of at least two members, as
// ValidateSet checks) and holder name and a positive fence. Errors match
// ErrInvalidInput.
func (t Token) Validate() error {
	if t.set != "" {
		members := t.Members()
		sorted, err := ValidateSet(members)
		switch {
		case err != nil:
			return err
		case t.Resource != "":
			return invalidf("token", "a set token has no Resource (got %q)", t.Resource)
		case len(members) < 2 || !slices.Equal(sorted, members):
			return invalidf("token", "a set token's members must be sorted and at least two; build it with NewSetToken")
		}
	} else if err := ValidateResource(t.Resource); err != nil {
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

// Parse reads a token from the text form produced by Token.String, of either
// version. It accepts only the canonical form (no sign or leading zeros on
// the fence, the same escaping String produces, a set's members sorted), so
// Parse(s).String() == s for every accepted s. Errors match ErrInvalidInput.
func Parse(s string) (Token, error) {
	if strings.HasPrefix(s, setTokenPrefix+":") {
		return parseSet(s)
	}
	if len(s) > maxTokenLen {
		return Token{}, invalidf("token", "%d bytes is too long", len(s))
	}
	parts := strings.Split(s, ":")
	if len(parts) != 4 || parts[0] != tokenPrefix {
		return Token{}, invalidf("token", "want the form %s:<fence>:<resource>:<holder> (or %s:<fence>:<holder>:<member>...), got %q", tokenPrefix, setTokenPrefix, s)
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

// parseSet reads the text form of a set token.
func parseSet(s string) (Token, error) {
	if len(s) > maxSetTokenLen {
		return Token{}, invalidf("token", "%d bytes is too long", len(s))
	}
	parts := strings.Split(s, ":")
	if len(parts) < 5 {
		return Token{}, invalidf("token", "want the form %s:<fence>:<holder>:<member>:<member>..., with two members or more, got %q", setTokenPrefix, s)
	}
	fence, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return Token{}, invalidf("token", "fence %q is not a decimal integer", parts[1])
	}
	holder, err := url.QueryUnescape(parts[2])
	if err != nil {
		return Token{}, invalidf("token", "holder %q is not escaped correctly", parts[2])
	}
	members := make([]string, len(parts)-3)
	for i, p := range parts[3:] {
		if members[i], err = url.QueryUnescape(p); err != nil {
			return Token{}, invalidf("token", "member %q is not escaped correctly", p)
		}
		if strings.Contains(members[i], setSep) {
			return Token{}, invalidf("resource", "%q contains the control character U+0000", members[i])
		}
	}
	t := Token{Holder: holder, Fence: fence, set: strings.Join(members, setSep)}
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
// U+001F and U+007F to U+009F). A name that starts with PathPrefix must also
// hold a clean relative path (see PathResource). Errors match
// ErrInvalidInput.
func ValidateResource(name string) error {
	if err := validateName("resource", name); err != nil {
		return err
	}
	if rel, ok := PathOf(name); ok {
		return validatePath(rel)
	}
	return nil
}

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
