"""The conformance kit's Python half: a client of fencegate's SQL protocol
(docs/SQL.md) on Postgres (psycopg 3) and MariaDB/MySQL (PyMySQL), and the
scenarios' interpreter (the rules of kit/README.md, as the Go runner's).

Run with Debian's interpreter, /usr/bin/python3 (python3-psycopg,
python3-pymysql).
"""

import json
import os
import re
import subprocess
import urllib.parse

import psycopg
import psycopg.adapt
import pymysql
import pymysql.err

KIT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(KIT)
ENV = {"postgres": "FENCEGATE_TEST_DATABASE_URL", "mysql": "FENCEGATE_TEST_MYSQL_URL"}
EXISTING = {"postgres": "FENCEGATE_KIT_SCHEMA_POSTGRES", "mysql": "FENCEGATE_KIT_SCHEMA_MYSQL"}


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
    """A connection in autocommit mode to the schema/database name."""
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
