"""The conformance kit's Python runner: every scenario of kit/scenarios.json
on Postgres (psycopg), MariaDB/MySQL (PyMySQL) and SQLite (the standard
library's sqlite3, running docs/SQL.md's statements), each database in a
fresh migrated schema, database or file (kit/cmd/setup), dropped after.

    /usr/bin/python3 kit/python/runner.py [postgres|mysql|sqlite ...]

Exits 1 when a scenario fails or a database cannot be reached: never skips.
"""

import os
import secrets
import sys
import time

import fgkit


def run(dialect):
    failed = 0
    name = fgkit.setup(dialect)
    try:
        conn = fgkit.connect(dialect, name)
        client = fgkit.SQLiteClient(conn) if dialect == "sqlite" else fgkit.Client(dialect, conn)
        run_id = secrets.token_hex(4)
        for sc in fgkit.load()["scenarios"]:
            env = fgkit.Env(f"kit-{run_id}-py-{sc['name']}-")
            bad = None
            for i, st in enumerate(sc["steps"], 1):
                if st["op"] == "sleep":
                    time.sleep(st["ms"] / 1000)  # waiting past a term is the scenario
                    continue
                got = fgkit.run_step(client, env, st)
                problems = env.check(st.get("expect"), got)
                if problems:
                    bad = f"step {i} ({st['op']}):\n\t" + "\n\t".join(problems)
                    break
                env.save(st.get("save"), got)
            print(f"{'FAIL' if bad else 'ok  '} python {dialect} {sc['name']}" + (f"\n\t{bad}" if bad else ""), flush=True)
            failed += bool(bad)
        conn.close()
    finally:
        fgkit.teardown(dialect, name)
    return failed


def main():
    dialects = sys.argv[1:] or ["postgres", "mysql", "sqlite"]
    failed = 0
    for d in dialects:
        try:
            failed += run(d)
        except Exception as e:  # an unreachable database fails the runner
            print(f"FAIL python {d}: {type(e).__name__}: {e}", flush=True)
            failed += 1
    print(f"python: {'FAIL' if failed else 'PASS'} ({failed} failed)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
