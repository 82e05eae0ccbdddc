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
	} {
		if got := TxControl(q); got != want {
			t.Errorf("TxControl(%q) = %q, want %q", q, got, want)
		}
	}
}
