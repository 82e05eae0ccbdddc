// Package fence holds what every layer of fencegate shares: the token a
// holder presents (Token, its text forms fg1 and fg2), the names of
// resources and of path resources, and their validation. It imports nothing
// of the project, so that the gate, the lease coordinator and the drivers
// can all import it.
//
// # Tokens
//
// A Token names the resource it writes, its holder and its fence, a number
// that only grows from one generation of ownership to the next. The lease
// coordinator issues tokens (lease.Lease.Token); NewToken builds one for a
// lock granted outside the database. Token.String and Parse convert it to
// and from a text form safe for environment variables and shell arguments:
//
//	fg1:<fence>:<resource>:<holder>
//	fg2:<fence>:<holder>:<member>:<member>...
//
// # Sets of resources
//
// A claim may name several resources at once, granted together under one
// fence (NewSetToken, lease.Client.BeginAcquireSet). Its token names them
// all (Token.Members); the gate judges every member. A set holds at most
// MaxSetMembers names, no name twice, and no path together with a
// directory above it (ValidateSet).
//
// # Paths
//
// A resource can name a path under a root the caller chose (PathResource):
// "path:src/a.go" a file, "path:src/" a directory and everything below it.
// Two claims conflict when a path of one equals, contains or is contained in
// a path of the other (Overlaps); siblings never conflict. A plain resource
// name is only ever equal to itself, whatever slashes it holds. How a write
// to a file is judged against claims of its directories is package gate's
// rule (its doc, under Paths).
//
// # Invalid input
//
// Every error for input refused before the database is touched (a bad
// name, a non-positive fence, malformed token text) is an
// *InvalidInputError and matches ErrInvalidInput.
package fence
