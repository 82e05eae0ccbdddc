//go:build !unix

package bench

import (
	"context"
	"fmt"
	"os"
)

// MySQLChildRole is the first argument that makes fgbench the wedged holder
// of the MariaDB column.
const MySQLChildRole = "-wedged-mysql-child"

// WedgedMySQLChild needs SIGSTOP; it is unix only.
func WedgedMySQLChild([]string) int { fmt.Fprintln(os.Stderr, "unix only"); return 2 }

// wedgedMariaDB needs SIGSTOP and SIGCONT; it is skipped off unix.
func wedgedMariaDB(_ context.Context, _ Config, _ *MySQL, r *Report) error {
	r.f("### The wedged holder\n\nSkipped: it needs SIGSTOP (unix).\n\n")
	return nil
}
