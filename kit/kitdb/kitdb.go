// Package kitdb makes and drops the throwaway Postgres schemas, MariaDB
// or MySQL databases and SQLite files the conformance kit's runners run in:
// each one fresh, migrated with the library's own migrations (the
// protocol's functions and procedures among them; SQLite's baseline, the
// tables its documented statements run on), plus kit_effect, the table the
// scenarios' writes insert into.
package kitdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/fencegate/fencegate/internal/leftover"
	"github.com/fencegate/fencegate/sqlstore"
	fgmysql "github.com/fencegate/fencegate/sqlstore/mysql"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
	"github.com/fencegate/fencegate/sqlstore/sqlite"
)

// The environment variables naming the servers, as the library's tests
// read them.
const (
	EnvPostgres = "FENCEGATE_TEST_DATABASE_URL"
	EnvMySQL    = "FENCEGATE_TEST_MYSQL_URL"
)

// Prefix starts every name Create makes (leftover.Name's shape), so that a
// killed run's leftovers are recognisable.
const Prefix = "fgkit"

// Dialects are the databases the kit runs on. A SQLite "database" is a
// fresh file in the temporary directory; its name is the file's path.
var Dialects = []string{"postgres", "mysql", "sqlite"}

// ExtraEnv names, per dialect, a file of SQL that Create runs after the
// migrations (statements split on lines "-- kit:split"): for developing the
// kit against definitions not yet in the migrations, and for kit/mutant.sh.
var ExtraEnv = map[string]string{"postgres": "FENCEGATE_KIT_EXTRA_POSTGRES", "mysql": "FENCEGATE_KIT_EXTRA_MYSQL"}

var validName = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

// BaseURL returns the server URL of dialect from the environment, or an
// error: a runner that cannot reach its database fails.
func BaseURL(dialect string) (string, error) {
	env := map[string]string{"postgres": EnvPostgres, "mysql": EnvMySQL}[dialect]
	if env == "" {
		return "", fmt.Errorf("kitdb: unknown dialect %q (want postgres or mysql)", dialect)
	}
	u := os.Getenv(env)
	if u == "" {
		return "", fmt.Errorf("kitdb: %s is not set: the kit needs a %s server", env, dialect)
	}
	return u, nil
}

// Create makes a fresh schema (Postgres), database (MySQL/MariaDB) or
// file (SQLite), migrates it, creates kit_effect in it and returns its name
// (SQLite: the file's path).
func Create(ctx context.Context, dialect string) (string, error) {
	if dialect == "sqlite" {
		return createSQLite(ctx)
	}
	base, err := BaseURL(dialect)
	if err != nil {
		return "", err
	}
	name := leftover.Name(Prefix, time.Now())
	db, err := open(ctx, dialect, base, "")
	if err != nil {
		return "", err
	}
	defer db.Close()
	if dialect == "postgres" {
		_, err = db.ExecContext(ctx, "CREATE SCHEMA "+name)
	} else {
		_, err = db.ExecContext(ctx, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
	}
	if err != nil {
		return "", fmt.Errorf("kitdb: create %s: %w", name, err)
	}
	if err := fill(ctx, dialect, base, name); err != nil {
		// Cleanup outlives ctx's cancellation, not its own bound.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dropTimeout)
		defer cancel()
		if derr := Drop(dctx, dialect, name); derr != nil {
			return "", errors.Join(err, fmt.Errorf("kitdb: %s may be left behind: %w", name, derr))
		}
		return "", err
	}
	return name, nil
}

// fill migrates name and creates kit_effect.
func fill(ctx context.Context, dialect, base, name string) error {
	db, err := open(ctx, dialect, base, name)
	if err != nil {
		return err
	}
	defer db.Close()
	m := pgxv5.Migrations()
	effect := `CREATE TABLE kit_effect (seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, resource text NOT NULL, holder text NOT NULL, fence bigint NOT NULL)`
	if dialect == "mysql" {
		m = fgmysql.Migrations()
		effect = `CREATE TABLE kit_effect (seq BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, resource VARBINARY(4096) NOT NULL, holder VARBINARY(4096) NOT NULL, fence BIGINT NOT NULL) ENGINE = InnoDB`
	}
	if err := sqlstore.MigrateUp(ctx, db, m); err != nil {
		return fmt.Errorf("kitdb: migrate %s: %w", name, err)
	}
	if _, err := db.ExecContext(ctx, effect); err != nil {
		return fmt.Errorf("kitdb: create kit_effect in %s: %w", name, err)
	}
	if file := os.Getenv(ExtraEnv[dialect]); file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("kitdb: %s: %w", ExtraEnv[dialect], err)
		}
		for i, stmt := range strings.Split(string(b), "\n-- kit:split\n") {
			if strings.TrimSpace(stmt) == "" {
				continue
			}
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("kitdb: %s, statement %d: %w", file, i+1, err)
			}
		}
	}
	return nil
}

// dropTimeout bounds a Drop that runs after its caller's context ended.
const dropTimeout = time.Minute

