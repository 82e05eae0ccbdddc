// The conformance kit's Node runner: every scenario of kit/scenarios.json
// on Postgres (pg) and MariaDB/MySQL (mysql2), each database in a fresh
// migrated schema or database (kit/cmd/setup), dropped after.
//
//   node kit/node/runner.js [postgres|mysql ...]
//
// Exits 1 when a scenario fails or a database cannot be reached: never skips.
'use strict';

const crypto = require('node:crypto');
const { setTimeout: sleep } = require('node:timers/promises');
const kit = require('./fgkit');

async function run(dialect) {
  let failed = 0;
  const name = kit.setup(dialect);
  try {
    const client = await kit.connect(dialect, name);
    const runId = crypto.randomBytes(4).toString('hex');
    for (const sc of kit.load().scenarios) {
      const env = new kit.Env(`kit-${runId}-node-${sc.name}-`);
      let bad = null;
      for (const [i, st] of sc.steps.entries()) {
        if (st.op === 'sleep') { await sleep(st.ms); continue; } // waiting past a term is the scenario
        const got = await kit.runStep(client, env, st);
        const problems = env.check(st.expect, got);
        if (problems.length) { bad = `step ${i + 1} (${st.op}):\n\t${problems.join('\n\t')}`; break; }
        env.save(st.save, got);
      }
      console.log(`${bad ? 'FAIL' : 'ok  '} node ${dialect} ${sc.name}${bad ? `\n\t${bad}` : ''}`);
      if (bad) failed++;
    }
    await client.close();
  } finally {
    kit.teardown(dialect, name);
  }
  return failed;
}

async function main() {
  const dialects = process.argv.slice(2).length ? process.argv.slice(2) : ['postgres', 'mysql'];
  let failed = 0;
  for (const d of dialects) {
    try {
      failed += await run(d);
    } catch (e) { // an unreachable database fails the runner
      console.log(`FAIL node ${d}: ${e.stack || e}`);
      failed++;
    }
  }
  console.log(`node: ${failed ? 'FAIL' : 'PASS'} (${failed} failed)`);
  process.exit(failed ? 1 : 0);
}

main();
