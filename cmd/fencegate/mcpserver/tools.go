package mcpserver

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fencegate/fencegate/cmd/fencegate/internal/ops"
	"github.com/fencegate/fencegate/cmd/fencegate/internal/pathid"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/lease"
)

// statusRefusals is how many recent refusals the status tool shows.
const statusRefusals = 10

// The tools' inputs and outputs. Their JSON schemas, which clients show to
// the model, come from these types: a field without omitempty is required,
// unknown fields are refused, and the jsonschema tag is the description.

type claimInput struct {
	Resource string   `json:"resource,omitempty" jsonschema:"the lock to claim: any name you and the other agents agree on, such as deploy-slot (1 to 256 bytes, no control characters); its token writes no files. Give resource or paths"`
	Paths    []string `json:"paths,omitempty" jsonschema:"the files to claim, relative to the server's root: such as [\"notes.txt\", \"src/\"]; a trailing / claims a directory and everything below it; up to 64, all or none, under one fence. The token writes only these files. Give resource or paths"`
	TTL      string   `json:"ttl,omitempty" jsonschema:"how long the lease lasts unless renewed, such as 30s or 2m (default: the server's --ttl)"`
	Wait     string   `json:"wait,omitempty" jsonschema:"if someone else holds the lock, keep asking for this long, such as 10s (default: answer at once; at most 5m)"`
}

type claimOutput struct {
	Claimed     bool     `json:"claimed" jsonschema:"true: the lease is yours (use token); false: someone else holds it (holder, fence, expires_in_ms say who and until when), a normal answer, not an error"`
	AlreadyHeld bool     `json:"already_held" jsonschema:"you held the lock already, under an earlier claim: token is that claim's"`
	Resource    string   `json:"resource"`
	Paths       []string `json:"paths,omitempty" jsonschema:"for a claim of paths: each path's identity (cleaned, symbolic links resolved), the files the token writes"`
	Token       string   `json:"token,omitempty" jsonschema:"your token, for write, renew, release and assert; absent when someone else holds the lock"`
	Holder      string   `json:"holder" jsonschema:"who holds the lease now: you, or the other holder"`
	Fence       int64    `json:"fence" jsonschema:"the lease's fence: its generation of ownership, higher than every earlier one"`
	ExpiresAt   string   `json:"expires_at,omitempty" jsonschema:"when the lease ends unless renewed, in the database's clock (UTC); for a fresh claim"`
	ExpiresInMS int64    `json:"expires_in_ms" jsonschema:"milliseconds until then: when the lock frees at the latest, if it is someone else's"`
	Message     string   `json:"message"`
}

type tokenInput struct {
	Token string `json:"token" jsonschema:"the token claim returned, such as fg1:7:deploy-slot:agent-a"`
}

type assertOutput struct {
	Current     bool   `json:"current" jsonschema:"the token's lease is live and its fence is the lock's floor, at the moment of reading"`
	Resource    string `json:"resource"`
	Fence       int64  `json:"fence" jsonschema:"the token's fence"`
	Holder      string `json:"holder" jsonschema:"who holds the lock's latest lease (live or not); empty if it was never leased"`
	HolderFence int64  `json:"holder_fence" jsonschema:"that lease's fence"`
	Floor       int64  `json:"floor" jsonschema:"the highest fence the gate has admitted for the lock"`
	ExpiresInMS int64  `json:"expires_in_ms" jsonschema:"milliseconds the token's lease has left, 0 if not current"`
	Message     string `json:"message"`
}

type renewInput struct {
	Token string `json:"token" jsonschema:"the token claim returned"`
	TTL   string `json:"ttl,omitempty" jsonschema:"the new term from now, such as 30s (default: the server's --ttl)"`
}

type renewOutput struct {
	Renewed        bool   `json:"renewed" jsonschema:"the lease was extended; the token and fence stay the same"`
	Expired        bool   `json:"expired" jsonschema:"the lease was lost (expired, released or superseded) and is never extended again: claim the lock again"`
	Resource       string `json:"resource"`
	Fence          int64  `json:"fence"`
	ExpiresAt      string `json:"expires_at,omitempty" jsonschema:"the new expiry, in the database's clock (UTC)"`
	ExpiresInMS    int64  `json:"expires_in_ms"`
	Successor      string `json:"successor,omitempty" jsonschema:"when expired: who holds the lock now, if anyone"`
	SuccessorFence int64  `json:"successor_fence,omitempty" jsonschema:"when expired: the successor's fence"`
	Message        string `json:"message"`
}

