package fencegatecli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/fencegate/fencegate/cmd/fencegate/internal/confined"
	"github.com/fencegate/fencegate/cmd/fencegate/internal/ops"
	"github.com/fencegate/fencegate/gate"
)

// maxStdinSQL bounds the SQL read from stdin ("-").
const maxStdinSQL = 16 << 20

func gateCommand() *command {
	cmd := &command{
		name:     "gate",
		synopsis: "run SQL in one transaction, only if the token's fence is admitted",
		usage:    "gate [--lock NAME] [--arg VALUE]... [TOKEN] -- SQL [SQL...]",
		help: `Make a fenced write: run the SQL statements in one transaction that commits
only together with the gate's admission of TOKEN. In that transaction,
before the statements, the gate raises the lock's floor to the token's fence,
or refuses it because a newer fence got there first. A refused token commits
nothing: exit 3, with the rejection record on stderr (it is also kept in the
rejection log: 'fencegate status').

TOKEN defaults to $` + envToken + ` (set by 'fencegate run'); --lock, if given,
must be the token's lock. The fence must have been issued by fencegate on
this database: a forged or mistyped one is refused without raising a floor.

Each SQL argument is exactly one statement; "-" reads one statement from
stdin. --arg binds a value to a single statement's parameters ($1, $2 on
Postgres; $1, ?1 or ? on SQLite; ? on MySQL and MariaDB), in order, and
there must be exactly as many values as parameters; values are never
formatted into the SQL.
Statements are executed, not queried: rows they return are not printed.

The SQL cannot end, restart or nest the fenced transaction: COMMIT, END,
ROLLBACK, ABORT, BEGIN, START TRANSACTION, SAVEPOINT, RELEASE, ROLLBACK TO,
PREPARE TRANSACTION and the like fail, however spelt, and roll everything
back (on SQLite ATTACH, DETACH and PRAGMA are refused too). MySQL and
MariaDB commit DDL implicitly (CREATE, ALTER, DROP, RENAME, TRUNCATE, also
LOCK TABLES, GRANT and the like), so the gate refuses it before anything is
sent: create tables outside the gate. Exit 0 means
every statement committed under the fence; exit 1 says "nothing was
committed" when nothing was, and says so when the outcome is unknown (the
connection broke during COMMIT). After a serialization failure or SQLite
busy error the whole transaction runs again; its effects commit at most
once.

    fencegate gate "$TOKEN" -- "UPDATE deploys SET version = 'v2' WHERE slot = 1"
    fencegate gate --arg v2 -- 'UPDATE deploys SET version = $1 WHERE slot = 1'
    fencegate gate --arg v2 -- 'UPDATE deploys SET version = ? WHERE slot = 1'    # MySQL`,
		db: true, args: true, dashes: true,
	}
	fs := cmd.flagSet()
	lock := fs.String("lock", "", "the lock the token must be for (default: the token's)")
	var params []any
	fs.Func("arg", "a value for the statement's next parameter (repeatable)", func(v string) error {
		params = append(params, v)
		return nil
	})
	cmd.exec = func(ctx context.Context, c *cli, args []string) error {
		before, stmts, found := splitDashes(args)
		if !found || len(stmts) == 0 {
			return usagef("missing -- SQL")
		}
		token, err := c.tokenArg(before, *lock)
		if err != nil {
			return err
		}
		if len(params) > 0 && len(stmts) > 1 {
			return usagef("--arg binds the parameters of a single statement; got %d statements", len(stmts))
		}
		if i := slices.Index(stmts, "-"); i >= 0 && slices.Contains(stmts[i+1:], "-") {
			return usagef(`"-" (SQL from stdin) may appear once`)
		}
		for i, s := range stmts {
			if s == "-" {
				text, err := readAll(c.stdin)
				if err != nil {
					return fmt.Errorf("read SQL from stdin: %w", err)
				}
				stmts[i] = text
			}
			if strings.TrimSpace(stmts[i]) == "" {
				return usagef("statement %d is empty", i+1)
			}
			if strings.ContainsRune(stmts[i], 0) {
				return usagef("statement %d contains a NUL byte", i+1)
			}
		}
		b, err := c.database(ctx, true)
		if err != nil {
			return err
		}

		writes := make([]confined.Statement, len(stmts))
		for i, q := range stmts {
			writes[i] = confined.Statement{SQL: q}
		}
		writes[0].Args = params // at most one statement when there are any
		res, err := confined.Write(ctx, b.Driver, b.Gate, token, writes)
		if stale, ok := errors.AsType[*gate.StaleFenceError](err); ok {
			refused := fmt.Sprintf("refused: %s; nothing was committed", ops.RejectionText(ops.RejectionOf(stale)))
			if err == error(stale) {
				return heldf("%s", refused)
			}
			c.logf(cmd, "%s", refused)
			return heldf("%v", err) // joined with the failure to log it
		}
		summary, _, err := ops.SQLOutcome(token, len(stmts), res, err)
		if err != nil {
			return err
		}
		fmt.Fprintln(c.stdout, summary)
		return nil
	}
	return cmd
}

func readAll(r io.Reader) (string, error) {
	if r == nil {
		return "", nil
	}
	b, err := io.ReadAll(io.LimitReader(r, maxStdinSQL+1))
	if err != nil {
		return "", err
	}
	if len(b) > maxStdinSQL {
		return "", fmt.Errorf("more than %d bytes", maxStdinSQL)
	}
	return string(b), nil
}
