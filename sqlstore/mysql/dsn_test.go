package mysql_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/mysqltest"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/mysql"
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

// A session variable that sets the clock is refused before connecting:
// timestamp=1000000000 froze UTC_TIMESTAMP, so a lease granted through it
// was already expired for every other coordinator.
func TestConfigRefusesClock(t *testing.T) {
	for _, q := range []string{"timestamp=1000000000", "%40%40session.timestamp=1", "SESSION%20timestamp=1", "%60TIMESTAMP%60=1", "@@local.timestamp=1"} {
		_, err := mysql.Config("mysql://u:secret@h/app?" + q)
		if !errors.Is(err, sqlstore.ErrInvalidDSN) || !errors.Is(err, sqlstore.ErrUnsafeSettings) {
			t.Errorf("Config(%s) = %v, want ErrInvalidDSN and ErrUnsafeSettings", q, err)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("Config(%s): the error shows the password: %v", q, err)
		}
	}
}

// Session settings fencegate's statements depend on are read back from
// every connection as it opens, however the DSN set them (a parameter's
// value is SQL, so one can carry another assignment): autocommit=0 left the
// refusal's log row uncommitted on a pooled connection, and a later Acquire
// failed with error 1568.
func TestOpenRefusesUnsafeSession(t *testing.T) {
	for _, q := range []string{
		"autocommit=0",
		"autocommit=OFF",
		"completion_type=1",
		"completion_type=%27RELEASE%27",
		"sql_log_bin=0",
		"sql_mode=%27EMPTY_STRING_IS_NULL%27",
		"sql_mode=%27ORACLE%27",
		"sql_select_limit=1",
		"insert_id=5",
		"sql_mode=%27STRICT_TRANS_TABLES%27%2C%20autocommit%3D0",
	} {
		t.Run(q, func(t *testing.T) {
			u := databaseURL(t, nil) + "?" + q
			d, err := mysql.Open(context.Background(), u)
			if err == nil {
				d.Close()
				t.Fatal("opened")
			}
			if !errors.Is(err, sqlstore.ErrUnsafeSettings) {
				t.Fatalf("Open = %v, want ErrUnsafeSettings", err)
			}
		})
	}
}

// The user's other session settings are kept; a clock set by a hidden
// assignment is put back on the server's.
func TestOpenKeepsSession(t *testing.T) {
	u := databaseURL(t, nil) + "?sql_mode=%27ANSI%27&time_zone=%27%2B05%3A00%27&innodb_lock_wait_timeout=3&tx_isolation=%27READ-COMMITTED%27"
	d := openURL(t, u)
	var mode, zone string
	var wait int
	if err := d.DB().QueryRow(`SELECT @@session.sql_mode, @@session.time_zone, @@session.innodb_lock_wait_timeout`).Scan(&mode, &zone, &wait); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(mode, "ANSI") || zone != "+05:00" || wait != 3 {
		t.Errorf("session = %q %q %d", mode, zone, wait)
	}
	// fencegate's SQL means the same under them.
	ctx := context.Background()
	if err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Executor().RejectionInsert(ctx, sqlstore.Rejection{Resource: "r", Fence: 1, Holder: "a", Floor: 2, FloorHolder: "b"}); err != nil {
		t.Fatal(err)
	}
	if rs, err := d.Executor().RejectionList(ctx, &sqlstore.RejectionListParams{}); err != nil || len(rs) != 1 {
		t.Fatalf("RejectionList = %v, %v; want the one refusal", rs, err)
	}

	d = openURL(t, databaseURL(t, nil)+"?sql_mode=%27STRICT_TRANS_TABLES%27%2C%20timestamp%3D1000000000")
	var skew int64
	if err := d.DB().QueryRow(`SELECT ABS(TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(), UTC_TIMESTAMP()))+ABS(TIMESTAMPDIFF(SECOND, NOW(), SYSDATE()))`).Scan(&skew); err != nil {
		t.Fatal(err)
	}
	if skew > 60 {
		t.Fatalf("the session clock is %d s off the server's", skew)
	}
}
