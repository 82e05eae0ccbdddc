// Package fencegatecli is the fencegate command, importable: its commands
// (claim, check, renew, release, run, gate, status, elect, migrate, demo,
// ...) and its MCP server (fencegate mcp). cmd/fencegate's main only calls
// Run; the command's documentation is cmd/fencegate's.
package fencegatecli
