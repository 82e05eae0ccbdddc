"""The conformance kit's Python half: a client of fencegate's SQL protocol
(docs/SQL.md) on Postgres (psycopg 3), MariaDB/MySQL (PyMySQL) and SQLite
(the standard library's sqlite3, running the statements docs/SQL.md gives),
and the scenarios' interpreter (the rules of kit/README.md, as the Go
runner's).

Run with Debian's interpreter, /usr/bin/python3 (python3-psycopg,
python3-pymysql).
"""

import json
import os
import re
import sqlite3
import subprocess
import urllib.parse
import uuid

import psycopg
import psycopg.adapt
import pymysql
import pymysql.err

KIT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(KIT)
ENV = {"postgres": "FENCEGATE_TEST_DATABASE_URL", "mysql": "FENCEGATE_TEST_MYSQL_URL"}
EXISTING = {"postgres": "FENCEGATE_KIT_SCHEMA_POSTGRES", "mysql": "FENCEGATE_KIT_SCHEMA_MYSQL", "sqlite": "FENCEGATE_KIT_SCHEMA_SQLITE"}


# --- PyMySQL drops the SQLSTATE of an error packet; keep it on the error.
_raise = pymysql.err.raise_mysql_exception


def _raise_with_sqlstate(data):
    try:
        _raise(data)
    except pymysql.err.MySQLError as e:
        e.sqlstate = data[4:9].decode("ascii", "replace") if data[3:4] == b"#" else None
        raise


pymysql.err.raise_mysql_exception = _raise_with_sqlstate


class RawText(bytes):
    """Bytes sent to Postgres as text, as they are (invalid UTF-8 included)."""


class _RawTextDumper(psycopg.adapt.Dumper):
    oid = psycopg.adapters.types["text"].oid

    def dump(self, obj):
        return bytes(obj)


# --- making and dropping the schema or database of one run (kit/cmd/setup)
def setup(dialect):
    """Make a fresh migrated schema/database; return its name."""
    if os.environ.get(EXISTING[dialect]):
        return os.environ[EXISTING[dialect]]
    return subprocess.run(_setup_cmd() + [dialect], check=True, stdout=subprocess.PIPE, text=True).stdout.strip()


def teardown(dialect, name):
    if not os.environ.get(EXISTING[dialect]):
        subprocess.run(_setup_cmd() + ["-drop", name, dialect], check=True)


def _setup_cmd():
    exe = os.environ.get("FENCEGATE_KIT_SETUP")
    return [exe] if exe else ["go", "-C", ROOT, "run", "./kit/cmd/setup"]


def connect(dialect, name):
    """A connection in autocommit mode to the schema/database name (SQLite:
    the file; its client begins every transaction itself)."""
    if dialect == "sqlite":
        conn = sqlite3.connect(name, isolation_level=None)
        for pragma in ("busy_timeout = 5000", "journal_mode = WAL", "synchronous = FULL"):
            conn.execute("PRAGMA " + pragma)
        return conn
    url = os.environ.get(ENV[dialect])
    if not url:
        raise SystemExit(f"{ENV[dialect]} is not set: the kit needs a {dialect} server")
    if dialect == "postgres":
        conn = psycopg.connect(url, autocommit=True)
        conn.adapters.register_dumper(RawText, _RawTextDumper)
        conn.execute("SELECT set_config('search_path', %s, false)", [name])
        return conn
    u = urllib.parse.urlparse(url)
    return pymysql.connect(host=u.hostname or "127.0.0.1", port=u.port or 3306,
                           user=urllib.parse.unquote(u.username or "root"),
                           password=urllib.parse.unquote(u.password or ""),
                           database=name, autocommit=True, charset="utf8mb4")


def _norm(v):
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", "replace")
    return v


