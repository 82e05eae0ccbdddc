# The bash runner's SQLite client (sourced by kit/bash/runner.sh): the
# statements of docs/SQL.md's SQLite section, read from the doc (the text
# the Go driver is held to; FENCEGATE_KIT_SQLITE_PROTOCOL names another
# copy), run by one sqlite3 shell (a coprocess), each operation in one
# BEGIN IMMEDIATE transaction. Names arrive as hex (kit.jq); they are
# checked here, before BEGIN, and bound as text from hex literals through
# .parameter set, never spliced into a statement.

declare -A Q
sl_load() { # the named statements into Q
	local name text
	while IFS= read -r -d '' name && IFS= read -r -d '' text; do Q[$name]=$text; done < <(awk '
		/^## SQLite$/ { on = 1; next }
		on && /^## / { on = 0 }
		on && /^```sql$/ { inb = 1; first = 1; next }
		on && inb && /^```$/ { inb = 0; if (name != "") printf "%s%c%s%c", name, 0, body, 0; next }
		on && inb && first { first = 0; name = ($0 ~ /^-- [A-Za-z0-9_]+$/) ? substr($0, 4) : ""; body = ""; next }
		on && inb { body = (body == "" ? $0 : body "\n" $0) }' "${FENCEGATE_KIT_SQLITE_PROTOCOL:-$root/docs/SQL.md}")
	[ ${#Q[@]} -gt 0 ]
}

sl_open() { # sl_open FILE: the coprocess, with the settings docs/SQL.md asks for
	coproc SQ { exec sqlite3 -batch -json "$1" 2>&1; }
	exec {sqin}>&"${SQ[1]}" {sqout}<&"${SQ[0]}"
	sq "PRAGMA busy_timeout = 5000; PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;" >/dev/null
}
sl_close() { printf '.quit\n' >&"$sqin"; wait "$SQ_PID"; exec {sqin}>&- {sqout}<&-; }

sq() { # sq SQL: in the session; the rows as one JSON array ([] for none), an error in $tmp/err (status 1)
	printf '%s\n.print __END__\n' "$1" >&"$sqin"
	local l out= bad=
	: >"$tmp/err"
	while IFS= read -r l <&"$sqout"; do
		[ "$l" = __END__ ] && break
		case $l in "Parse error"* | "Runtime error"* | "Error:"*) bad=1 ;; esac
		if [ -n "$bad" ]; then printf '%s\n' "$l" >>"$tmp/err"; else out+=$l; fi
	done
	[ -z "$bad" ] || return 1
	printf '%s\n' "${out:-[]}"
}
sx() { # sx NAME ARG...: the statement NAME with ?1, ?2, … bound (sx_bind)
	local b
	b=$(sx_bind "${@:2}") || return 1
	sq "$b"$'\n'"${Q[$1]};"
}
sx_bind() { # sx_bind ARG...: .parameter lines binding ?1, ?2, …: t:HEX as text, else an integer
	local i=1 v b=".parameter clear"
	for v; do
		case $v in
		t:*) b+=$'\n'".parameter set ?$i \"CAST(x'${v#t:}' AS TEXT)\"" ;;
		*) [[ $v =~ ^-?[0-9]+$ ]] || { echo "sx_bind: $v is not an integer" >"$tmp/err"; return 1; }; b+=$'\n'".parameter set ?$i $v" ;;
		esac
		i=$((i + 1))
	done
	printf '%s' "$b"
}
sl_row() { # sl_row NAME ARG...: the first row's values as a JSON array, or null
	local out
	out=$(sx "$@") || return 1
	jq -c '.[0] // null | if . == null then null else [.[]] end' <<<"$out"
}

