package mcpserver

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencegate/fencegate/cmd/fencegate/internal/ops"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore/sqlopen"
)

// MaxClaimWait bounds claim's wait, so a tool call cannot hang an agent for
// longer than a person would wait for it.
const MaxClaimWait = 5 * time.Minute

// DefaultMaxFileBytes is the largest content of one file write when
// Config.MaxFileBytes is 0 (fencegate mcp's --max-file-bytes default).
const DefaultMaxFileBytes = 1 << 20

const mcpInstructions = `fencegate: leases with fences, and writes the database refuses once your lease has passed to someone else.
1. claim the files you will change (paths: ["notes.txt", "src/"], relative to the root; a trailing / claims a directory), or a lock by name (resource: "deploy-slot") for SQL, and keep its token.
2. Make every change through write with that token: the change lands only if the lease is still yours, even if you stalled past its ttl. A token writes only the files its claim covers; a lock name's token writes no files.
3. renew before the ttl runs out if the work is long; release when done.
claim answering claimed=false is normal: someone else holds the lock; wait, or claim with wait.
assert (also named check) is advisory: never decide to write on its answer, just call write.`

// Config is a server's configuration (fencegate mcp's flags). DSN is
// required; every other zero field has the default its comment names.
type Config struct {
	// DSN is the database: a postgres:// or mysql:// URL, a SQLite file
	// path or file: URI (resolved by sqlopen.Resolve, so a relative path
	// names the file from the working directory at New). The server
	// migrates it on start.
	DSN string
	// Holder is who every claim is for; "" for DefaultHolder().
	Holder string
	// Root is the directory file writes are confined to; "" for none (no
	// file writes).
	Root string
	// AllowSQL turns on write's SQL kind.
	AllowSQL bool
	// TTL is the lease term claim asks for and renew extends to when the
	// call names none; 0 for ops' default, 30s. At least 100ms.
	TTL time.Duration
	// MaxFileBytes is the largest content a file write takes; 0 for
	// DefaultMaxFileBytes.
	MaxFileBytes int64
	// Log receives the server's log (text, one line a record); nil
	// discards it.
	Log io.Writer
	// MeterProvider and TracerProvider receive the gate's and the leases'
	// telemetry; nil for OpenTelemetry's global providers.
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider

	// beforeRename, when set (by tests), runs after a file write's temp
	// file is synced and before it is renamed into place, with the
	// request's context.
	beforeRename func(ctx context.Context)
}

// Run serves cfg's tools on t until the client hangs up, then closes the
// server: the server of fencegate mcp, on its stdin and stdout.
func Run(ctx context.Context, cfg Config, t mcp.Transport) error {
	srv, err := New(ctx, cfg)
	if err != nil {
		return err
	}
	defer srv.Close()
	return srv.Run(ctx, t)
}

// Run serves the tools on t until the client hangs up, which is no error.
// A Server serves one client at a time.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	s.log.Info("serving", "root", s.cfg.Root, "allow_sql", s.cfg.AllowSQL, "ttl", s.cfg.TTL)
	err := s.server.Run(ctx, t)
	if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
		return nil // the client hung up
	}
	return err
}

// DefaultHolder names this server process: host-pid plus a random part,
// so that a restarted server, even under a reused pid, is a new holder.
// Each call names a new holder.
func DefaultHolder() string {
	return ops.HostPID() + "-" + strings.ToLower(crand.Text()[:8])
}

// Server is fencegate's MCP server: its tools on one database, for one
// holder. New makes one; it is safe for the concurrent tool calls of its
// client.
type Server struct {
	cfg    Config
	b      *ops.Backend
	files  *fileArea // nil without Root
	log    *slog.Logger
	server *mcp.Server
}