type releaseOutput struct {
	Released bool   `json:"released" jsonschema:"the lease was released and the lock is free; false: the token was stale and nothing changed (a late release never frees a successor)"`
	Resource string `json:"resource"`
	Fence    int64  `json:"fence"`
	Message  string `json:"message"`
}

type writeInput struct {
	Token   string         `json:"token" jsonschema:"the token claim returned; the write lands only if its fence is still admitted"`
	Path    string         `json:"path,omitempty" jsonschema:"file write: a path relative to the server's root, such as docs/notes.md; missing directories are created"`
	Content string         `json:"content,omitempty" jsonschema:"file write: the text to write or append"`
	Mode    string         `json:"mode,omitempty" jsonschema:"file write: write (default) replaces the file, append adds content to its end, delete removes it"`
	SQL     []sqlStatement `json:"sql,omitempty" jsonschema:"SQL write (servers started with --allow-sql): statements run in order in one transaction"`
}

type sqlStatement struct {
	Query string `json:"query" jsonschema:"one SQL statement, with parameters ($1 on Postgres, ? or ?1 on SQLite); no BEGIN, COMMIT or ROLLBACK; on MySQL no DDL (it commits implicitly: create tables outside the gate)"`
	Args  []any  `json:"args,omitempty" jsonschema:"values bound to the statement's parameters, in order"`
}

type writeOutput struct {
	Written      bool               `json:"written" jsonschema:"the write landed, ordered after every write of an earlier fence"`
	Kind         string             `json:"kind" jsonschema:"file or sql"`
	Resource     string             `json:"resource"`
	Fence        int64              `json:"fence"`
	Path         string             `json:"path,omitempty"`
	Mode         string             `json:"mode,omitempty"`
	Bytes        int64              `json:"bytes,omitempty" jsonschema:"the file's size after the write"`
	Statements   int                `json:"statements,omitempty"`
	RowsAffected int64              `json:"rows_affected,omitempty"`
	Refusal      *ops.RefusalReport `json:"refusal,omitempty" jsonschema:"why the gate refused the token: both holders, both fences and the refusal's number in the rejection log"`
	Message      string             `json:"message"`
}

type statusInput struct {
	Resource string `json:"resource,omitempty" jsonschema:"show only this lock (default: every lock)"`
}

// addTools registers the tools.
func (s *Server) addTools() {
	mcp.AddTool(s.server, &mcp.Tool{
		Name:  "claim",
		Title: "Claim a lock",
		Description: "Claim a lock for a lease and get its token, which every write needs. " +
			"If someone else holds the lock, the answer says who, their fence and when it frees at the latest (claimed=false): wait, or call again with wait.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(false), OpenWorldHint: new(false)},
	}, s.claim)
	assert := &mcp.Tool{
		Name:  "assert",
		Title: "Is a token current? (advisory)",
		Description: "Say whether a token is the lock's current generation: its lease is live and its fence is the floor. " +
			"ADVISORY: the answer can be stale the moment it is given. Never decide to write on it: call write, which the database refuses once the token is stale.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)},
	}
	mcp.AddTool(s.server, assert, s.assert)
	// check, the CLI's name for it, is the same tool.
	check := *assert
	check.Name, check.Description = "check", "The same as assert (the command line's name for it). "+assert.Description
	mcp.AddTool(s.server, &check, s.assert)
	mcp.AddTool(s.server, &mcp.Tool{
		Name:        "renew",
		Title:       "Renew a lease",
		Description: "Extend the lease a token names to ttl from now; the fence and token stay the same. A lost lease answers expired=true with its successor: claim again.",
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: new(false), OpenWorldHint: new(false)},
	}, s.renew)
	mcp.AddTool(s.server, &mcp.Tool{
		Name:        "release",
		Title:       "Release a lease",
		Description: "Release the lease a token names, so the lock is free at once. A stale token changes nothing (released=false): a late release never frees a successor's lease.",
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: new(false), OpenWorldHint: new(false)},
	}, s.release)
	writeSchema, err := jsonschema.For[writeInput](nil)
	if err != nil {
		panic(err) // the type is fixed: a failure is a bug
	}
	writeSchema.Properties["mode"].Enum = []any{"write", "append", "delete"}
	mcp.AddTool(s.server, &mcp.Tool{
		Name:  "write",
		Title: "Fenced write",
		Description: "Write under a token: the change lands only if the token's fence is still admitted by the gate, in the same transaction as the check, so a holder that lost its lease while stalled cannot write. " +
			"A file write ({token, path, content, mode}) is confined to the server's root and is atomic. " +
			"An SQL write ({token, sql: [{query, args}]}) needs a server started with --allow-sql. " +
			"A refusal (isError) names both holders and fences: your lease is gone, claim again before writing.",
		InputSchema: writeSchema,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(true), OpenWorldHint: new(false)},
	}, s.write)
	mcp.AddTool(s.server, &mcp.Tool{
		Name:        "status",
		Title:       "Locks, floors and refusals",
		Description: "Show every lock (or one): its lease state, holder, fence, floor and expiry, and the most recent refusals of stale writes. A snapshot: it can be stale by the time you read it.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)},
	}, s.status)
}

