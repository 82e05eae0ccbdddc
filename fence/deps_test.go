package fence_test

import (
	"os/exec"
	"strings"
	"testing"
)

// fence and clock are the ground every layer stands on (fence: gate, lease,
// the drivers' shared steps; clock: lease, its clients and the tools that
// date leases), so they import the standard library only: a package of the
// project under them would be an import that runs back up.
func TestGroundImportsOnlyTheStandardLibrary(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to check dependencies: %v", err)
	}
	for _, pkg := range []string{"github.com/fencegate/fencegate/fence", "github.com/fencegate/fencegate/clock"} {
		out, err := exec.Command(gobin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list: %v\n%s", err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if dep != pkg {
				t.Errorf("%s depends on %s; it may import the standard library only", pkg, dep)
			}
		}
	}
}
