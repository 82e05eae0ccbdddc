#!/usr/bin/env bash
# The conformance kit's bash runner: every scenario of kit/scenarios.json on
# Postgres (psql), MariaDB/MySQL (the mariadb client) and SQLite (the
# sqlite3 shell, running docs/SQL.md's statements: kit/bash/sqlite.sh),
# each database in a fresh migrated schema, database or file
# (kit/cmd/setup), dropped after. jq reads the scenarios and checks the
# answers (kit/bash/kit.jq).
#
#   kit/bash/runner.sh [postgres|mysql|sqlite ...]
#
# Exits 1 when a scenario fails or a database cannot be reached: never skips.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
kit="$(dirname "$here")"
root="$(dirname "$kit")"
scenarios="$kit/scenarios.json"
# shellcheck source=sqlite.sh
. "$here/sqlite.sh"

setup() { # setup [-drop NAME] DIALECT
	if [ -n "${FENCEGATE_KIT_SETUP:-}" ]; then "$FENCEGATE_KIT_SETUP" "$@"; else go -C "$root" run ./kit/cmd/setup "$@"; fi
}

# --- the database calls: each prints the answer as one JSON object.
pg() { # pg SQL: in the run's one psql session (a coprocess); JSON rows on stdout, an error in $tmp/err (status 1)
	printf '%s;\n\\echo __END__\n' "$1" >&"$pgin"
	local l bad=
	: >"$tmp/err"
	while IFS= read -r l <&"$pgout"; do
		[ "$l" = __END__ ] && break
		case $l in ERROR:*) bad=1 ;; esac
		if [ -n "$bad" ]; then printf '%s\n' "$l" >>"$tmp/err"; else printf '%s\n' "$l"; fi
	done
	[ -z "$bad" ]
}
my() { # my SQL: one mariadb session in the run's database; TSV with a header
	mariadb "${myargs[@]}" "$db" --batch --raw -e "$1" 2>"$tmp/err"
}
# tsv2json: the mariadb client's TSV (a header line, NULL for null) as a JSON array of objects.
tsv2json() {
	jq -R -s 'split("\n") | map(select(length > 0) | split("\t")) | if length == 0 then [] else
		.[0] as $h | .[1:] | map([$h, .] | transpose | map({(.[0] | ascii_downcase): (if .[1] == "NULL" then null else .[1] end)}) | add) end'
}
# failed: the answer of a statement that failed: its SQLSTATE and the refusal's detail.
failed() {
	local code detail
	if [ "$dialect" = postgres ]; then
		code=$(sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\): .*/\1/p' "$tmp/err" | head -n1)
		detail=$(sed -n 's/^DETAIL:  //p' "$tmp/err" | head -n1)
	else
		code=$(sed -n 's/^ERROR [0-9]* (\([0-9A-Z]\{5\}\)).*/\1/p' "$tmp/err" | head -n1)
		detail=$(sed -n 's/^ERROR [0-9]* ([0-9A-Z]\{5\}) at line [0-9]*: [^{]*//p' "$tmp/err" | head -n1)
	fi
	if [ -z "$code" ]; then
		echo "client error: $(cat "$tmp/err")" >&2
		code="client"
	fi
	jq -cn --arg e "$code" --arg d "$detail" --arg m "$(head -n1 "$tmp/err")" '{error: $e, detail: ($d | fromjson? // null), message: $m}'
}
# call FN SELECTLIST ARGS...: one row of a protocol function, or the error.
rows() { # rows FN SELECTLIST ARGS: every row, as a JSON array
	local fn=$1 sel=$2; shift 2
	local args; args=$(IFS=,; echo "$*")
	if [ "$dialect" = postgres ]; then
		pg "SELECT coalesce(jsonb_agg(x), '[]') FROM (SELECT $sel FROM $fn($args)) x" || { failed; return; }
	else
		local out; out=$(my "CALL $fn($args)") || { failed; return; }
		printf '%s\n' "$out" | tsv2json
	fi
}
one() { # one KEY FN ARGS: the first column of the one row, under KEY
	local key=$1 fn=$2; shift 2
	local args; args=$(IFS=,; echo "$*")
	if [ "$dialect" = postgres ]; then
		pg "SELECT json_build_object('$key', $fn($args))" || failed
	else
		local out; out=$(my "CALL $fn($args)") || { failed; return; }
		printf '%s\n' "$out" | tsv2json | jq -c --arg k "$key" '{($k): (.[0] | to_entries[0].value)}'
	fi
}
first() { # the one row of rows' answer, or the error
	jq -c 'if type == "array" then (if length == 1 then .[0] else {error: "client", message: "\(length) rows, want 1"} end) else . end'
}

