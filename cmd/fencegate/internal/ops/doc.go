// Package ops is what the fencegate command's CLI and its MCP server both
// act through: the open database (Backend), claims of one resource or a
// set, token checks and renewals, the status report, and the words both
// use to describe them. It holds no flags and prints nothing: the CLI and
// the server each present its answers in their own way.
package ops
