package fencegatecli

import (
	"net/url"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/internal/dbtest"
)

// TestNoSecretPrinted runs every command, its help and its error paths with a
// password in the DSN (given as the global --dsn, the command's --dsn and
// $FENCEGATE_DSN; reachable, unreachable and unparsable) and checks that the
// password appears in none of the output.
func TestNoSecretPrinted(t *testing.T) {
	const secret = "S3CRET-pw"
	real, err := url.Parse(dbtest.PostgresSchemaURL(t))
	if err != nil {
		t.Fatal(err)
	}
	real.User = url.UserPassword(cmpOr(real.User.Username(), "postgres"), secret) // trust auth ignores it
	dsns := map[string]string{
		"reachable":          real.String(),
		"unreachable":        "postgres://user:" + secret + "@127.0.0.1:1/db?sslmode=disable&connect_timeout=5",
		"bad port":           "postgres://user:" + secret + "@host:badport/db",
		"bad host":           "postgresql://user:" + secret + "@[::1/db",
		"escaped":            "postgres://user:" + url.QueryEscape(secret+"@/") + "@127.0.0.1:1/db",
		"password parameter": "postgres://127.0.0.1:1/db?user=u&password=" + secret,
		"unknown scheme":     "mysql://user:" + secret + "@host/db",
		"keyword/value":      dbtest.KeywordValue(real),
		"quoted, spaced":     "host=127.0.0.1 port=1 user=u password = '" + secret + " x' dbname=db connect_timeout=5",
	}
	token := fence.Token{Resource: "l", Holder: "h", Fence: 1}.String()
	invocations := [][]string{
		{}, {"--help"}, {"nope"}, {"--bogus"}, {"help", "claim"},
		{"claim", "--lock", "l"}, {"claim"}, {"claim", "--lock", "l", "extra"}, {"claim", "--ttl", "banana"},
		{"check", token}, {"check"}, {"renew", token}, {"release", token}, {"release", token, "extra"},
		{"run", "--lock", "l", "--", "true"}, {"run", "--lock", "l"},
		{"gate", token, "--", "SELECT 1"}, {"gate", token},
		{"status"}, {"status", "--json"}, {"status", "--bogus"},
		{"migrate", "status"}, {"migrate", "sideways"},
	}
	for _, cmd := range commands() {
		invocations = append(invocations, []string{cmd.name, "--help"}, []string{cmd.name, "--bogus"})
	}
	for name, dsn := range dsns {
		t.Run(name, func(t *testing.T) {
			for _, inv := range invocations {
				check := func(how string, r result) {
					t.Helper()
					if strings.Contains(r.stdout+r.stderr, secret) || strings.Contains(r.stdout+r.stderr, url.QueryEscape(secret)) {
						t.Errorf("%s %q printed the password:\n%v", how, inv, r)
					}
				}
				check("--dsn DSN", fg(t, nil, append([]string{"--dsn", dsn}, inv...)...))
				check("--dsn=DSN", fg(t, nil, append([]string{"--dsn=" + dsn}, inv...)...))
				check("$FENCEGATE_DSN", fg(t, map[string]string{envDSN: dsn}, inv...))
				if len(inv) > 0 {
					check("the command's --dsn", fg(t, nil, append(inv[:1:1], append([]string{"--dsn", dsn}, inv[1:]...)...)...))
				}
			}
		})
	}
	// The binary writes to files, not buffers: the same holds there.
	r := sub(t, map[string]string{envDSN: dsns["bad port"]}, "status")
	if r.code == exitOK || strings.Contains(r.stdout+r.stderr, secret) {
		t.Errorf("binary status with a bad DSN:\n%v", r)
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
