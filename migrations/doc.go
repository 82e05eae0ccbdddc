// Package migrations holds nothing but this doc: each dialect's goose
// migrations are a package below it (postgres, postgresdist, sqlite,
// mysql), the SQL files of its folder, embedded (FS).
//
// # One definition per rule
//
// Each dialect's files create every table, index, sequence, function,
// trigger and procedure exactly once, in its final form, and nothing alters
// or redefines it later: to learn what a database runs, one reads the one
// file that creates it. A test of this package counts the creations per
// name and fails on any made by two files.
//
// Until v0.1.0 the files were a baseline, rewritten in place. From v0.1.0
// on every database records the versions it applied, so migrations are
// append-only: a version is never renumbered, reused or edited. A change is
// a new migration, and a change to a function replaces it whole: the new
// file holds one CREATE OR REPLACE with the function's complete new body
// (its Down, the previous body), never a copy kept under another name
// beside a wrapper, nor copies of functions it does not change. That
// redefinition is the one second creation the test allows, and it names
// the version that replaces the function.
package migrations