class Client:
    """fencegate's protocol calls; each returns the answer as a dict, and a
    database error as {"error": SQLSTATE, "detail": ..., "message": ...}."""

    def __init__(self, dialect, conn):
        self.dialect, self.conn, self.mysql = dialect, conn, dialect == "mysql"

    def _arg(self, v):
        if isinstance(v, bytes) and not self.mysql:
            return RawText(v)
        return v

    def _query(self, pg, fn, args, cur=None):
        args = [self._arg(a) for a in args]
        ph = ", ".join(["%s"] * len(args))
        q = f"CALL {fn}({ph})" if self.mysql else f"SELECT {pg} FROM {fn}({ph})"
        own = cur is None
        cur = cur or self.conn.cursor()
        try:
            cur.execute(q, args)
            cols = [d[0].lower() for d in cur.description]
            rows = [dict(zip(cols, map(_norm, r))) for r in cur.fetchall()]
            if self.mysql:
                while cur.nextset():
                    pass
            return rows, cols
        finally:
            if own:
                cur.close()

    def error(self, e):
        if isinstance(e, psycopg.Error) and e.diag.sqlstate:
            detail = None
            try:
                detail = json.loads(e.diag.message_detail or "")
            except ValueError:
                pass
            return {"error": e.diag.sqlstate, "detail": detail, "message": e.diag.message_primary}
        if isinstance(e, pymysql.err.MySQLError) and getattr(e, "sqlstate", None):
            msg = e.args[1] if len(e.args) > 1 else str(e)
            detail = None
            if "{" in msg:
                try:
                    detail = json.loads(msg[msg.index("{"):])
                except ValueError:
                    pass
            return {"error": e.sqlstate, "detail": detail, "message": msg}
        raise e

    def _row(self, pg, fn, args):
        try:
            rows, _ = self._query(pg, fn, args)
        except (psycopg.Error, pymysql.err.MySQLError) as e:
            return self.error(e)
        if len(rows) != 1:
            raise AssertionError(f"{fn} answered {len(rows)} rows, want 1")
        return rows[0]

    def _one(self, fn, args, key, cur=None):
        try:
            rows, cols = self._query(fn, fn, args, cur)
        except (psycopg.Error, pymysql.err.MySQLError) as e:
            return self.error(e)
        if len(rows) != 1:
            raise AssertionError(f"{fn} answered {len(rows)} rows, want 1")
        return {key: rows[0][cols[0]]}

    def version(self):
        return self._one("fencegate_protocol_version", [], "version")

    def claim(self, resource, holder, ttl_ms, request_id=None):
        return self._row("status, fence, holder, ttl_ms, request_id", "fencegate_claim", [resource, holder, ttl_ms, request_id])

    def claim_set(self, resources, holder, ttl_ms, request_id=None):
        arg = json.dumps(resources) if self.mysql else resources
        try:
            rows, _ = self._query("status, fence, holder, ttl_ms, request_id", "fencegate_claim_set", [arg, holder, ttl_ms, request_id])
        except (psycopg.Error, pymysql.err.MySQLError) as e:
            return self.error(e)
        return {"rows": rows}

    def renew(self, resource, holder, fence, ttl_ms):
        return self._row("renewed, ttl_ms", "fencegate_renew", [resource, holder, fence, ttl_ms])

    def release(self, resource, holder, fence):
        return self._row("released, reason", "fencegate_release", [resource, holder, fence])

    def admit(self, resource, holder, fence):
        return self._row("admitted, floor, floor_holder", "fencegate_admit", [resource, holder, fence])

    def log_refusal(self, resource, holder, fence):
        return self._one("fencegate_log_refusal", [resource, holder, fence], "logged")

    def write(self, resource, holder, fence, table="kit_effect", before_check=None):
        """A fenced write: the effect's row and fencegate_check in one
        transaction, then COMMIT; a refusal rolls it all back. before_check,
        when given, is called between the two (the pause scenario stops the
        process there)."""
        ph = "%s, %s, %s"
        args = [self._arg(resource), self._arg(holder), fence]
        try:
            if self.mysql:
                self.conn.begin()
                cur = self.conn.cursor()
            else:
                self.conn.execute("BEGIN")
                cur = self.conn.cursor()
            cur.execute(f"INSERT INTO {table} (resource, holder, fence) VALUES ({ph})", args)
            if before_check:
                before_check()
            got = self._one("fencegate_check", [resource, holder, fence], "floor", cur)
            if "error" in got:
                self.conn.rollback() if self.mysql else self.conn.execute("ROLLBACK")
                return got
            self.conn.commit() if self.mysql else self.conn.execute("COMMIT")
            return got
        except (psycopg.Error, pymysql.err.MySQLError) as e:
            try:
                self.conn.rollback() if self.mysql else self.conn.execute("ROLLBACK")
            except Exception:
                pass
            return self.error(e)

    def select(self, q, args=()):
        with self.conn.cursor() as cur:
            cur.execute(q, [self._arg(a) for a in args])
            cols = [d[0].lower() for d in cur.description]
            return [dict(zip(cols, map(_norm, r))) for r in cur.fetchall()]

    def effects(self, resource):
        rows = self.select("SELECT holder FROM kit_effect WHERE resource = %s ORDER BY seq", [resource])
        return {"count": len(rows), "holders": [r["holder"] for r in rows]}

    def rejections(self, resource):
        rows = self.select("SELECT resource, fence, holder, floor, floor_holder FROM fencegate_rejection WHERE resource = %s ORDER BY seq", [resource])
        got = {"count": len(rows)}
        if rows:
            got["last"] = rows[-1]
        return got

    def counts(self):
        r = self.select("SELECT (SELECT count(*) FROM fencegate_lease) AS lease, (SELECT count(*) FROM fencegate_floor) AS floor, "
                        "(SELECT count(*) FROM fencegate_request) AS request, (SELECT count(*) FROM fencegate_rejection) AS rejection, "
                        "(SELECT count(*) FROM kit_effect) AS effect")[0]
        return {"counts": "lease={lease} floor={floor} request={request} rejection={rejection} effect={effect}".format(**r)}


