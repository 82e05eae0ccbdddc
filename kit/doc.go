// Package kit is the conformance kit of fencegate's SQL protocol
// (docs/SQL.md): the scenarios written once (scenarios.json), run from
// bash (psql, mariadb), Python, Node and Go against Postgres and
// MariaDB/MySQL, and from bash (sqlite3), Python and Go against SQLite,
// running the statements docs/SQL.md gives. Its Go runner is this package's test; kit/README.md says
// how to run all of them (kit/run).
package kit