func (s *Server) claim(ctx context.Context, _ *mcp.CallToolRequest, in claimInput) (*mcp.CallToolResult, claimOutput, error) {
	var out claimOutput
	resources, paths, err := s.claimResources(in)
	if err != nil {
		return nil, out, err
	}
	name := in.Resource
	if paths != nil {
		name = paths.String()
	}
	ttl, err := parseDurationArg("ttl", in.TTL, s.cfg.TTL)
	if err != nil {
		return nil, out, err
	}
	if ttl < ops.MinTTL {
		return nil, out, fmt.Errorf("bad ttl %q: must be at least %v", in.TTL, ops.MinTTL)
	}
	wait, err := parseDurationArg("wait", in.Wait, 0)
	if err != nil {
		return nil, out, err
	}
	if wait < 0 || wait > MaxClaimWait {
		return nil, out, fmt.Errorf("bad wait %q: must be between 0 and %s", in.Wait, MaxClaimWait)
	}
	client, err := lease.NewClient(&lease.ClientOptions{Holder: s.cfg.Holder, TTL: ttl})
	if err != nil {
		return nil, out, errors.New(stripPrefix(err))
	}
	l, err := ops.ClaimSet(ctx, s.b, client, resources, wait)
	if held, ok := errors.AsType[*lease.HeldError](err); ok {
		out = claimOutput{
			Resource: name, Paths: paths.Names(), Holder: held.HeldBy, Fence: held.Fence, AlreadyHeld: held.AlreadyHeld,
			ExpiresInMS: ms(held.RetryAfter),
		}
		// The blocking claim, when it is not exactly this one: a member of
		// the set, or a directory above (or a path below) a path.
		exact := held.Resource == "" || (len(resources) == 1 && held.Resource == resources[0])
		what := name
		if !exact {
			what = fmt.Sprintf("%s (%s is claimed)", name, ops.DisplayResource(held.Resource))
		}
		switch {
		case held.AlreadyHeld && exact:
			// The lease is this server's own: an agent that lost its token
			// gets it back rather than waiting out its own lease.
			token, err := ops.SetToken(resources, held.HeldBy, held.Fence)
			if err != nil {
				return nil, out, fmt.Errorf("you already hold %s (fence %d) under an earlier claim, but its token cannot be rebuilt: %s", what, held.Fence, stripPrefix(err))
			}
			out.Claimed = true
			out.Token = token.String()
			out.Message = fmt.Sprintf("you already hold %s (fence %d) under an earlier claim; use its token, renew it to keep it", what, held.Fence)
		case held.AlreadyHeld:
			// An earlier claim of this server's covers part of this one:
			// its fence is not this claim's, so no token is made up.
			out.Message = fmt.Sprintf("you already hold %s under an earlier claim (fence %d), which overlaps this one: write with that claim's token, or release it and claim again", ops.DisplayResource(held.Resource), held.Fence)
		default:
			out.Message = fmt.Sprintf("%s is held by %q (fence %d) for %s more at most; claim again then, or with wait", what, held.HeldBy, held.Fence, ops.Dur(held.RetryAfter))
		}
		s.log.Info("claim: held", "resource", name, "held", held.Resource, "by", held.HeldBy, "fence", held.Fence)
		return nil, out, nil
	}
	if err != nil {
		if errors.Is(err, fence.ErrInvalidInput) {
			return nil, out, errors.New(stripPrefix(err))
		}
		return nil, out, dbError("claim "+name, err)
	}
	g := l.Grant()
	token := l.Token()
	out = claimOutput{
		Claimed: true, Resource: ops.TokenName(token), Paths: paths.Names(), Token: token.String(), Holder: g.Holder, Fence: g.Fence,
		ExpiresAt: ops.Stamp(g.CoordinatorExpiresAt.Time()), ExpiresInMS: ms(g.TTL),
		Message: fmt.Sprintf("claimed %s with fence %d for %s; write with the token, renew before it expires, release when done", name, g.Fence, ops.Dur(g.TTL)),
	}
	s.log.Info("claim", "resource", ops.TokenName(token), "fence", g.Fence, "ttl", g.TTL)
	return nil, out, nil
}

