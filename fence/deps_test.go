package fence_test

import (
	"os/exec"
	"strings"
	"testing"
)

// fence is the ground every layer stands on (gate, lease, the drivers'
// shared steps), so it imports the standard library only: a package of
// the project under it would be an import that runs back up.
func TestFenceImportsOnlyTheStandardLibrary(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to check dependencies: %v", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep != "github.com/fencegate/fencegate/fence" {
			t.Errorf("fence depends on %s; it may import the standard library only", dep)
		}
	}
}