step() { # step JSON: run one step, print its answer
	local st=$1 op r h f t q ms rs
	eval "$(jq -r --argjson vars "$vars" --arg prefix "$prefix" --arg dialect "$dialect" -L "$here" 'include "kit"; prep($dialect)' <<<"$st")"
	if [ "$dialect" = sqlite ]; then
		case $op in version | claim | claim_set | renew | release | admit | log_refusal | write) sl_step; return ;; esac
	fi
	case $op in
	version) one version fencegate_protocol_version ;;
	claim) rows fencegate_claim "status, fence, holder, ttl_ms, request_id" "$r" "$h" "$t" "$q" | first ;;
	claim_set) rows fencegate_claim_set "status, fence, holder, ttl_ms, request_id" "$rs" "$h" "$t" "$q" | jq -c 'if type == "array" then {rows: .} else . end' ;;
	renew) rows fencegate_renew "renewed, ttl_ms" "$r" "$h" "$f" "$t" | first ;;
	release) rows fencegate_release "released, reason" "$r" "$h" "$f" | first ;;
	admit) rows fencegate_admit "admitted, floor, floor_holder" "$r" "$h" "$f" | first ;;
	log_refusal) one logged fencegate_log_refusal "$r" "$h" "$f" ;;
	write) # a fenced write: the effect and fencegate_check in one transaction; a refusal ends the session, which rolls back
		if [ "$dialect" = postgres ]; then
			pg "BEGIN; INSERT INTO kit_effect (resource, holder, fence) VALUES ($r, $h, $f); SELECT json_build_object('floor', fencegate_check($r, $h, $f)); COMMIT;" || failed
		else
			local out; out=$(my "START TRANSACTION; INSERT INTO kit_effect (resource, holder, fence) VALUES ($r, $h, $f); CALL fencegate_check($r, $h, $f); COMMIT;") || { failed; return; }
			printf '%s\n' "$out" | tsv2json | jq -c '{floor: (.[0] | to_entries[0].value)}'
		fi ;;
	effects | rejections)
		local rr=$r
		[ "$dialect" = sqlite ] && rr='?1'
		local sql="SELECT holder FROM kit_effect WHERE resource = $rr ORDER BY seq"
		[ "$op" = rejections ] && sql="SELECT resource, fence, holder, floor, floor_holder FROM fencegate_rejection WHERE resource = $rr ORDER BY seq"
		if [ "$dialect" = postgres ]; then
			pg "SELECT coalesce(jsonb_agg(x), '[]') FROM ($sql) x"
		elif [ "$dialect" = sqlite ]; then
			sq "$(sx_bind "t:$r")"$'\n'"$sql;"
		else
			my "$sql" | tsv2json
		fi | if [ "$op" = effects ]; then jq -c '{count: length, holders: map(.holder)}'; else jq -c '{count: length} + (if length > 0 then {last: .[-1]} else {} end)'; fi ;;
	counts)
		local sql="SELECT (SELECT count(*) FROM fencegate_lease) AS lease, (SELECT count(*) FROM fencegate_floor) AS floor, (SELECT count(*) FROM fencegate_request) AS request, (SELECT count(*) FROM fencegate_rejection) AS rejection, (SELECT count(*) FROM kit_effect) AS effect"
		if [ "$dialect" = postgres ]; then pg "SELECT jsonb_agg(x) FROM ($sql) x"; elif [ "$dialect" = sqlite ]; then sq "$sql;"; else my "$sql" | tsv2json; fi |
			jq -c '.[0] | {counts: "lease=\(.lease) floor=\(.floor) request=\(.request) rejection=\(.rejection) effect=\(.effect)"}' ;;
	sleep) sleep "$ms"; echo '{}' ;; # waiting past a term is the scenario
	*) echo "{\"error\":\"client\",\"message\":\"unknown op $op\"}" ;;
	esac
}

