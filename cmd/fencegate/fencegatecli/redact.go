package fencegatecli

import (
	"cmp"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// redacted replaces a password wherever the command prints it.
const redacted = "xxxxx"

// passwordParam finds password=VALUE in a query string or a key=value DSN,
// where the value may be quoted and "=" spaced: password = 'a b'.
var passwordParam = regexp.MustCompile(`(?i)(?:^|[\s?&])(?:ssl)?password\s*=\s*('(?:[^'\\]|\\.)*'|[^\s&]+)`)

// secrets returns the passwords in every argument and in $FENCEGATE_DSN, raw
// and URL-decoded, longest first: the userinfo password of anything shaped
// like a URL (parsable or not) and password= parameters.
func secrets(args []string, env func(string) string) []string {
	var out []string
	add := func(s string) {
		if s == "" {
			return
		}
		out = append(out, s)
		if d, err := url.QueryUnescape(s); err == nil && d != s {
			out = append(out, d)
		}
	}
	for _, a := range append(slices.Clone(args), env(envDSN)) {
		for _, m := range passwordParam.FindAllStringSubmatch(a, -1) {
			add(m[1])
			add(strings.Trim(m[1], "'"))
		}
		_, rest, ok := strings.Cut(a, "://")
		if !ok {
			continue
		}
		// The userinfo ends at the last "@" of the authority; a malformed
		// URL may have "@" later too, so try both ends.
		authority := rest
		if i := strings.IndexAny(rest, "/?#"); i >= 0 && strings.Contains(rest[:i], "@") {
			authority = rest[:i]
		}
		for _, at := range []int{strings.Index(authority, "@"), strings.LastIndex(authority, "@")} {
			if at < 0 {
				continue
			}
			if _, pw, ok := strings.Cut(authority[:at], ":"); ok {
				add(pw)
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	return slices.Compact(out)
}

// redactDSN hides the password of a DSN for display.
func redactDSN(dsn string) string {
	return redactWith(secrets([]string{dsn}, func(string) string { return "" }), dsn)
}

func redactWith(secrets []string, s string) string {
	for _, sec := range secrets {
		s = strings.ReplaceAll(s, sec, redacted)
	}
	return s
}

// redactingWriter replaces secrets in everything written through it.
type redactingWriter struct {
	w       io.Writer
	secrets []string
}

func (r *redactingWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(r.w, redactWith(r.secrets, string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// redacting returns w itself when there is nothing to hide, so that a file
// stays a file for run's child.
func redacting(w io.Writer, secrets []string) io.Writer {
	if len(secrets) == 0 {
		return w
	}
	return &redactingWriter{w: w, secrets: secrets}
}

// dsnValue is the --dsn flag: its default, shown in usage, is redacted.
type dsnValue struct{ p *string }

func (v dsnValue) String() string {
	if v.p == nil {
		return ""
	}
	return redactDSN(*v.p)
}

func (v dsnValue) Set(s string) error { *v.p = s; return nil }
