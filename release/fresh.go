package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
)

// freshDatabase makes an empty Postgres schema or MySQL database for one
// program, so that what it creates meets nothing of an earlier run's or a
// test's, and returns the URL that selects it and a function that drops it.
func (c *checker) freshDatabase(ctx context.Context, db, base, name string) (string, func(), error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, fmt.Errorf("the %s test URL does not parse", db)
	}
	schema := fmt.Sprintf("fgrelease_%d_%s", os.Getpid(), name)
	var create, drop []string
	switch db {
	case "postgres":
		create = []string{"psql", base, "-v", "ON_ERROR_STOP=1", "-qc", "CREATE SCHEMA " + schema}
		drop = []string{"psql", base, "-qc", "DROP SCHEMA IF EXISTS " + schema + " CASCADE"}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
	case "mysql":
		client := []string{"mariadb", "-h", u.Hostname(), "-P", portOr(u, "3306"), "-u", u.User.Username()}
		if pw, ok := u.User.Password(); ok {
			client = append(client, "-p"+pw)
		}
		create = append(client, "-e", "CREATE DATABASE "+schema)
		drop = append(client, "-e", "DROP DATABASE IF EXISTS "+schema)
		u.Path = "/" + schema
	default:
		return "", nil, fmt.Errorf("no fresh %s database here", db)
	}
	if _, err := output(ctx, "", nil, create[0], create[1:]...); err != nil {
		return "", nil, err
	}
	return u.String(), func() { _, _ = output(context.Background(), "", nil, drop[0], drop[1:]...) }, nil
}

func portOr(u *url.URL, def string) string {
	if p := u.Port(); p != "" {
		return p
	}
	return def
}

// mysqlDSN turns a mysql:// URL into go-sql-driver's DSN, the form goose's
// command takes.
func mysqlDSN(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s@tcp(%s:%s)%s", u.User.String(), u.Hostname(), portOr(u, "3306"), u.Path), nil
}
