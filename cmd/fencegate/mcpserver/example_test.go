package mcpserver_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fencegate/fencegate/cmd/fencegate/mcpserver"
)

// A server on a SQLite file, and an agent's client claiming a lock through
// it over in-memory transports (fencegate mcp serves on stdin and stdout).
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "mcpserver-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	srv, err := mcpserver.New(ctx, mcpserver.Config{DSN: filepath.Join(dir, "fencegate.db"), Holder: "agent-a"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	st, ct := mcp.NewInMemoryTransports()
	served := make(chan error, 1)
	go func() { served <- srv.Run(ctx, st) }()

	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "claim", Arguments: map[string]any{"resource": "deploy-slot"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	out := res.StructuredContent.(map[string]any)
	fmt.Println("claimed:", out["claimed"], "holder:", out["holder"], "fence:", out["fence"])
	cs.Close()
	fmt.Println("served:", <-served)
	// Output:
	// claimed: true holder: agent-a fence: 1
	// served: <nil>
}
