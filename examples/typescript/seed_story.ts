// The seed story, in TypeScript, against fencegate's SQL protocol on
// Postgres (docs/SQL.md): two agents, one invoice. A naive expiry check lets
// the stale agent's write land; the gate refuses it, and the log names both.
//
//   examples/run typescript    (from a fresh checkout; see examples/README.md)
//
// The client's half (docs/SQL.md): the deadline is dated from the instant
// the request was SENT, on a monotonic clock (performance.now()), minus a
// skew allowance; renew before half the term; never branch a write on a
// validity check.
import pg from 'pg';
import { setTimeout as sleep } from 'node:timers/promises';
import { performance } from 'node:perf_hooks';

const TERM_MS = 1000;
const SKEW_MS = 20; // allowance for the two clocks' rate difference over one term

class Agent {
  fence = 0;
  sent = 0;
  deadline = 0;
  constructor(readonly name: string, readonly db: pg.Client) {}

  async claim(resource: string): Promise<void> {
    for (;;) {
      const sent = performance.now(); // dated from the sending, not the answer
      const { rows: [r] } = await this.db.query(
        'SELECT status, fence, holder, ttl_ms FROM fencegate_claim($1, $2, $3)', [resource, this.name, TERM_MS]);
      const ttl = Number(r.ttl_ms);
      if (r.status === 'granted') {
        this.fence = Number(r.fence);
        this.sent = sent;
        this.deadline = sent + ttl - SKEW_MS;
        console.log(`  ${this.name}: granted ${resource}, fence ${this.fence}, ${ttl} ms`);
        return;
      }
      console.log(`  ${this.name}: ${resource} is held by ${r.holder} for ${ttl} ms more; waiting`);
      await sleep(ttl); // the database says when it frees
    }
  }

  // Renew before half the term has passed (a long-running holder calls this
  // in its loop); a renewal that answers false means: stop.
  async renewIfDue(resource: string): Promise<void> {
    if (performance.now() < this.sent + TERM_MS / 2) return;
    const sent = performance.now();
    const { rows: [r] } = await this.db.query(
      'SELECT renewed, ttl_ms FROM fencegate_renew($1, $2, $3, $4)', [resource, this.name, this.fence, TERM_MS]);
    if (!r.renewed) throw new Error(`${this.name}: lease lost`);
    this.sent = sent;
    this.deadline = sent + Number(r.ttl_ms) - SKEW_MS;
  }

  // The naive check: true when it is asked, stale a moment later.
  stillMine(): boolean { return performance.now() < this.deadline; }

  async naiveWrite(invoice: string, total: number): Promise<void> {
    await this.db.query('UPDATE invoice SET total = $1, written_by = $2 WHERE id = $3', [total, this.name, invoice]);
  }

  // The write and fencegate_check in one transaction: the database decides.
  async fencedWrite(resource: string, invoice: string, total: number): Promise<string | null> {
    await this.db.query('BEGIN');
    try {
      await this.db.query('UPDATE invoice SET total = $1, written_by = $2 WHERE id = $3', [total, this.name, invoice]);
      await this.db.query('SELECT fencegate_check($1, $2, $3)', [resource, this.name, this.fence]);
      await this.db.query('COMMIT');
      return null;
    } catch (e) {
      await this.db.query('ROLLBACK');
      const err = e as { code?: string; message: string };
      if (err.code !== 'FG001' && err.code !== 'FG002') throw e;
      // After the rollback: the one documented call that records the refusal.
      await this.db.query('SELECT fencegate_log_refusal($1, $2, $3)', [resource, this.name, this.fence]);
      return err.message;
    }
  }
}

async function story(a: Agent, b: Agent, db: pg.Client, gated: boolean): Promise<[string, string]> {
  const resource = `invoice-42-${gated ? 'gated' : 'naive'}-${process.pid}`;
  const invoice = resource;
  await db.query("INSERT INTO invoice (id, total, written_by) VALUES ($1, 0, 'nobody')", [invoice]);
  await a.claim(resource);
  await a.renewIfDue(resource);
  if (!a.stillMine()) throw new Error("the story needs agent-a's lease live here");
  console.log('  agent-a: my lease is valid; writing... (and pauses: a GC, a swap, a SIGSTOP)');
  await b.claim(resource); // agent-a is paused: its term runs out, agent-b is granted
  if (gated) {
    if (await b.fencedWrite(resource, invoice, 200) !== null) throw new Error('agent-b refused');
  } else {
    await b.naiveWrite(invoice, 200);
  }
  console.log('  agent-b: wrote total 200');
  // agent-a wakes up and finishes the write it decided on before its pause
  if (gated) {
    const refused = await a.fencedWrite(resource, invoice, 100);
    console.log(refused ? `  agent-a: refused: ${refused}` : '  agent-a: wrote total 100');
  } else {
    await a.naiveWrite(invoice, 100);
    console.log('  agent-a: wrote total 100');
  }
  const { rows: [r] } = await db.query('SELECT total, written_by FROM invoice WHERE id = $1', [invoice]);
  console.log(`  the invoice: total ${r.total}, written by ${r.written_by}`);
  return [resource, r.written_by];
}

async function main(): Promise<void> {
  const url = process.env.FENCEGATE_DATABASE_URL;
  if (!url) throw new Error('set FENCEGATE_DATABASE_URL (examples/run does)');
  const schema = process.env.FENCEGATE_SCHEMA ?? 'public';
  const conns = [0, 1, 2].map(() => new pg.Client({ connectionString: url, options: `-c search_path=${schema}` }));
  for (const c of conns) await c.connect();
  const [a, b, db] = [new Agent('agent-a', conns[0]), new Agent('agent-b', conns[1]), conns[2]];
  try {
    await db.query('CREATE TABLE IF NOT EXISTS invoice (id text PRIMARY KEY, total int NOT NULL, written_by text NOT NULL)');

    console.log('1. naive: agent-a checks its expiry, then writes');
    let [, by] = await story(a, b, db, false);
    if (by !== 'agent-a') throw new Error('expected the stale write to land in the naive story');
    console.log("   -> agent-a's stale write landed over agent-b's: the invoice is wrong\n");

    console.log("2. gated: the same, with fencegate_check in agent-a's transaction");
    let resource: string;
    [resource, by] = await story(a, b, db, true);
    if (by !== 'agent-b') throw new Error("expected the gate to refuse agent-a's stale write");
    const { rows: [r] } = await db.query(
      'SELECT holder, fence, floor_holder, floor FROM fencegate_rejection WHERE resource = $1 ORDER BY seq DESC LIMIT 1', [resource]);
    if (!r) throw new Error('expected the refusal in fencegate_rejection');
    console.log(`   -> the log: ${r.holder} (fence ${r.fence}) refused, ${r.floor_holder} holds the floor (fence ${r.floor})`);
  } finally {
    for (const c of conns) await c.end();
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
