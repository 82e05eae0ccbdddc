package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fencegate/fencegate/cmd/fencegate/internal/confined"
	"github.com/fencegate/fencegate/cmd/fencegate/internal/ops"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
)

// Bounds on one SQL write, so that a runaway model cannot hold the floor
// row for long.
const (
	maxSQLStatements = 100
	maxSQLBytes      = 1 << 20 // the statements' text and string arguments together
)

// writeSQL is the SQL kind of write: the statements run through the same
// confined write path as 'fencegate gate', in one transaction that commits
// only together with the gate's admission of token, and that the SQL can
// never end, restart or nest.
func (s *Server) writeSQL(ctx context.Context, token fence.Token, in []sqlStatement) (*mcp.CallToolResult, writeOutput, error) {
	out := writeOutput{Kind: "sql", Resource: ops.TokenName(token), Fence: token.Fence}
	if !s.cfg.AllowSQL {
		return nil, out, errors.New("SQL writes are off: the server must be started with --allow-sql")
	}
	stmts, err := sqlStatements(in)
	if err != nil {
		return nil, out, err
	}
	if err := s.checkLeased(ctx, token); err != nil {
		return nil, out, err
	}
	res, err := confined.Write(ctx, s.b.Driver, s.b.Gate, token, stmts)
	if stale, ok := errors.AsType[*gate.StaleFenceError](err); ok {
		return s.refused(out, stale)
	}
	summary, rows, err := ops.SQLOutcome(token, len(stmts), res, err)
	if err != nil {
		if res.Outcome != confined.NotCommitted {
			s.log.Error("write: SQL failed after a commit may have happened", "resource", ops.TokenName(token), "fence", token.Fence, "outcome", res.Outcome, "err", err)
		}
		return nil, out, errors.New(stripPrefix(err))
	}
	out.Written, out.Statements, out.RowsAffected, out.Message = true, len(stmts), rows, summary
	s.log.Info("write", "resource", ops.TokenName(token), "fence", token.Fence, "statements", len(stmts), "rows", rows)
	return nil, out, nil
}

// sqlStatements checks the statements an agent sent and turns them into
// confined ones.
func sqlStatements(in []sqlStatement) ([]confined.Statement, error) {
	switch {
	case len(in) == 0:
		return nil, errors.New("sql is empty: give at least one statement, such as [{\"query\": \"UPDATE t SET v = $1\", \"args\": [2]}]")
	case len(in) > maxSQLStatements:
		return nil, fmt.Errorf("%d statements, more than %d in one write", len(in), maxSQLStatements)
	}
	size := 0
	out := make([]confined.Statement, len(in))
	for i, st := range in {
		if strings.TrimSpace(st.Query) == "" {
			return nil, fmt.Errorf("statement %d is empty", i+1)
		}
		size += len(st.Query)
		args := make([]any, len(st.Args))
		for j, a := range st.Args {
			v, err := sqlArg(a)
			if err != nil {
				return nil, fmt.Errorf("statement %d, argument %d: %s", i+1, j+1, err)
			}
			if s, ok := v.(string); ok {
				size += len(s)
			}
			args[j] = v
		}
		out[i] = confined.Statement{SQL: st.Query, Args: args}
	}
	if size > maxSQLBytes {
		return nil, fmt.Errorf("the statements and their arguments are %d bytes, more than %d", size, maxSQLBytes)
	}
	return out, nil
}

// sqlArg checks a JSON value to bind: a string, number (float64, which
// both dialects convert for an integer parameter), boolean or null.
func sqlArg(v any) (any, error) {
	switch v.(type) {
	case nil, string, float64, bool:
		return v, nil
	}
	return nil, errors.New("want a string, number, boolean or null (pass JSON as a string)")
}
