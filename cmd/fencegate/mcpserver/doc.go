// Package mcpserver is fencegate's Model Context Protocol server, the one
// `fencegate mcp` runs: fencegate's protocol as tools for coding agents
// (claim, assert/check, renew, release, write, status), over any MCP
// transport, stdio for the command.
//
// There is no daemon: each agent runs its own server, and servers contend
// only through the database, like the command's processes. Every claim is
// for one holder (Config.Holder); renew, release and write take only that
// holder's tokens. A file write lands only while the write's transaction
// holds the file's floor row after the gate admitted the token, and SQL
// (Config.AllowSQL) runs confined in the fenced transaction. The command's
// help (fencegate help mcp) and docs/PATHS.md say what each tool does.
package mcpserver
