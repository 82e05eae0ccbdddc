// Package fencegatecli is the fencegate command, importable: its commands
// (claim, check, renew, release, run, gate, status, elect, migrate, demo,
// mcp, ...). fencegate mcp serves package mcpserver; what the commands and
// the server share is cmd/fencegate/internal/ops. cmd/fencegate's main only
// calls Run; the command's documentation is cmd/fencegate's.
package fencegatecli