# --- the scenarios' rules (kit/README.md)
RAW = {"empty": b"", "long": b"x" * 257, "huge": b"x" * 5000, "invalid_utf8": b"kit-\xff\xfe-bad"}
_INT = re.compile(r"^-?[0-9]+$")


def _int(v):
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v == int(v):
        return int(v)
    if isinstance(v, str) and _INT.match(v):
        return int(v)
    return None


class Env:
    def __init__(self, prefix):
        self.prefix, self.vars = prefix, {}

    def name(self, v, resource):
        if isinstance(v, dict) and "raw" in v:
            raw = RAW[v["raw"]]
            try:
                return raw.decode("utf-8")
            except UnicodeDecodeError:
                return raw
        return self.prefix + v if resource else v

    def value(self, v):
        if isinstance(v, str) and v.startswith("$"):
            return self.vars.get(v[1:], f"<unset variable {v[1:]}>")
        if isinstance(v, str) and v.startswith("@"):
            return self.prefix + v[1:]
        return v

    def equal(self, want, got):
        want = self.value(want)
        if want is None or got is None:
            return want is None and got is None
        if isinstance(want, bool):
            if isinstance(got, bool):
                return got == want
            if isinstance(got, str):
                return got in (("t", "true", "1") if want else ("f", "false", "0"))
            n = _int(got)
            return n is not None and (n != 0) == want
        a = _int(want)
        if a is not None:
            return _int(got) == a
        return isinstance(got, str) and got == want

    def match(self, path, want, got):
        if isinstance(want, dict):
            if set(want) == {"one_of"}:
                return [] if any(self.equal(o, got) for o in want["one_of"]) else [f"{path}: got {got!r}, want one of {want['one_of']}"]
            if want and set(want) <= {"gt", "ge", "lt", "le", "ne"}:
                bad = []
                for op, x in want.items():
                    if op == "ne":
                        if self.equal(x, got):
                            bad.append(f"{path}: got {got!r}, want not {self.value(x)!r}")
                        continue
                    a, b = _int(got), _int(self.value(x))
                    ok = a is not None and b is not None and {"gt": a > b, "ge": a >= b, "lt": a < b, "le": a <= b}[op]
                    if not ok:
                        bad.append(f"{path}: got {got!r}, want {op} {self.value(x)!r}")
                return bad
            if not isinstance(got, dict):
                return [f"{path}: got {got!r}, want an object"]
            return [b for k, x in want.items() for b in self.match(f"{path}.{k}", x, got.get(k))]
        if isinstance(want, list):
            if not isinstance(got, list) or len(got) != len(want):
                return [f"{path}: got {got!r}, want {len(want)} elements like {want!r}"]
            return [b for i, x in enumerate(want) for b in self.match(f"{path}.{i}", x, got[i])]
        return [] if self.equal(want, got) else [f"{path}: got {got!r}, want {self.value(want)!r}"]

    def check(self, expect, got):
        bad = []
        for k in sorted(expect or {}):
            if k not in got:
                bad.append(f"{k}: missing, want {expect[k]!r} (answer {got!r})")
            else:
                bad += self.match(k, expect[k], got[k])
        if "error" not in (expect or {}) and "error" in got:
            bad.append(f"error: got {got['error']} ({got.get('message')}), want none")
        return bad

    def save(self, save, got):
        for name, path in (save or {}).items():
            v = got
            for p in path.split("."):
                v = v[int(p)] if isinstance(v, list) else v[p]
            self.vars[name] = v


