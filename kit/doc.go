// Package kit is the conformance kit of fencegate's SQL protocol
// (docs/SQL.md): the scenarios written once (scenarios.json), run from
// bash (psql, mariadb), Python, Node and Go against Postgres and
// MariaDB/MySQL. Its Go runner is this package's test; kit/README.md says
// how to run all of them (kit/run).
package kit