// claimResources checks a claim's input: a resource, or paths, each given
// its one identity under the root. paths is nil for a resource.
func (s *Server) claimResources(in claimInput) (resources []string, paths pathid.Claim, err error) {
	switch {
	case in.Resource != "" && in.Paths != nil:
		return nil, nil, errors.New("give resource or paths, not both: a claim is of a lock name or of files")
	case in.Paths != nil:
		if s.files == nil {
			return nil, nil, errors.New("claims of paths need a server started with --root DIR: paths are relative to it")
		}
		if paths, err = s.files.ids.ResolveAll(in.Paths); err != nil {
			return nil, nil, err
		}
		for _, p := range paths {
			resources = append(resources, ops.PathResource(p.Name))
		}
		return resources, paths, nil
	case in.Resource == "":
		return nil, nil, errors.New("missing resource: give resource (a lock name) or paths (files under the root)")
	}
	if err := fence.ValidateResource(in.Resource); err != nil {
		return nil, nil, fmt.Errorf("bad resource %q: %s", in.Resource, stripPrefix(err))
	}
	if _, ok := ops.PathOf(in.Resource); ok {
		// A path resource named by hand would skip the path's identity.
		return nil, nil, fmt.Errorf("bad resource %q: names starting %q are path claims: give paths instead", in.Resource, ops.PathPrefix)
	}
	return []string{in.Resource}, nil, nil
}

func (s *Server) assert(ctx context.Context, _ *mcp.CallToolRequest, in tokenInput) (*mcp.CallToolResult, assertOutput, error) {
	var out assertOutput
	token, err := parseTokenArg(in.Token)
	if err != nil {
		return nil, out, err
	}
	st, floor, why, err := ops.CheckToken(ctx, s.b, token)
	if err != nil {
		return nil, out, dbError("assert", err)
	}
	out = assertOutput{
		Current: why == "", Resource: ops.TokenName(token), Fence: token.Fence,
		Holder: st.Holder, HolderFence: st.Fence, Floor: floor, Message: why,
	}
	if out.Current {
		out.ExpiresInMS = ms(st.Remaining)
		out.Message = fmt.Sprintf("current for now (advisory: it may be stale by the time you act; write through write), %s left", ops.Dur(st.Remaining))
	}
	return nil, out, nil
}

func (s *Server) renew(ctx context.Context, _ *mcp.CallToolRequest, in renewInput) (*mcp.CallToolResult, renewOutput, error) {
	var out renewOutput
	token, err := s.ownToken(in.Token)
	if err != nil {
		return nil, out, err
	}
	ttl, err := parseDurationArg("ttl", in.TTL, s.cfg.TTL)
	if err != nil {
		return nil, out, err
	}
	if ttl < ops.MinTTL {
		return nil, out, fmt.Errorf("bad ttl %q: must be at least %v", in.TTL, ops.MinTTL)
	}
	res, err := ops.RenewToken(ctx, s.b, token, ttl)
	if errors.Is(err, lease.ErrUnknownResource) {
		return nil, out, fmt.Errorf("unknown resource: %s was never leased; claim it first", ops.TokenName(token))
	}
	if err != nil {
		if errors.Is(err, fence.ErrInvalidInput) {
			return nil, out, errors.New(stripPrefix(err))
		}
		return nil, out, dbError("renew", err)
	}
	out = renewOutput{Resource: ops.TokenName(token), Fence: token.Fence}
	if !res.OK {
		out.Expired, out.Successor, out.SuccessorFence = true, res.HeldBy, res.Fence
		now := "it is free"
		if res.HeldBy != "" {
			now = fmt.Sprintf("it is held by %q with fence %d", res.HeldBy, res.Fence)
		}
		out.Message = fmt.Sprintf("expired: your lease on %s (fence %d) was lost (expired, released or superseded) and %s; claim it again before writing", ops.TokenName(token), token.Fence, now)
		s.log.Info("renew: expired", "resource", ops.TokenName(token), "fence", token.Fence, "successor", res.HeldBy)
		return nil, out, nil
	}
	out.Renewed = true
	out.ExpiresAt = ops.Stamp(res.Grant.CoordinatorExpiresAt.Time())
	out.ExpiresInMS = ms(res.Grant.TTL)
	out.Message = fmt.Sprintf("renewed %s (fence %d) for %s", ops.TokenName(token), token.Fence, ops.Dur(res.Grant.TTL))
	s.log.Info("renew", "resource", ops.TokenName(token), "fence", token.Fence, "ttl", res.Grant.TTL)
	return nil, out, nil
}

