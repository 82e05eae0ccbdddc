#!/usr/bin/env bash
# The kit against a mutant of the SQL: fencegate_check admits a stale fence
# (one below the floor). Postgres: its refusal is kept only for a fence never
# issued (IF NOT a.admitted AND a.floor IS NULL); MariaDB/MySQL: the same,
# fencegate_refuse called only when there is no floor. Each runner gets a Postgres schema
# and a MariaDB database of its own, migrated, then mutated from the
# migrations' own text. SQLite: docs/SQL.md's FloorHeldVerified, the check's
# first statement, finds the fence "held" whenever the floor is equal or
# higher (WHERE floor >= ?2, whatever the holder and the lease), in a copy of
# docs/SQL.md the Go, bash and Python runners read
# (FENCEGATE_KIT_SQLITE_PROTOCOL). The script passes only when EVERY runner
# FAILS on EVERY database it runs on. kit/run must have installed the
# runners' packages.
#
#   kit/mutant.sh [go bash python node pause]
set -euo pipefail
cd "$(dirname "$0")/.."
: "${FENCEGATE_TEST_DATABASE_URL:?}" "${FENCEGATE_TEST_MYSQL_URL:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/setup" ./kit/cmd/setup
export FENCEGATE_KIT_SETUP="$tmp/setup"

# The mutants, cut from the migrations' own definitions.
awk '/^CREATE FUNCTION fencegate_check\(/,/^\$\$;/' migrations/postgres/00004_fencegate_protocol.sql |
	sed 's/^CREATE FUNCTION/CREATE OR REPLACE FUNCTION/; s/IF NOT a.admitted THEN/IF NOT a.admitted AND a.floor IS NULL THEN/' >"$tmp/pg.sql"
grep -q 'a.floor IS NULL THEN' "$tmp/pg.sql" || { echo "mutant.sh: the Postgres mutant no longer applies" >&2; exit 1; }
{
	echo 'DROP PROCEDURE fencegate_check;'
	echo 'DELIMITER //'
	awk '/^CREATE PROCEDURE fencegate_check\(/,/^END$/' migrations/mysql/00002_fencegate_protocol.sql | sed 's/^\( *\)CALL fencegate_refuse(\(.*\));$/\1IF v_floor IS NULL THEN CALL fencegate_refuse(\2); END IF;/'
	echo '//'
} >"$tmp/my.sql"
grep -q 'IF v_floor IS NULL THEN CALL fencegate_refuse' "$tmp/my.sql" || { echo "mutant.sh: the MySQL mutant no longer applies" >&2; exit 1; }
awk '/^-- FloorHeldVerified$/ { m = 1 }
	m && /^ WHERE resource = \?1 AND floor = \?2 AND holder = \?3$/ { print " WHERE resource = ?1 AND floor >= ?2 AND ?3 IS NOT NULL"; next }
	m && /^   AND EXISTS / { next }
	/^```$/ { m = 0 }
	{ print }' docs/SQL.md >"$tmp/SQL.md"
grep -q '^ WHERE resource = ?1 AND floor >= ?2 AND ?3 IS NOT NULL$' "$tmp/SQL.md" && ! grep -A3 '^-- FloorHeldVerified$' "$tmp/SQL.md" | grep -q EXISTS ||
	{ echo "mutant.sh: the SQLite mutant no longer applies" >&2; exit 1; }
export FENCEGATE_KIT_SQLITE_PROTOCOL="$tmp/SQL.md"
[[ $FENCEGATE_TEST_MYSQL_URL =~ ^mysql://(([^:@/]*)(:([^@/]*))?@)?([^:/]*)(:([0-9]+))? ]]
myargs=(--protocol=tcp -h "${BASH_REMATCH[5]:-127.0.0.1}" -P "${BASH_REMATCH[7]:-3306}" -u "${BASH_REMATCH[2]:-root}")
[ -z "${BASH_REMATCH[4]}" ] || myargs+=("-p${BASH_REMATCH[4]}")

declare -A cmd=(
	[go]="go test -count=1 -v -run TestKit ./kit/"
	[bash]="kit/bash/runner.sh"
	[python]="/usr/bin/python3 kit/python/runner.py"
	[node]="node kit/node/runner.js"
	[pause]="/usr/bin/python3 kit/pause.py"
)
runners=("$@")
[ ${#runners[@]} -gt 0 ] || runners=(go bash python node pause)

mutant_run() { # mutant_run RUNNER: its own mutated schema and database, the runner, the drops
	local r=$1 pgs mys
	pgs=$("$FENCEGATE_KIT_SETUP" postgres) || { echo "setup failed" >"$tmp/$r.log"; return; }
	mys=$("$FENCEGATE_KIT_SETUP" mysql) || { echo "setup failed" >"$tmp/$r.log"; "$FENCEGATE_KIT_SETUP" -drop "$pgs" postgres; return; }
	PGOPTIONS="-c search_path=$pgs" psql "$FENCEGATE_TEST_DATABASE_URL" -X -q -v ON_ERROR_STOP=1 -f "$tmp/pg.sql" &&
		mariadb "${myargs[@]}" "$mys" <"$tmp/my.sql" &&
		FENCEGATE_KIT_SCHEMA_POSTGRES=$pgs FENCEGATE_KIT_SCHEMA_MYSQL=$mys ${cmd[$r]} >"$tmp/$r.log" 2>&1
	echo "exit $?" >>"$tmp/$r.log"
	"$FENCEGATE_KIT_SETUP" -drop "$pgs" postgres
	"$FENCEGATE_KIT_SETUP" -drop "$mys" mysql
}
for r in "${runners[@]}"; do mutant_run "$r" & done
wait
survived=0
for r in "${runners[@]}"; do
	dbs=(postgres mysql)
	case $r in go | bash | python) dbs+=(sqlite) ;; esac # Node has no SQLite client of its own; pause.py runs on the servers
	for d in "${dbs[@]}"; do
		# a failing scenario on d, in the runner's own words
		# (a named scenario: a runner that could not start on d is no kill)
		hits=$(grep -E "^FAIL $r $d [a-z_-]+(:|$)|--- FAIL: TestKit/$d/" "$tmp/$r.log" | sed -E 's/^ *//' | sort -u | tr '\n' ';' || true)
		if [ -n "$hits" ] && ! grep -q '^exit 0$' "$tmp/$r.log"; then
			echo "killed   $r $d: $hits"
		else
			echo "SURVIVED $r $d"
			survived=$((survived + 1))
		fi
	done
done
if [ $survived -gt 0 ]; then
	for r in "${runners[@]}"; do echo "== $r"; cat "$tmp/$r.log"; done
	echo "mutant.sh: the mutant survived $survived runner/database pairs"
	exit 1
fi
echo "mutant.sh: the mutant (a stale fence admitted: fencegate_check on Postgres and MariaDB, FloorHeldVerified on SQLite) fails every runner on every database"
