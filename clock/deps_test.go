package clock_test

import (
	"os/exec"
	"strings"
	"testing"
)

// clock is what lease, its clients and the tools date leases with, so it
// imports the standard library only: a package of the project under it
// would be an import that runs back up.
func TestClockImportsOnlyTheStandardLibrary(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to check dependencies: %v", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep != "github.com/fencegate/fencegate/clock" {
			t.Errorf("clock depends on %s; it may import the standard library only", dep)
		}
	}
}
