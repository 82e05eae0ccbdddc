"""The seed story, in Python, against fencegate's SQL protocol on Postgres
(docs/SQL.md): two agents, one invoice. A naive expiry check lets the
stale agent's write land; the gate refuses it, and the log names both.

    examples/run python        (from a fresh checkout; see examples/README.md)

The client's half (docs/SQL.md): the deadline is dated from the instant the
request was SENT, on a monotonic clock, minus a skew allowance; renew before
half the term; never branch a write on a validity check.
"""

import os
import sys
import time

import psycopg

TERM_MS = 1000
SKEW_MS = 20  # allowance for the two clocks' rate difference over one term


class Agent:
    def __init__(self, name, conn):
        self.name, self.conn = name, conn
        self.fence = None
        self.deadline = 0.0

    def claim(self, resource):
        while True:
            sent = time.monotonic()  # dated from the sending, not the answer
            row = self.conn.execute("SELECT status, fence, holder, ttl_ms FROM fencegate_claim(%s, %s, %s)",
                                    [resource, self.name, TERM_MS]).fetchone()
            status, fence, holder, ttl_ms = row
            if status == "granted":
                self.fence, self.sent = fence, sent
                self.deadline = sent + (ttl_ms - SKEW_MS) / 1000
                print(f"  {self.name}: granted {resource}, fence {fence}, {ttl_ms} ms")
                return
            print(f"  {self.name}: {resource} is held by {holder} for {ttl_ms} ms more; waiting")
            time.sleep(ttl_ms / 1000)  # the database says when it frees

    def renew_if_due(self, resource):
        """Renew before half the term has passed (a long-running holder calls
        this in its loop); a renewal that answers false means: stop."""
        if time.monotonic() >= self.sent + TERM_MS / 2000:
            sent = time.monotonic()
            renewed, ttl_ms = self.conn.execute("SELECT renewed, ttl_ms FROM fencegate_renew(%s, %s, %s, %s)",
                                                [resource, self.name, self.fence, TERM_MS]).fetchone()
            if not renewed:
                raise SystemExit(f"{self.name}: lease lost")
            self.sent, self.deadline = sent, sent + (ttl_ms - SKEW_MS) / 1000

    def still_mine(self):
        """The naive check: true when it is asked, stale a moment later."""
        return time.monotonic() < self.deadline

    def naive_write(self, invoice, total):
        self.conn.execute("UPDATE invoice SET total = %s, written_by = %s WHERE id = %s", [total, self.name, invoice])

    def fenced_write(self, resource, invoice, total):
        """The write and fencegate_check in one transaction: the database decides."""
        try:
            with self.conn.transaction():
                self.conn.execute("UPDATE invoice SET total = %s, written_by = %s WHERE id = %s", [total, self.name, invoice])
                self.conn.execute("SELECT fencegate_check(%s, %s, %s)", [resource, self.name, self.fence])
            return None
        except psycopg.Error as e:
            if e.diag.sqlstate not in ("FG001", "FG002"):
                raise
            # After the rollback: the one documented call that records the refusal.
            self.conn.execute("SELECT fencegate_log_refusal(%s, %s, %s)", [resource, self.name, self.fence])
            return e


def story(a, b, db, gated):
    resource = f"invoice-42-{'gated' if gated else 'naive'}-{os.getpid()}"
    invoice = resource
    db.execute("INSERT INTO invoice (id, total, written_by) VALUES (%s, 0, 'nobody')", [invoice])
    a.claim(resource)
    a.renew_if_due(resource)
    if not a.still_mine():
        raise SystemExit("the story needs agent-a's lease live here")
    print("  agent-a: my lease is valid; writing... (and pauses: a GC, a swap, a SIGSTOP)")
    b.claim(resource)  # agent-a is paused: its term runs out, agent-b is granted
    if gated:
        assert b.fenced_write(resource, invoice, 200) is None
    else:
        b.naive_write(invoice, 200)
    print("  agent-b: wrote total 200")
    # agent-a wakes up and finishes the write it decided on before its pause
    if gated:
        refused = a.fenced_write(resource, invoice, 100)
        print(f"  agent-a: refused: {refused.diag.message_primary}" if refused else "  agent-a: wrote total 100")
    else:
        a.naive_write(invoice, 100)
        print("  agent-a: wrote total 100")
    total, by = db.execute("SELECT total, written_by FROM invoice WHERE id = %s", [invoice]).fetchone()
    print(f"  the invoice: total {total}, written by {by}")
    return resource, by


def main():
    url = os.environ.get("FENCEGATE_DATABASE_URL") or sys.exit("set FENCEGATE_DATABASE_URL (examples/run does)")
    schema = os.environ.get("FENCEGATE_SCHEMA", "public")
    conns = [psycopg.connect(url, autocommit=True) for _ in range(3)]
    for c in conns:
        c.execute("SELECT set_config('search_path', %s, false)", [schema])
    a, b, db = Agent("agent-a", conns[0]), Agent("agent-b", conns[1]), conns[2]
    db.execute("CREATE TABLE IF NOT EXISTS invoice (id text PRIMARY KEY, total int NOT NULL, written_by text NOT NULL)")

    print("1. naive: agent-a checks its expiry, then writes")
    _, by = story(a, b, db, gated=False)
    if by != "agent-a":
        sys.exit("expected the stale write to land in the naive story")
    print("   -> agent-a's stale write landed over agent-b's: the invoice is wrong\n")

    print("2. gated: the same, with fencegate_check in agent-a's transaction")
    resource, by = story(a, b, db, gated=True)
    if by != "agent-b":
        sys.exit("expected the gate to refuse agent-a's stale write")
    row = db.execute("SELECT holder, fence, floor_holder, floor FROM fencegate_rejection WHERE resource = %s ORDER BY seq DESC LIMIT 1",
                     [resource]).fetchone()
    if not row:
        sys.exit("expected the refusal in fencegate_rejection")
    print(f"   -> the log: {row[0]} (fence {row[1]}) refused, {row[2]} holds the floor (fence {row[3]})")


if __name__ == "__main__":
    main()
