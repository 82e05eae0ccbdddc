package pg

import "testing"

func TestTxControl(t *testing.T) {
	for q, want := range map[string]string{
		`COMMIT`:                                 "COMMIT",
		`commit and chain`:                       "COMMIT",
		`  /* a */ -- b` + "\n" + ` Rollback`:    "ROLLBACK",
		`END`:                                    "END",
		`abort`:                                  "ABORT",
		`BEGIN`:                                  "BEGIN",
		`start transaction`:                      "START",
		`PREPARE  TRANSACTION 'x'`:               "PREPARE TRANSACTION",
		`INSERT INTO t VALUES (1); COMMIT`:       "COMMIT",
		`SELECT ';'; ROLLBACK`:                   "ROLLBACK",
		`SELECT E'\';'; END`:                     "END",
		`SELECT "a;b"; commit`:                   "COMMIT",
		`SELECT $1; COMMIT`:                      "COMMIT",
		`DO $x$ BEGIN NULL; END $x$; ABORT`:      "ABORT",
		`SELECT 1 /* ; */; /* ; */ COMMIT`:       "COMMIT",
		`SELECT 'COMMIT'`:                        "",
		`SELECT 'it''s; COMMIT'`:                 "",
		`SELECT E'\'; COMMIT'`:                   "",
		`SELECT "x;"" COMMIT"`:                   "",
		`DO $$ BEGIN COMMIT; END $$`:             "",
		`DO $f$ BEGIN ROLLBACK; END $f$`:         "",
		`SELECT 1 -- ; COMMIT`:                   "",
		`SELECT 1 /* ; ROLLBACK */`:              "",
		`UPDATE t SET committed = true`:          "",
		`PREPARE p AS SELECT 1`:                  "",
		`SELECT CASE WHEN true THEN 1 END`:       "",
		`SAVEPOINT s`:                            "",
		`COMMITTED`:                              "",
		`INSERT INTO t VALUES (1); SELECT 'END'`: "",
		``:                                       "",
		// Postgres ends a -- comment at \r too, and reads "/*/" as a
		// nested comment's opener, not its closer.
		"UPDATE t SET x = 1 --c\r; COMMIT; UPDATE t SET x = 2":        "COMMIT",
		`SELECT 1 /* x /*/ ' */ */ ; COMMIT; UPDATE t SET x = 2 -- '`: "COMMIT",
		`SELECT 1 /* a /* b */ ; COMMIT; */ ; SELECT 2`:               "",
		`SELECT 1 /* unterminated ; COMMIT`:                           "",
	} {
		if got := TxControl(q); got != want {
			t.Errorf("TxControl(%q) = %q, want %q", q, got, want)
		}
	}
}

func TestVouches(t *testing.T) {
	for q, want := range map[string]bool{
		`UPDATE t SET n = n + 1 WHERE id = $1`:                  true,
		`update t set committed = true`:                         true,
		`  /* a */ -- b` + "\n" + ` SELECT 1`:                   true,
		`INSERT INTO t VALUES ($1, 'it''s; COMMIT')`:            true,
		`WITH x AS (SELECT 1) SELECT * FROM x`:                  true,
		`SELECT $q$; COMMIT$q$`:                                 true,
		`SELECT "a;b"; DELETE FROM t`:                           true,
		`SELECT(1)`:                                             true,
		`VALUES (1)`:                                            true,
		`MERGE INTO t USING s ON true WHEN MATCHED THEN DELETE`: true,
		`SELECT 1; COMMIT`:                                      false,
		`COMMIT`:                                                false,
		`SAVEPOINT s`:                                           false,
		`RELEASE SAVEPOINT s`:                                   false,
		`CALL p()`:                                              false,
		`DO $$ BEGIN NULL; END $$`:                              false,
		`SET LOCAL x = 1`:                                       false,
		`getUser`:                                               false, // a prepared statement's name
		`update_user`:                                           false,
		`SELECT`:                                                false,
		`(SELECT 1)`:                                            false,
		``:                                                      false,
		` ; `:                                                   false,
		`SELECT 'a\''; COMMIT; --'`:                             false, // standard_conforming_strings off
		`SELECT time'a\'; COMMIT; --'`:                          false, // a typed literal, not an E'' string
		`SELECT E'\'; COMMIT'`:                                  false,
		`SELECT 1 AS a$b$; COMMIT; SELECT 1 AS c$b$`:                  false,
		`SELECT 'unterminated`:                                        false,
		`SELECT $x$ unterminated`:                                     false,
		`SELECT 1 /* a /* nested */ ; COMMIT; */`:                     false,
		`SELECT 1 /* unterminated`:                                    false,
		"UPDATE t SET x = 1 --c\r; COMMIT; UPDATE t SET x = 2":        false,
		`SELECT 1 /* x /*/ ' */ */ ; COMMIT; UPDATE t SET x = 2 -- '`: false,
		`SELECT 1 /**/`:                                               true,
		`SELECT 1 /***/`:                                              true,
		"SELECT 1 --c\r\n":                                            true,
		"SELECT 1\x00; COMMIT":                                        false,
	} {
		if got := Vouches(q); got != want {
			t.Errorf("Vouches(%q) = %v, want %v", q, got, want)
		}
		if Vouches(q) && TxControl(q) != "" {
			t.Errorf("Vouches(%q) but TxControl finds %q", q, TxControl(q))
		}
	}
}