def run_step(client, env, st):
    op = st["op"]
    r = lambda: env.name(st["resource"], True)
    h = lambda: env.name(st["holder"], False)
    n = lambda k: _int(env.value(st[k]))
    if op == "version":
        return client.version()
    if op == "claim":
        return client.claim(r(), h(), n("ttl_ms"), st.get("request_id"))
    if op == "claim_set":
        return client.claim_set([env.name(x, True) for x in st["resources"]], h(), n("ttl_ms"), st.get("request_id"))
    if op == "renew":
        return client.renew(r(), h(), n("fence"), n("ttl_ms"))
    if op in ("release", "admit", "log_refusal", "write"):
        return getattr(client, op)(r(), h(), n("fence"))
    if op in ("effects", "rejections"):
        return getattr(client, op)(r())
    if op == "counts":
        return client.counts()
    raise AssertionError(f"unknown op {op}")


def load():
    with open(os.path.join(KIT, "scenarios.json"), encoding="utf-8") as f:
        return json.load(f)


# --- SQLite: no stored routines; the protocol is docs/SQL.md's statements.
def sqlite_statements(path=None):
    """The named statements of docs/SQL.md's SQLite section, the one text
    the Go driver runs too (FENCEGATE_KIT_SQLITE_PROTOCOL names another
    copy: kit/mutant.sh's)."""
    path = path or os.environ.get("FENCEGATE_KIT_SQLITE_PROTOCOL") or os.path.join(ROOT, "docs", "SQL.md")
    with open(path, encoding="utf-8") as f:
        doc = f.read()
    section = doc.split("\n## SQLite\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    stmts = dict(re.findall(r"```sql\n-- (\w+)\n(.*?)\n```", section, re.S))
    if not stmts:
        raise SystemExit(f"{path}: no SQLite statements")
    return stmts


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


class Refused(Exception):
    """Bad input, refused before any statement runs (22023)."""


def _check_name(field, v, no_path=False):
    if isinstance(v, bytes):
        raise Refused(f"invalid {field}: not valid UTF-8")
    if not v:
        raise Refused(f"invalid {field}: must not be empty")
    if len(v.encode("utf-8")) > 256:
        raise Refused(f"invalid {field}: longer than 256 bytes")
    if _CONTROL.search(v):
        raise Refused(f"invalid {field}: contains a control character")
    if no_path and v.startswith("path:"):
        raise Refused(f"invalid {field}: a path claim")


def _check_args(resource, holder, fence=None, ttl_ms=None, no_path=False, request_id=None):
    """docs/SQL.md's common rules, which on SQLite the client checks before
    BEGIN: a bad argument runs nothing."""
    _check_name("resource", resource, no_path)
    _check_name("holder", holder)
    if fence is not None and (not isinstance(fence, int) or fence <= 0):
        raise Refused(f"invalid fence: {fence} is not positive")
    if ttl_ms is not None and (not isinstance(ttl_ms, int) or not 0 < ttl_ms <= 86400000):
        raise Refused(f"invalid ttl_ms: {ttl_ms} is not in 1..86400000")
    if request_id is not None:  # docs/SQL.md's Request ids: 1 to 128 bytes of 0x21 to 0x7E
        b = request_id if isinstance(request_id, bytes) else request_id.encode("utf-8")
        if not 0 < len(b) <= 128 or any(c < 0x21 or c > 0x7E for c in b):
            raise Refused("invalid request_id: not 1 to 128 bytes of printable ASCII without spaces")


class SQLiteClient(Client):
    """The protocol's operations on SQLite, each the statements docs/SQL.md
    gives, in its order, in one BEGIN IMMEDIATE transaction."""

    def __init__(self, conn, stmts=None):
        super().__init__("sqlite", conn)
        self.q = stmts or sqlite_statements()

    def _x(self, name, *args):
        return self.conn.execute(self.q[name], args)

    def _tx(self, body, *args):
        """body in one BEGIN IMMEDIATE transaction: COMMIT, or ROLLBACK when
        it raises or answers rollback=True."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            got, rollback = body(*args)
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("ROLLBACK" if rollback else "COMMIT")
        return got

    def _refused(self, e):
        return {"error": "22023", "detail": None, "message": str(e)}

    def version(self):
        # Not a statement of the protocol: the schema's goose version, which
        # docs/SQL.md maps to protocol version 1.
        v = self.conn.execute("SELECT max(version_id) FROM fencegate_goose_version").fetchone()[0]
        return {"version": 1 if v == 1 else f"goose version {v}"}

    def _judge(self, resource, holder, request_id):
        """Claim steps 1 to 5 for one resource: (answer or None, lease row)."""
        self._x("ClockTick")
        row = self._x("LeaseGetForUpdate", resource).fetchone()
        live = row is not None and not row[6] and row[5] > row[7]
        if live and row[1] == holder and row[3] == request_id:
            return {"status": "retried", "fence": row[2], "holder": holder, "ttl_ms": (row[5] - row[7]) // 1000, "request_id": request_id}, row
        if self._x("RequestFence", resource, request_id).fetchone() is not None:
            return {"status": "request_expired", "fence": None, "holder": None, "ttl_ms": None, "request_id": request_id}, row
        if live:
            return {"status": "held", "fence": None, "holder": row[1], "ttl_ms": (row[5] - row[7]) // 1000, "request_id": request_id}, row
        return None, row

    def _grant(self, resource, holder, fence, ttl_ms, request_id, row):
        """Claim steps 7 to 9 for one resource: the answer, or None when a
        floor from outside is ahead of the fence."""
        self._x("ClockTick")
        new = self._x("LeaseReplace" if row is not None else "LeaseInsert", resource, holder, fence, request_id, ttl_ms * 1000).fetchone()
        self._x("RequestInsert", resource, request_id, fence)
        fl = self._x("FloorHeld", resource, fence, holder).fetchone() or self._x("FloorRaise", resource, fence, holder).fetchone()
        if fl[0] != fence:
            return None
        return {"status": "granted", "fence": fence, "holder": holder, "ttl_ms": (new[5] - new[7]) // 1000, "request_id": request_id}

    def claim(self, resource, holder, ttl_ms, request_id=None):
        request_id = request_id or str(uuid.uuid4())
        try:
            _check_args(resource, holder, ttl_ms=ttl_ms, no_path=True, request_id=request_id)
        except Refused as e:
            return self._refused(e)

        def body():
            got, row = self._judge(resource, holder, request_id)
            if got is not None:
                return got, False
            fence = self._x("FenceNext").fetchone()[0]
            got = self._grant(resource, holder, fence, ttl_ms, request_id, row)
            if got is None:
                return {"status": "floor_ahead", "fence": None, "holder": None, "ttl_ms": None, "request_id": request_id}, True
            return got, False
        return self._tx(body)

    def claim_set(self, resources, holder, ttl_ms, request_id=None):
        request_id = request_id or str(uuid.uuid4())
        try:
            if not resources or len(set(resources)) != len(resources):
                raise Refused("invalid resources: empty or repeated")
            for r in resources:
                _check_args(r, holder, ttl_ms=ttl_ms, no_path=True, request_id=request_id)
        except Refused as e:
            return self._refused(e)

        def body():
            order = sorted(resources, key=lambda r: r.encode("utf-8"))
            judged = {r: self._judge(r, holder, request_id) for r in order}
            answers = {r: a for r, (a, _) in judged.items() if a is not None}
            if answers and all(a["status"] == "retried" for a in answers.values()) and len(answers) == len(order):
                return {"rows": [answers[r] for r in resources]}, False
            if answers:
                none = {"status": "not_taken", "fence": None, "holder": None, "ttl_ms": None, "request_id": request_id}
                return {"rows": [answers.get(r, none) for r in resources]}, True
            fence = self._x("FenceNext").fetchone()[0]
            got = {}
            for r in order:
                got[r] = self._grant(r, holder, fence, ttl_ms, request_id, judged[r][1])
                if got[r] is None:
                    ahead = {"status": "floor_ahead", "fence": None, "holder": None, "ttl_ms": None, "request_id": request_id}
                    return {"rows": [ahead for _ in resources]}, True
            return {"rows": [got[r] for r in resources]}, False
        return self._tx(body)

    def renew(self, resource, holder, fence, ttl_ms):
        try:
            _check_args(resource, holder, fence=fence, ttl_ms=ttl_ms)
        except Refused as e:
            return self._refused(e)

        def body():
            self._x("ClockTick")
            row = self._x("LeaseRenew", resource, holder, fence, ttl_ms * 1000).fetchone()
            if row is None:
                return {"renewed": False, "ttl_ms": None}, False
            return {"renewed": True, "ttl_ms": (row[5] - row[7]) // 1000}, False
        return self._tx(body)

    def release(self, resource, holder, fence):
        try:
            _check_args(resource, holder, fence=fence)
        except Refused as e:
            return self._refused(e)

        def body():
            self._x("ClockTick")
            if self._x("LeaseRelease", resource, holder, fence).rowcount == 1:
                return {"released": True, "reason": None}, False
            row = self._x("LeaseGet", resource).fetchone()  # why it freed nothing
            if row is None:
                reason = "never_held"
            elif row[2] == fence and row[1] == holder:
                reason = "already_released" if row[6] else "expired"
            else:
                reason = "superseded" if row[2] > fence else "never_held"
            return {"released": False, "reason": reason}, False
        return self._tx(body)

    def _check(self, resource, holder, fence):
        """The check's steps, in the caller's transaction: (admitted, floor,
        floor_holder); a refusal's floor is None when the fence was never
        issued (FG002's case) rather than below the floor (FG001's)."""
        fl = self._x("FloorHeldVerified", resource, fence, holder).fetchone()
        if fl is not None:  # admitted: the fence is the floor already
            return True, fl[0], fl[1]
        fl = self._x("FloorRaiseVerified", resource, fence, holder).fetchone()
        if fl is not None:
            return fl[0] == fence, fl[0], fl[1]
        fl = self._x("FloorGet", resource).fetchone()
        if fl is not None and fence < fl[1]:
            return False, fl[1], fl[2]
        return False, None, None

    def admit(self, resource, holder, fence):
        try:
            _check_args(resource, holder, fence=fence, no_path=True)
        except Refused as e:
            return self._refused(e)

        def body():
            ok, floor, fh = self._check(resource, holder, fence)
            return {"admitted": ok, "floor": floor, "floor_holder": fh}, False
        return self._tx(body)

    def write(self, resource, holder, fence, table="kit_effect", before_check=None):
        """A fenced write: the effect's row and the check in one BEGIN
        IMMEDIATE transaction, then COMMIT; a refusal rolls it all back."""
        try:
            _check_args(resource, holder, fence=fence, no_path=True)
        except Refused as e:
            return self._refused(e)

        def body():
            self.conn.execute(f"INSERT INTO {table} (resource, holder, fence) VALUES (?1, ?2, ?3)", (resource, holder, fence))
            if before_check:
                before_check()
            ok, floor, fh = self._check(resource, holder, fence)
            if ok:
                return {"floor": floor}, False
            detail = {"resource": resource, "fence": fence, "holder": holder, "floor": floor, "floor_holder": fh}
            return {"error": "FG001" if floor is not None else "FG002", "detail": detail, "message": "refused"}, True
        return self._tx(body)

    def log_refusal(self, resource, holder, fence):
        try:
            _check_args(resource, holder, fence=fence)
        except Refused as e:
            return self._refused(e)

        def body():
            fl = self._x("FloorGet", resource).fetchone()
            floor, fh = (fl[1], fl[2]) if fl else (0, "")
            if fl is not None and fence < floor:
                not_issued = 0
            else:
                row = self._x("LeaseGet", resource).fetchone()
                if row is not None and row[2] == fence and row[1] == holder:
                    return {"logged": False}, False  # the check admits it: no refusal to record
                not_issued = 1
            self._x("RejectionInsert", resource, fence, holder, floor, fh, not_issued).fetchone()
            return {"logged": True}, False
        return self._tx(body)

    def select(self, q, args=()):
        cur = self.conn.execute(q.replace("%s", "?"), list(args))
        cols = [d[0].lower() for d in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]