sl_text() { printf '%b' "$(sed 's/../\\x&/g' <<<"$1")"; }
sl_name() { # sl_name HEX FIELD [nopath]: docs/SQL.md's rule for a name; the problem on stdout
	local x=$1
	if [ -z "$x" ]; then echo "$2 must not be empty"
	elif [ ${#x} -gt 512 ]; then echo "$2 is longer than 256 bytes"
	elif grep -qE '^(..)*([01].|7f|c2[89].)' <<<"$x"; then echo "$2 contains a control character"
	elif ! sl_text "$x" | iconv -f UTF-8 -t UTF-8 >/dev/null 2>&1; then echo "$2 is not valid UTF-8"
	elif [ "${3:-}" = nopath ] && [[ $x == 706174683a* ]]; then echo "$2 is a path claim"
	else return 0; fi
	return 1
}
sl_args() { # sl_args [nopath]: checks the step's r h f t q (empty: not given) before BEGIN; the problem on stdout
	sl_name "$r" resource "${1:-}" && sl_name "$h" holder || return 1
	if [ -n "$f" ] && ! [ "$f" -gt 0 ] 2>/dev/null; then echo "fence $f is not positive"; return 1; fi
	if [ -n "$t" ] && ! { [ "$t" -gt 0 ] && [ "$t" -le 86400000 ]; } 2>/dev/null; then echo "ttl_ms $t is not in 1..86400000"; return 1; fi
	# docs/SQL.md's Request ids: 1 to 128 bytes of 0x21 to 0x7E
	if [ -n "$q" ] && { [ ${#q} -gt 256 ] || grep -qE '^(..)*([01].|20|7f|[89a-f].)' <<<"$q"; }; then
		echo "request_id is not 1 to 128 bytes of printable ASCII without spaces"
		return 1
	fi
}
sl_refused() { jq -cn --arg m "$1" '{error: "22023", detail: null, message: $m}'; }
sl_failed() { # a statement failed: end the transaction, answer the client error
	local e; e=$(cat "$tmp/err")
	sq "ROLLBACK;" >/dev/null 2>&1
	jq -cn --arg m "$e" '{error: "client", message: $m}'
}

sl_judge() { # sl_judge RHEX: claim steps 1 to 5; sets ans ('' when free) and old (the lease row or null)
	sx ClockTick >/dev/null && old=$(sl_row LeaseGetForUpdate "t:$1") || return 1
	ans=$(jq -cn --argjson l "$old" --arg h "$hs" --arg q "$qs" \
		'if $l != null and $l[6] == 0 and $l[5] > $l[7] and $l[1] == $h and $l[3] == $q
		 then {status: "retried", fence: $l[2], holder: $l[1], ttl_ms: (($l[5] - $l[7]) / 1000 | floor), request_id: $q} else empty end')
	[ -z "$ans" ] || return 0
	local used; used=$(sl_row RequestFence "t:$1" "t:$q") || return 1
	ans=$(jq -cn --argjson l "$old" --argjson used "$used" --arg q "$qs" \
		'if $used != null then {status: "request_expired", fence: null, holder: null, ttl_ms: null, request_id: $q}
		 elif $l != null and $l[6] == 0 and $l[5] > $l[7] then {status: "held", fence: null, holder: $l[1], ttl_ms: (($l[5] - $l[7]) / 1000 | floor), request_id: $q}
		 else empty end')
}
sl_grant() { # sl_grant RHEX FENCE OLD: claim steps 7 to 9; sets ans ('' when a floor from outside is ahead)
	local stmt=LeaseReplace new fl
	[ "$3" = null ] && stmt=LeaseInsert
	sx ClockTick >/dev/null && new=$(sl_row $stmt "t:$1" "t:$h" "$2" "t:$q" "$((t * 1000))") &&
		sx RequestInsert "t:$1" "t:$q" "$2" >/dev/null && fl=$(sl_row FloorHeld "t:$1" "$2" "t:$h") || return 1
	if [ "$fl" = null ]; then fl=$(sl_row FloorRaise "t:$1" "$2" "t:$h") || return 1; fi
	ans=$(jq -cn --argjson n "$new" --argjson fl "$fl" --argjson f "$2" --arg h "$hs" --arg q "$qs" \
		'if $fl[0] != $f then empty else {status: "granted", fence: $f, holder: $h, ttl_ms: (($n[5] - $n[4]) / 1000 | floor), request_id: $q} end')
}
sl_claim() {
	local ans old fence
	sq "BEGIN IMMEDIATE;" >/dev/null && sl_judge "$r" || { sl_failed; return; }
	if [ -n "$ans" ]; then sq "COMMIT;" >/dev/null; echo "$ans"; return; fi
	fence=$(sl_row FenceNext) && fence=$(jq '.[0]' <<<"$fence") && sl_grant "$r" "$fence" "$old" || { sl_failed; return; }
	if [ -z "$ans" ]; then
		sq "ROLLBACK;" >/dev/null
		jq -cn --arg q "$qs" '{status: "floor_ahead", fence: null, holder: null, ttl_ms: null, request_id: $q}'
		return
	fi
	sq "COMMIT;" >/dev/null && echo "$ans"
}
sl_claim_set() { # the members in byte order (hex sorts as the bytes do); the answers in the order given
	local -a given sorted
	local -A got olds
	local m ans old fence retried=0 answered=0 out
	IFS=, read -ra given <<<"$rs"
	[ ${#given[@]} -gt 0 ] || { sl_refused "no resources"; return; }
	for m in "${given[@]}"; do
		[ "$m" = - ] && m=
		out=$(r=$m; sl_args nopath) || { sl_refused "$out"; return; }
		[ -z "${got[x$m]:-}" ] || { sl_refused "a resource is repeated"; return; }
		got[x$m]=1
	done
	got=()
	mapfile -t sorted < <(printf '%s\n' "${given[@]}" | LC_ALL=C sort)
	sq "BEGIN IMMEDIATE;" >/dev/null || { sl_failed; return; }
	for m in "${sorted[@]}"; do
		sl_judge "$m" || { sl_failed; return; }
		olds[$m]=$old
		if [ -n "$ans" ]; then
			got[$m]=$ans
			answered=$((answered + 1))
			[ "$(jq -r .status <<<"$ans")" = retried ] && retried=$((retried + 1))
		fi
	done
	if [ $answered -gt 0 ] && [ $retried -lt ${#given[@]} ]; then
		sq "ROLLBACK;" >/dev/null
		for m in "${given[@]}"; do printf '%s\n' "${got[$m]:-$(jq -cn --arg q "$qs" '{status: "not_taken", fence: null, holder: null, ttl_ms: null, request_id: $q}')}"; done | jq -sc '{rows: .}'
		return
	fi
	if [ $answered -eq 0 ]; then
		fence=$(sl_row FenceNext) && fence=$(jq '.[0]' <<<"$fence") || { sl_failed; return; }
		for m in "${sorted[@]}"; do
			sl_grant "$m" "$fence" "${olds[$m]}" || { sl_failed; return; }
			if [ -z "$ans" ]; then
				sq "ROLLBACK;" >/dev/null
				for m in "${given[@]}"; do jq -cn --arg q "$qs" '{status: "floor_ahead", fence: null, holder: null, ttl_ms: null, request_id: $q}'; done | jq -sc '{rows: .}'
				return
			fi
			got[$m]=$ans
		done
	fi
	sq "COMMIT;" >/dev/null || { sl_failed; return; }
	for m in "${given[@]}"; do printf '%s\n' "${got[$m]}"; done | jq -sc '{rows: .}'
}
sl_renew() {
	local row
	sq "BEGIN IMMEDIATE;" >/dev/null && sx ClockTick >/dev/null && row=$(sl_row LeaseRenew "t:$r" "t:$h" "$f" "$((t * 1000))") &&
		sq "COMMIT;" >/dev/null || { sl_failed; return; }
	jq -cn --argjson l "$row" 'if $l == null then {renewed: false, ttl_ms: null} else {renewed: true, ttl_ms: (($l[5] - $l[7]) / 1000 | floor)} end'
}
sl_release() {
	local n row=null
	sq "BEGIN IMMEDIATE;" >/dev/null && sx ClockTick >/dev/null &&
		n=$(sq "$(sx_bind "t:$r" "t:$h" "$f")"$'\n'"${Q[LeaseRelease]};"$'\n'"SELECT changes() AS n;") || { sl_failed; return; }
	if [ "$(jq '.[0].n' <<<"$n")" != 1 ]; then row=$(sl_row LeaseGet "t:$r") || { sl_failed; return; }; fi # why it freed nothing
	sq "COMMIT;" >/dev/null || { sl_failed; return; }
	jq -cn --argjson l "$row" --argjson n "$n" --arg h "$hs" --argjson f "$f" \
		'if $n[0].n == 1 then {released: true, reason: null}
		 else {released: false, reason: (if $l == null then "never_held"
			elif $l[2] == $f and $l[1] == $h then (if $l[6] != 0 then "already_released" else "expired" end)
			elif $l[2] > $f then "superseded" else "never_held" end)} end'
}
sl_check() { # the check's steps in the open transaction: sets chk {admitted, floor, floor_holder} (floor null: never issued)
	local fl
	fl=$(sl_row FloorHeldVerified "t:$r" "$f" "t:$h") || return 1
	if [ "$fl" != null ]; then # admitted: the fence is the floor already
		chk=$(jq -cn --argjson fl "$fl" '{admitted: true, floor: $fl[0], floor_holder: $fl[1]}')
		return
	fi
	fl=$(sl_row FloorRaiseVerified "t:$r" "$f" "t:$h") || return 1
	if [ "$fl" != null ]; then
		chk=$(jq -cn --argjson fl "$fl" --argjson f "$f" '{admitted: ($fl[0] == $f), floor: $fl[0], floor_holder: $fl[1]}')
		return
	fi
	fl=$(sl_row FloorGet "t:$r") || return 1
	chk=$(jq -cn --argjson fl "$fl" --argjson f "$f" \
		'if $fl != null and $f < $fl[1] then {admitted: false, floor: $fl[1], floor_holder: $fl[2]} else {admitted: false, floor: null, floor_holder: null} end')
}
sl_admit() {
	local chk
	sq "BEGIN IMMEDIATE;" >/dev/null && sl_check && sq "COMMIT;" >/dev/null || { sl_failed; return; }
	echo "$chk"
}
sl_write() {
	local chk
	sq "BEGIN IMMEDIATE;" >/dev/null &&
		sq "$(sx_bind "t:$r" "t:$h" "$f")"$'\n'"INSERT INTO kit_effect (resource, holder, fence) VALUES (?1, ?2, ?3);" >/dev/null &&
		sl_check || { sl_failed; return; }
	if [ "$(jq .admitted <<<"$chk")" = true ]; then
		sq "COMMIT;" >/dev/null || { sl_failed; return; }
		jq -c '{floor}' <<<"$chk"
		return
	fi
	sq "ROLLBACK;" >/dev/null
	jq -c --arg r "$rs_text" --arg h "$hs" --argjson f "$f" \
		'{error: (if .floor != null then "FG001" else "FG002" end), message: "refused",
		  detail: {resource: $r, fence: $f, holder: $h, floor: .floor, floor_holder: .floor_holder}}' <<<"$chk"
}
sl_log_refusal() {
	local fl l
	sq "BEGIN IMMEDIATE;" >/dev/null && fl=$(sl_row FloorGet "t:$r") || { sl_failed; return; }
	local floor holder ni=0
	floor=$(jq '.[1] // 0' <<<"$fl")
	holder=$(jq -r '.[2] // ""' <<<"$fl")
	if [ "$fl" = null ] || [ "$f" -ge "$floor" ]; then
		l=$(sl_row LeaseGet "t:$r") || { sl_failed; return; }
		if [ "$(jq -c --argjson f "$f" --arg h "$hs" '. != null and .[2] == $f and .[1] == $h' <<<"$l")" = true ]; then
			sq "COMMIT;" >/dev/null # the check admits it: no refusal to record
			echo '{"logged":false}'
			return
		fi
		ni=1
	fi
	sx RejectionInsert "t:$r" "$f" "t:$h" "$floor" "t:$(printf '%s' "$holder" | od -An -tx1 -v | tr -d ' \n')" "$ni" >/dev/null &&
		sq "COMMIT;" >/dev/null || { sl_failed; return; }
	echo '{"logged":true}'
}

sl_step() { # sl_step: the step whose arguments prep set (op r h f t q ms rs), on SQLite
	local hs qs rs_text problem
	case $op in
	claim | claim_set)
		[ -n "$q" ] || q=$(tr -d '\n' </proc/sys/kernel/random/uuid | od -An -tx1 -v | tr -d ' \n') ;;
	esac
	case $op in
	claim | renew | release | admit | log_refusal | write)
		local np=
		case $op in claim | admit | write) np=nopath ;; esac
		problem=$(sl_args $np) || { sl_refused "$problem"; return; } ;;
	esac
	hs=$(sl_text "$h")
	qs=$(sl_text "$q")
	rs_text=$(sl_text "$r")
	case $op in
	version) sq "SELECT max(version_id) AS v FROM fencegate_goose_version;" | jq -c '.[0].v | {version: (if . == 1 then 1 else "goose version \(.)" end)}' ;;
	claim) sl_claim ;;
	claim_set) sl_claim_set ;;
	renew) sl_renew ;;
	release) sl_release ;;
	admit) sl_admit ;;
	log_refusal) sl_log_refusal ;;
	write) sl_write ;;
	esac
}