// New checks cfg, opens and migrates the database, opens the root and
// registers the tools. Bad configuration is an error that opens nothing.
// Close the Server when done.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Holder == "" {
		cfg.Holder = DefaultHolder()
	}
	if cfg.TTL == 0 {
		cfg.TTL = ops.DefaultTTL
	}
	if cfg.MaxFileBytes == 0 {
		cfg.MaxFileBytes = DefaultMaxFileBytes
	}
	if err := fence.ValidateHolder(cfg.Holder); err != nil {
		return nil, fmt.Errorf("mcpserver: holder: %s", stripPrefix(err))
	}
	if cfg.TTL < ops.MinTTL {
		return nil, fmt.Errorf("mcpserver: ttl must be at least %v, got %v", ops.MinTTL, cfg.TTL)
	}
	if cfg.MaxFileBytes < 0 {
		return nil, fmt.Errorf("mcpserver: max file bytes must be positive, got %d", cfg.MaxFileBytes)
	}
	if cfg.DSN == "" {
		return nil, errors.New("mcpserver: no DSN: name the database")
	}
	dsn, err := sqlopen.Resolve(cfg.DSN)
	if err != nil {
		return nil, err
	}
	w := cfg.Log
	if w == nil {
		w = io.Discard
	}
	log := slog.New(slog.NewTextHandler(w, nil)).With("holder", cfg.Holder)
	b, err := ops.Open(ctx, dsn, true, cfg.MeterProvider, cfg.TracerProvider)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, b: b, log: log}
	if cfg.Root != "" {
		if s.files, err = openFileArea(cfg.Root, b.DSN, cfg.MaxFileBytes); err != nil {
			b.Close()
			return nil, err
		}
	}
	s.server = mcp.NewServer(&mcp.Implementation{Name: "fencegate", Title: "fencegate: fenced leases and writes", Version: strings.TrimPrefix(ops.Version(), "fencegate ")},
		&mcp.ServerOptions{Instructions: mcpInstructions, Logger: log})
	s.addTools()
	return s, nil
}

// Close closes the database and the root.
func (s *Server) Close() error {
	var err error
	if s.files != nil {
		err = s.files.Close()
	}
	return errors.Join(err, s.b.Close())
}

// parseTokenArg reads a token argument.
func parseTokenArg(text string) (fence.Token, error) {
	if strings.TrimSpace(text) == "" {
		return fence.Token{}, errors.New("missing token: pass the token claim returned, such as fg1:7:deploy-slot:agent-a")
	}
	token, err := fence.Parse(strings.TrimSpace(text))
	if err != nil {
		return fence.Token{}, fmt.Errorf("bad token %q: %s; pass the token claim returned, unchanged", text, stripPrefix(err))
	}
	return token, nil
}

// ownToken reads a token argument for a tool that acts on the lease:
// only this server's own. Tokens are not secrets (status shows holders and
// fences), so without this an agent could act, by mistake or not, on a
// lease another agent holds.
func (s *Server) ownToken(text string) (fence.Token, error) {
	token, err := parseTokenArg(text)
	if err != nil {
		return fence.Token{}, err
	}
	if token.Holder != s.cfg.Holder {
		return fence.Token{}, fmt.Errorf("the token is %q's, and this server is %q: use a token that claim gave you here", token.Holder, s.cfg.Holder)
	}
	return token, nil
}

// parseDurationArg reads an optional duration argument: def when empty.
func parseDurationArg(name, text string, def time.Duration) (time.Duration, error) {
	if text == "" {
		return def, nil
	}
	d, err := time.ParseDuration(text)
	if err != nil {
		return 0, fmt.Errorf("bad %s %q: want a duration such as 30s, 1m30s or 500ms", name, text)
	}
	return d, nil
}

// dbError describes a database failure for the agent.
func dbError(what string, err error) error {
	if errors.Is(err, lease.ErrBusy) {
		return fmt.Errorf("%s: busy, the lock is in use by another transaction (a write in flight, a concurrent claim); nothing changed: try again, or claim with wait: %w", what, err)
	}
	return fmt.Errorf("%s failed, nothing changed: %w", what, err)
}

// stripPrefix is err's message without fencegate's "fencegate: ".
func stripPrefix(err error) string { return strings.TrimPrefix(err.Error(), "fencegate: ") }

// ms converts a duration to whole milliseconds for outputs.
func ms(d time.Duration) int64 { return d.Milliseconds() }