func (s *Server) release(ctx context.Context, _ *mcp.CallToolRequest, in tokenInput) (*mcp.CallToolResult, releaseOutput, error) {
	var out releaseOutput
	token, err := s.ownToken(in.Token)
	if err != nil {
		return nil, out, err
	}
	released, err := s.b.Coord.Release(ctx, token)
	if err != nil {
		return nil, out, dbError("release", err)
	}
	out = releaseOutput{Released: released, Resource: ops.TokenName(token), Fence: token.Fence}
	if released {
		out.Message = fmt.Sprintf("released %s (fence %d); it is free", ops.TokenName(token), token.Fence)
	} else {
		out.Message = fmt.Sprintf("nothing changed: %s fence %d for %q is not the current lease (expired, released, superseded or never issued)", ops.TokenName(token), token.Fence, token.Holder)
	}
	s.log.Info("release", "resource", ops.TokenName(token), "fence", token.Fence, "released", released)
	return nil, out, nil
}

func (s *Server) status(ctx context.Context, _ *mcp.CallToolRequest, in statusInput) (*mcp.CallToolResult, ops.StatusReport, error) {
	if in.Resource != "" {
		if err := fence.ValidateResource(in.Resource); err != nil {
			return nil, ops.StatusReport{}, fmt.Errorf("bad resource %q: %s", in.Resource, stripPrefix(err))
		}
	}
	report, err := ops.ReadStatus(ctx, s.b, in.Resource, statusRefusals)
	if err != nil {
		return nil, ops.StatusReport{}, dbError("status", err)
	}
	return nil, report, nil
}

func (s *Server) write(ctx context.Context, _ *mcp.CallToolRequest, in writeInput) (*mcp.CallToolResult, writeOutput, error) {
	var out writeOutput
	token, err := s.ownToken(in.Token)
	if err != nil {
		return nil, out, err
	}
	isFile := in.Path != "" || in.Content != "" || in.Mode != ""
	switch {
	case isFile && in.SQL != nil:
		return nil, out, errors.New("a write is either a file (path, content, mode) or SQL (sql), not both")
	case in.SQL != nil:
		return s.writeSQL(ctx, token, in.SQL)
	case isFile:
		return s.writeFile(ctx, token, in)
	default:
		return nil, out, errors.New("nothing to write: give path and content (a file under the root) or sql (statements)")
	}
}

// checkLeased refuses a write for a resource that was never leased, a
// mistyped name, before anything (a rejection record) is written. Once
// leased a resource stays known, so this read cannot let a write through
// that the gate would not judge.
func (s *Server) checkLeased(ctx context.Context, token fence.Token) error {
	st, err := s.b.Coord.Status(ctx, ops.TokenMembers(token)[0])
	if err != nil {
		return dbError("write", err)
	}
	if st.Fence == 0 {
		return fmt.Errorf("unknown resource: %s was never leased; claim it first, and write with the token claim gives", ops.TokenName(token))
	}
	return nil
}

// refused is write's answer to a token the gate refused: a tool error
// whose structured content is the rejection record.
func (s *Server) refused(out writeOutput, stale *gate.StaleFenceError) (*mcp.CallToolResult, writeOutput, error) {
	r := ops.RejectionOf(stale)
	refusal := ops.RefusalOf(r)
	out.Written, out.Refusal = false, &refusal
	again := r.Resource
	if p, ok := ops.PathOf(r.Resource); ok {
		again = "the path " + p // a file's or directory's, which a newer claim took
	}
	out.Message = fmt.Sprintf("refused, nothing was written: %s. Your lease is gone: claim %s again before writing", ops.RejectionText(r), again)
	s.log.Warn("write refused", "resource", r.Resource, "fence", r.Fence, "floor", r.Floor, "floor_holder", r.FloorHolder, "rejection", r.Seq)
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: out.Message}}}, out, nil
}