run() { # run DIALECT: every scenario; prints one line each; returns the failures
	dialect=$1
	local fails=0 i st got problems
	if [ -n "${FENCEGATE_KIT_SCHEMA_POSTGRES:-}" ] && [ "$dialect" = postgres ]; then db=$FENCEGATE_KIT_SCHEMA_POSTGRES; own=
	elif [ -n "${FENCEGATE_KIT_SCHEMA_MYSQL:-}" ] && [ "$dialect" = mysql ]; then db=$FENCEGATE_KIT_SCHEMA_MYSQL; own=
	elif [ -n "${FENCEGATE_KIT_SCHEMA_SQLITE:-}" ] && [ "$dialect" = sqlite ]; then db=$FENCEGATE_KIT_SCHEMA_SQLITE; own=
	else db=$(setup "$dialect") || { echo "FAIL bash $dialect: cannot make its database"; return 1; }; own=1; fi
	if [ "$dialect" = postgres ]; then
		coproc PSQL { PGOPTIONS="-c search_path=$db" exec psql "$FENCEGATE_TEST_DATABASE_URL" -X -q -At -v VERBOSITY=verbose 2>&1; }
		exec {pgin}>&"${PSQL[1]}" {pgout}<&"${PSQL[0]}" # a coprocess's own descriptors are closed in $(...)
		pg "SELECT 1;" >/dev/null || { echo "FAIL bash postgres: $(cat "$tmp/err")"; return 1; }
	fi
	if [ "$dialect" = mysql ]; then
		[[ ${FENCEGATE_TEST_MYSQL_URL:-} =~ ^mysql://(([^:@/]*)(:([^@/]*))?@)?([^:/]*)(:([0-9]+))? ]] || { echo "FAIL bash mysql: FENCEGATE_TEST_MYSQL_URL is not a mysql:// URL"; return 1; }
		myargs=(--protocol=tcp -h "${BASH_REMATCH[5]:-127.0.0.1}" -P "${BASH_REMATCH[7]:-3306}" -u "${BASH_REMATCH[2]:-root}")
		[ -n "${BASH_REMATCH[4]}" ] && myargs+=("-p${BASH_REMATCH[4]}")
	fi
	if [ "$dialect" = sqlite ]; then
		sl_load || { echo "FAIL bash sqlite: no statements in docs/SQL.md's SQLite section"; return 1; }
		sl_open "$db" || { echo "FAIL bash sqlite: $(cat "$tmp/err")"; return 1; }
	fi
	local run_id; run_id=$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')
	local name steps out
	while IFS=$'\t' read -r name steps; do
		prefix="kit-$run_id-bash-$name-"
		vars='{}'
		problems=
		i=0
		while read -r st; do
			i=$((i + 1))
			got=$(step "$st")
			[ -n "$got" ] || got='{"error":"client","message":"no answer"}'
			out=$(jq -rn --argjson vars "$vars" --arg prefix "$prefix" --argjson st "$st" --argjson got "$got" -L "$here" 'include "kit"; after($st; $got)' 2>&1)
			vars=${out%%$'\n'*}
			[ "$out" = "$vars" ] && continue
			problems="step $i ($(jq -r .op <<<"$st")):"$'\n\t'"${out#*$'\n'}"
			problems=${problems//$'\n'/$'\n\t'}
			break
		done < <(jq -c '.[]' <<<"$steps")
		if [ -n "$problems" ]; then
			printf 'FAIL bash %s %s\n\t%s\n' "$dialect" "$name" "$problems"
			fails=$((fails + 1))
		else
			printf 'ok   bash %s %s\n' "$dialect" "$name"
		fi
	done < <(jq -r '.scenarios[] | [.name, (.steps | tojson)] | @tsv' "$scenarios")
	if [ "$dialect" = postgres ]; then printf '\\q\n' >&"$pgin"; wait "$PSQL_PID"; exec {pgin}>&- {pgout}<&-; fi
	if [ "$dialect" = sqlite ]; then sl_close; fi
	if [ -n "$own" ]; then setup -drop "$db" "$dialect" || fails=$((fails + 1)); fi
	return $fails
}

dialects=("$@")
[ ${#dialects[@]} -gt 0 ] || dialects=(postgres mysql sqlite)
declare -A client=([postgres]=psql [mysql]=mariadb [sqlite]=sqlite3)
for d in "${dialects[@]}"; do
	[ -n "${client[$d]:-}" ] || { echo "FAIL bash: no database $d (postgres, mysql, sqlite)"; exit 1; }
done
for tool in jq "${dialects[@]/#/}"; do
	tool=${client[$tool]:-$tool}
	command -v "$tool" >/dev/null || { echo "FAIL bash: $tool is not installed"; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The databases side by side, each in a subshell with its own scratch
# directory (the clients' coprocesses and $tmp/err are per database); their
# lines are printed in order once all have ended.
for d in "${dialects[@]}"; do
	mkdir "$tmp/$d"
	(
		tmp=$tmp/$d
		set +e
		run "$d" >"$tmp/out" 2>&1
		echo $? >"$tmp/rc"
	) &
done
wait
total=0
for d in "${dialects[@]}"; do
	cat "$tmp/$d/out"
	rc=$(cat "$tmp/$d/rc" 2>/dev/null) || rc=1
	total=$((total + rc))
done
if [ $total -gt 0 ]; then echo "bash: FAIL ($total failed)"; exit 1; fi
echo "bash: PASS (0 failed)"
