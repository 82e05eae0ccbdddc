package pathid_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/fencegate/fencegate/cmd/fencegate/internal/pathid"
)

// A claim of a directory and a file, and the writes it covers.
func ExampleRoot_ResolveAll() {
	dir, _ := os.MkdirTemp("", "pathid")
	defer os.RemoveAll(dir)
	_ = os.MkdirAll(filepath.Join(dir, "src"), 0o755)

	root, err := pathid.Open(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer root.Close()
	claim, err := root.ResolveAll([]string{"./src/", "notes.txt"})
	fmt.Println(claim, err)

	_, err = root.Target(claim, "src/deep/a.go")
	fmt.Println(err)
	_, err = root.Target(claim, "README.md")
	fmt.Println(err)
	_, err = root.ResolveAll([]string{"src/", "src/a.go"})
	fmt.Println(err)
	// Output:
	// notes.txt, src/ <nil>
	// <nil>
	// invalid path: path "README.md" is not covered by this token, which covers only notes.txt, src/: claim it (or a directory above it) and write with that token
	// invalid path: path "src/a.go" is inside the directory "src/", which the same claim names: name one or the other
}
