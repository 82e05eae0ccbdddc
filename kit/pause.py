"""The pause scenario (#40 item 5): two real OS processes in two languages.
The first claims a short term and begins its fenced write; it is stopped
with SIGSTOP; the second is granted once the first's term is over (it asks
the database, which says when the lease frees) and writes; the first is
resumed with SIGCONT, its write is refused (FG001) and rolled back, and
the log names both holders. Both directions (Python first, then Node
first), on Postgres and on MariaDB/MySQL.

    /usr/bin/python3 kit/pause.py [postgres|mysql ...]

Exits 1 on any failure, an unreachable database included.
"""

import json
import os
import secrets
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "python"))
import fgkit  # noqa: E402

KIT = os.path.dirname(os.path.abspath(__file__))
AGENTS = {
    "python": ["/usr/bin/python3", os.path.join(KIT, "python", "agent.py")],
    "node": ["node", os.path.join(KIT, "node", "agent.js")],
}
TERM_MS = 1500


class Agent:
    def __init__(self, lang, dialect, schema):
        self.lang = lang
        self.p = subprocess.Popen(AGENTS[lang] + [dialect, schema], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def send(self, obj):
        self.p.stdin.write((obj if isinstance(obj, str) else json.dumps(obj)) + "\n")
        self.p.stdin.flush()

    def recv(self):
        line = self.p.stdout.readline()
        if not line:
            raise AssertionError(f"the {self.lang} agent ended: {self.p.wait()}")
        return json.loads(line)

    def stop(self):
        os.kill(self.p.pid, signal.SIGSTOP)
        _, status = os.waitpid(self.p.pid, os.WUNTRACED)  # returns once it is stopped
        assert os.WIFSTOPPED(status), f"the {self.lang} agent did not stop"

    def cont(self):
        os.kill(self.p.pid, signal.SIGCONT)

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


def direction(client, dialect, schema, run_id, first, second):
    resource = f"kit-{run_id}-pause-{first}-first"
    ha, hb = f"{first}-agent", f"{second}-agent"
    a = Agent(first, dialect, schema)
    b = Agent(second, dialect, schema)
    try:
        a.send({"op": "claim", "resource": resource, "holder": ha, "ttl_ms": TERM_MS})
        got = a.recv()
        assert got.get("status") == "granted", got
        fa = int(got["fence"])
        a.send({"op": "write", "resource": resource, "holder": ha, "fence": fa})
        assert a.recv() == {"stage": "inserted"}
        a.stop()  # stopped mid-write, before its fence check
        a.send("go")  # waits in the pipe until it resumes
        b.send({"op": "claim", "resource": resource, "holder": hb, "ttl_ms": 60000})
        got = b.recv()  # granted only once the first's term is over
        assert got.get("status") == "granted", got
        fb = int(got["fence"])
        assert fb > fa, (fa, fb)
        b.send({"op": "write", "resource": resource, "holder": hb, "fence": fb})
        assert b.recv() == {"stage": "inserted"}
        b.send("go")
        got = b.recv()
        assert "error" not in got and int(got["floor"]) == fb, got
        a.cont()
        got = a.recv()
        assert got.get("error") == "FG001", got
        d = got.get("detail") or {}
        assert (int(d.get("fence")), d.get("holder"), int(d.get("floor")), d.get("floor_holder")) == (fa, ha, fb, hb), got
        assert got.get("logged") is True or got.get("logged") in (1, "1"), got
        eff = client.effects(resource)
        assert eff == {"count": 1, "holders": [hb]}, eff
        rej = client.rejections(resource)
        last = rej.get("last") or {}
        assert rej["count"] == 1 and (int(last["fence"]), last["holder"], int(last["floor"]), last["floor_holder"]) == (fa, ha, fb, hb), rej
        a.close()
        b.close()
        return f"{first} (fence {fa}) stopped past its term, {second} granted fence {fb} and wrote, {first} resumed: FG001, logged ({ha} {fa} < {hb} {fb})"
    finally:
        for ag in (a, b):
            if ag.p.poll() is None:
                ag.cont()
                ag.p.kill()
                ag.p.wait()


def main():
    dialects = sys.argv[1:] or ["postgres", "mysql"]
    failed = 0
    for dialect in dialects:
        try:
            schema = fgkit.setup(dialect)
        except Exception as e:
            print(f"FAIL pause {dialect}: {e}", flush=True)
            failed += 1
            continue
        try:
            client = fgkit.Client(dialect, fgkit.connect(dialect, schema))
            run_id = secrets.token_hex(4)
            for first, second in (("python", "node"), ("node", "python")):
                try:
                    print(f"ok   pause {dialect} {first}-first: " + direction(client, dialect, schema, run_id, first, second), flush=True)
                except Exception as e:
                    print(f"FAIL pause {dialect} {first}-first: {type(e).__name__}: {e}", flush=True)
                    failed += 1
        finally:
            fgkit.teardown(dialect, schema)
    print(f"pause: {'FAIL' if failed else 'PASS'} ({failed} failed)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
