"""The pause scenario's Python agent (kit/pause.py): one holder, driven by
JSON lines on stdin, answering JSON lines on stdout.

    /usr/bin/python3 kit/python/agent.py DIALECT SCHEMA

Commands: {"op": "claim", resource, holder, ttl_ms}: claims until granted,
waiting between tries for the time the database says the lease has left;
{"op": "write", resource, holder, fence}: begins the fenced write, inserts
its row, answers {"stage": "inserted"}, then waits for a line "go" before
fencegate_check and COMMIT (the orchestrator stops the process there);
after a refusal it rolls back and calls fencegate_log_refusal.
"""

import json
import sys
import time

import fgkit


def say(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    dialect, schema = sys.argv[1], sys.argv[2]
    client = fgkit.Client(dialect, fgkit.connect(dialect, schema))
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["op"] == "claim":
            while True:
                got = client.claim(cmd["resource"], cmd["holder"], cmd["ttl_ms"])
                if got.get("status") != "held":
                    break
                # the database says when the lease frees; wait that long, then ask again
                time.sleep(max(int(got["ttl_ms"]), 1) / 1000)
            say(got)
        elif cmd["op"] == "write":
            def pause():
                say({"stage": "inserted"})
                if sys.stdin.readline().strip() != "go":
                    raise SystemExit("agent: expected go")
            got = client.write(cmd["resource"], cmd["holder"], cmd["fence"], before_check=pause)
            if "error" in got:
                got["logged"] = client.log_refusal(cmd["resource"], cmd["holder"], cmd["fence"]).get("logged")
            say(got)


if __name__ == "__main__":
    main()
