// Package sqlopen opens a fencegate driver from a DSN, choosing the dialect
// by its form. It imports every database/sql driver fencegate has, so a
// program that links it links SQLite, pgx and go-sql-driver/mysql; a
// library user who knows the database calls that driver's Open
// (sqlite.Open, pgsql.Open, mysql.Open) or New instead and links only it.
// The fencegate command and its MCP server open their databases here.
//
// # DSNs
//
// One judgement, shared by Open, Resolve, SQLiteFile and sqlite.DSN, reads
// a DSN's form:
//
//	postgres://app:pw@db.internal/app        Postgres
//	postgresql://db.internal/app             Postgres
//	host=db.internal user=app dbname=app     Postgres (libpq's keyword/value settings, as pgx parses them)
//	mysql://root@db.internal:3306/app        MySQL or MariaDB
//	file:/var/lib/app/fences.db?_pragma=…    SQLite
//	/var/lib/app/fences.db, ./fences.db      SQLite
//
// A SQLite path is a path: a DSN shaped like another database's is refused
// with sqlstore.ErrInvalidDSN, never opened as a SQLite file of that name,
// which would create the file and hand out fences that no holder on the
// real database sees. Refused are go-sql-driver/mysql's own form
// (user:pw@tcp(host:3306)/db; the error names the mysql:// URL it means),
// key=value settings with no Postgres keyword among them (host, hostaddr,
// port, dbname, user, password, passfile, service, sslmode), and any other
// scheme, with "://" or without ("redis://…", "sqlite:x.db"). A SQLite file
// whose name looks like one of those is written ./NAME or file:NAME. No
// error carries a password.
package sqlopen