// Drop drops the schema, database or file Create made.
func Drop(ctx context.Context, dialect, name string) error {
	if dialect == "sqlite" {
		return dropSQLite(name)
	}
	if !validName.MatchString(name) || !strings.HasPrefix(name, Prefix+"_") {
		return fmt.Errorf("kitdb: %q is not a name Create makes", name)
	}
	base, err := BaseURL(dialect)
	if err != nil {
		return err
	}
	db, err := open(ctx, dialect, base, "")
	if err != nil {
		return err
	}
	defer db.Close()
	if dialect == "postgres" {
		_, err = db.ExecContext(ctx, "DROP SCHEMA "+name+" CASCADE")
	} else {
		_, err = db.ExecContext(ctx, "DROP DATABASE "+name)
	}
	if err != nil {
		return fmt.Errorf("kitdb: drop %s: %w", name, err)
	}
	return nil
}

// Open returns a pool on the schema, database or SQLite file name.
func Open(ctx context.Context, dialect, name string) (*sql.DB, error) {
	if dialect == "sqlite" {
		return openSQLite(ctx, name)
	}
	base, err := BaseURL(dialect)
	if err != nil {
		return nil, err
	}
	return open(ctx, dialect, base, name)
}

// open connects to base, in name when it is not empty, and pings.
func open(ctx context.Context, dialect, base, name string) (*sql.DB, error) {
	var db *sql.DB
	switch dialect {
	case "postgres":
		cfg, err := pgx.ParseConfig(base)
		if err != nil {
			return nil, fmt.Errorf("kitdb: %s: %w", EnvPostgres, err)
		}
		if name != "" {
			cfg.RuntimeParams["search_path"] = name
		}
		db = stdlib.OpenDB(*cfg)
	case "mysql":
		cfg, err := mysqlConfig(base)
		if err != nil {
			return nil, err
		}
		cfg.DBName = name
		conn, err := gomysql.NewConnector(cfg)
		if err != nil {
			return nil, fmt.Errorf("kitdb: %s: %w", EnvMySQL, err)
		}
		db = sql.OpenDB(conn)
	default:
		return nil, fmt.Errorf("kitdb: unknown dialect %q", dialect)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("kitdb: cannot reach the %s server: %w", dialect, err)
	}
	return db, nil
}

// mysqlConfig reads a mysql:// URL (the database part may be empty).
func mysqlConfig(base string) (*gomysql.Config, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "mysql" {
		return nil, fmt.Errorf("kitdb: %s is not a mysql:// URL", EnvMySQL)
	}
	withDB := *u
	withDB.Path = "/kit"
	cfg, err := fgmysql.Config(withDB.String())
	if err != nil {
		return nil, fmt.Errorf("kitdb: %s: %w", EnvMySQL, err)
	}
	cfg.MultiStatements = true
	return cfg, nil
}

// ExistingEnv names, per dialect, a schema or database a runner uses
// instead of making its own (it then neither migrates nor drops it).
var ExistingEnv = map[string]string{"postgres": "FENCEGATE_KIT_SCHEMA_POSTGRES", "mysql": "FENCEGATE_KIT_SCHEMA_MYSQL", "sqlite": "FENCEGATE_KIT_SCHEMA_SQLITE"}

// ExistingName returns ExistingEnv's value for dialect, or "".
func ExistingName(dialect string) string { return os.Getenv(ExistingEnv[dialect]) }

// sqliteEffect is kit_effect on SQLite.
const sqliteEffect = `CREATE TABLE kit_effect (seq INTEGER PRIMARY KEY AUTOINCREMENT, resource TEXT NOT NULL, holder TEXT NOT NULL, fence INTEGER NOT NULL)`

// createSQLite makes a fresh file in the temporary directory, migrated by
// the SQLite baseline, with kit_effect.
func createSQLite(ctx context.Context) (string, error) {
	path := filepath.Join(os.TempDir(), leftover.Name(Prefix, time.Now())+".db")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("kitdb: create %s: %w", path, err)
	}
	f.Close()
	err = func() error {
		db, err := openSQLite(ctx, path)
		if err != nil {
			return err
		}
		defer db.Close()
		if err := sqlstore.MigrateUp(ctx, db, sqlite.Migrations()); err != nil {
			return fmt.Errorf("kitdb: migrate %s: %w", path, err)
		}
		if _, err := db.ExecContext(ctx, sqliteEffect); err != nil {
			return fmt.Errorf("kitdb: create kit_effect in %s: %w", path, err)
		}
		return nil
	}()
	if err != nil {
		return "", errors.Join(err, dropSQLite(path))
	}
	return path, nil
}

// dropSQLite removes a file createSQLite made, and its WAL and shared
// memory files.
func dropSQLite(path string) error {
	base := strings.TrimSuffix(filepath.Base(path), ".db")
	if filepath.Dir(path) != filepath.Clean(os.TempDir()) || !strings.HasSuffix(path, ".db") ||
		!validName.MatchString(base) || !strings.HasPrefix(base, Prefix+"_") {
		return fmt.Errorf("kitdb: %q is not a file Create makes", path)
	}
	var errs []error
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("kitdb: drop %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// openSQLite opens the file path through the library's connector (WAL,
// synchronous FULL, a busy timeout, BEGIN IMMEDIATE), and pings.
func openSQLite(ctx context.Context, path string) (*sql.DB, error) {
	c, err := sqlite.NewConnector(path)
	if err != nil {
		return nil, fmt.Errorf("kitdb: %w", err)
	}
	db := sql.OpenDB(c)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("kitdb: cannot open %s: %w", path, err)
	}
	return db, nil
}
