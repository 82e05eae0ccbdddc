//go:build !unix

package bench

import (
	"context"
	"fmt"
	"os"
)

// ChildRole is the first argument that makes fgbench the wedged holder.
const ChildRole = "-wedged-child"

// WedgedChild needs SIGSTOP; it is unix only.
func WedgedChild([]string) int { fmt.Fprintln(os.Stderr, "unix only"); return 2 }

// Wedged needs SIGSTOP and SIGCONT; it is skipped off unix.
func Wedged(_ context.Context, _ Config, r *Report) error {
	r.f("## 5. The wedged holder\n\nSkipped: it needs SIGSTOP (unix).\n\n")
	return nil
}
