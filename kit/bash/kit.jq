# The conformance kit's rules (kit/README.md) in jq, for the bash runner.
# $vars: the saved variables; $prefix: the scenario's resource prefix.

def toint: if type == "number" and . == floor then .
  elif type == "string" and test("^-?[0-9]+$") then tonumber
  else null end;

# value substitutes "$var" and "@alias".
def value: if type == "string" and startswith("$") then (.[1:] as $k | if $vars | has($k) then $vars[$k] else "<unset variable \($k)>" end)
  elif type == "string" and startswith("@") then $prefix + .[1:]
  else . end;

# equal: $want (a literal of the scenario) against $got (an answer).
def equal($want; $got): ($want | value) as $w
  | if $w == null or $got == null then $w == null and $got == null
    elif ($w | type) == "boolean" then
      (if ($got | type) == "boolean" then $got == $w
       elif ($got | type) == "string" then (if $w then ["t", "true", "1"] else ["f", "false", "0"] end | index([$got])) != null
       else ($got | toint) as $n | $n != null and (($n != 0) == $w) end)
    elif ($w | toint) != null then ($got | toint) == ($w | toint)
    else ($got | type) == "string" and $got == $w end;

def match($path; $want; $got):
  if ($want | type) == "object" then
    if ($want | keys) == ["one_of"] then
      (if any($want.one_of[]; . as $o | equal($o; $got)) then [] else ["\($path): got \($got | tojson), want one of \($want.one_of | tojson)"] end)
    elif ($want | length) > 0 and all($want | keys[]; IN("gt", "ge", "lt", "le", "ne")) then
      [ $want | to_entries[] | .key as $op | .value as $x | ($x | value) as $v
        | if $op == "ne" then (if equal($x; $got) then "\($path): got \($got | tojson), want not \($v | tojson)" else empty end)
          else ($got | toint) as $a | ($v | toint) as $b
            | if $a != null and $b != null and ({gt: ($a > $b), ge: ($a >= $b), lt: ($a < $b), le: ($a <= $b)}[$op]) then empty
              else "\($path): got \($got | tojson), want \($op) \($v | tojson)" end
          end ]
    elif ($got | type) != "object" then ["\($path): got \($got | tojson), want an object"]
    else [ $want | to_entries[] | . as $e | match("\($path).\($e.key)"; $e.value; $got[$e.key])[] ] end
  elif ($want | type) == "array" then
    if ($got | type) != "array" or ($got | length) != ($want | length) then ["\($path): got \($got | tojson), want \($want | length) elements like \($want | tojson)"]
    else [ range(0; $want | length) as $i | match("\($path).\($i)"; $want[$i]; $got[$i])[] ] end
  elif equal($want; $got) then []
  else ["\($path): got \($got | tojson), want \($want | value | tojson)"] end;

# check: the problems of answer $got against the step's expect.
def check($expect; $got):
  [ ($expect // {}) | to_entries | sort_by(.key)[] | . as $e
    | if ($got | has($e.key)) then match($e.key; $e.value; $got[$e.key])[]
      else "\($e.key): missing, want \($e.value | tojson) (answer \($got | tojson))" end ]
  + (if (($expect // {}) | has("error") | not) and ($got | has("error")) then ["error: got \($got.error) (\($got.message)), want none"] else [] end);

# save: the variables after the step.
def save($save; $got): $vars + (($save // {}) | with_entries(.value |= (split(".") | map(if test("^[0-9]+$") then tonumber else . end)) as $p | $got | getpath($p)));

# hex: a name argument's bytes, in hex (names in the scenarios are ASCII;
# {"raw": kind} is the bad names).
def hexbytes: explode | map(. as $c | "0123456789abcdef" | .[($c / 16 | floor):($c / 16 | floor) + 1] + .[($c % 16):($c % 16) + 1]) | join("");
def name($resource): if type == "object" then
    {empty: "", long: ("78" * 257), huge: ("78" * 5000), invalid_utf8: "6b69742dfffe2d626164"}[.raw]
  elif $resource then ($prefix + .) | hexbytes
  else hexbytes end;
def int: value | toint;

# lit: a hex name as a SQL literal: Postgres decodes it as UTF-8 (refusing
# invalid bytes itself, 22021), MariaDB passes the bytes; SQLite's runner
# (kit/bash/sqlite.sh) checks the hex and binds it as text itself.
def lit($dialect): if $dialect == "postgres" then "convert_from('\\x\(.)'::bytea, 'UTF8')" elif $dialect == "sqlite" then . else "X'\(.)'" end;

# prep: a step's arguments as shell assignments (op, r, h, f, t, q, rs).
def prep($dialect):
  {op: .op,
   r: (if has("resource") then .resource | name(true) | lit($dialect) else "" end),
   h: (if has("holder") then .holder | name(false) | lit($dialect) else "" end),
   f: (if has("fence") then .fence | int | tostring else "" end),
   t: (if has("ttl_ms") then .ttl_ms | int | tostring else "" end),
   q: (if .request_id then .request_id | hexbytes | lit($dialect) elif $dialect == "sqlite" then "" else "NULL" end),
   ms: (.ms // 0 | . / 1000 | tostring),
   rs: (if has("resources") then
          (if $dialect == "sqlite" then [.resources[] | name(true) | if . == "" then "-" else . end] | join(",")
           elif $dialect == "postgres" then "ARRAY[\([.resources[] | name(true) | lit($dialect)] | join(", "))]::text[]"
           else "'\([.resources[] | if type == "object" then "" else $prefix + . end] | tojson)'" end)
        else "" end)}
  | to_entries | map("\(.key)=\(.value | @sh)") | join("\n");

# after: the variables after the step (first line), then its problems.
def after($st; $got): (save($st.save; $got) | tojson), check($st.expect; $got)[];
