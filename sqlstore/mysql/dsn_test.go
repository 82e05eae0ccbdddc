package mysql_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/mysql"
	"github.com/fencegate/fencegate/sqlstore/mysql/mysqltest"
)

func TestConfig(t *testing.T) {
	cfg, err := mysql.Config("mysql://app:p%40ss%2Fw:rd@db.example/app?timeout=5s&sql_mode=%27ANSI%27")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.User != "app" || cfg.Passwd != "p@ss/w:rd" || cfg.Net != "tcp" || cfg.Addr != "db.example:3306" || cfg.DBName != "app" {
		t.Errorf("config = %+v", cfg)
	}
	if !cfg.ParseTime || !cfg.RejectReadOnly || cfg.ClientFoundRows || cfg.InterpolateParams || cfg.Timeout.Seconds() != 5 {
		t.Errorf("settings = %+v", cfg)
	}
	if cfg.Params["sql_mode"] != "'ANSI'" {
		t.Errorf("session variable: %q", cfg.Params)
	}
	cfg, err = mysql.Config("mysql://[::1]:3307/app?parseTime=false")
	if err != nil || cfg.Addr != "[::1]:3307" || cfg.ParseTime {
		t.Errorf("config = %+v, %v", cfg, err)
	}
}

func TestConfigRejects(t *testing.T) {
	for _, dsn := range []string{
		"", "mysql:app", "mysql:///app", "mysql://h", "mysql://h/", "mysql://h/a/b", "postgres://h/app",
		"mysql://u:secret@h/app?clientFoundRows=true",
		"mysql://u:secret@h/app?interpolateParams=true",
		"mysql://u:secret@h/app?parseTime=maybe",
		"mysql://u:secret@h:notaport/app",
		"mysql://u:secret@h/app?%zz",
	} {
		_, err := mysql.Config(dsn)
		if !errors.Is(err, sqlstore.ErrInvalidDSN) {
			t.Errorf("Config(%q) = %v, want ErrInvalidDSN", dsn, err)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("Config(%q): the error shows the password: %v", dsn, err)
		}
	}
}

func TestOpenHidesPassword(t *testing.T) {
	dsn := strings.Replace(mysqltest.WithDatabase(t, mysqltest.ServerURL(t), "mysql"), "://root@", "://root:hunter2-secret@", 1)
	d, err := mysql.Open(context.Background(), dsn)
	if err == nil {
		d.Close()
		t.Skip("the server accepted a wrong password")
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("error shows the password: %v", err)
	}
	if !strings.Contains(err.Error(), "1045") {
		t.Errorf("error = %v, want the server's access denied", err)
	}
}
