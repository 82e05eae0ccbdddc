// The pause scenario's Node agent (kit/pause.py): one holder, driven by
// JSON lines on stdin, answering JSON lines on stdout, as
// kit/python/agent.py.
//
//   node kit/node/agent.js DIALECT SCHEMA
'use strict';

const readline = require('node:readline');
const { setTimeout: sleep } = require('node:timers/promises');
const kit = require('./fgkit');

const say = (obj) => process.stdout.write(`${JSON.stringify(obj)}\n`);

async function main() {
  const [dialect, schema] = process.argv.slice(2);
  const client = await kit.connect(dialect, schema);
  const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
  for (;;) {
    const { value: line, done } = await lines.next();
    if (done) break;
    const cmd = JSON.parse(line);
    if (cmd.op === 'claim') {
      let got;
      for (;;) {
        got = await client.claim(cmd.resource, cmd.holder, cmd.ttl_ms);
        if (got.status !== 'held') break;
        await sleep(Math.max(Number(got.ttl_ms), 1)); // the database says when the lease frees
      }
      say(got);
    } else if (cmd.op === 'write') {
      const got = await client.write(cmd.resource, cmd.holder, cmd.fence, 'kit_effect', async () => {
        say({ stage: 'inserted' });
        const next = await lines.next();
        if (next.done || next.value.trim() !== 'go') throw new Error('agent: expected go');
      });
      if (got.error) got.logged = (await client.logRefusal(cmd.resource, cmd.holder, cmd.fence)).logged;
      say(got);
    }
  }
  await client.close();
}

main().catch((e) => { console.error(e); process.exit(1); });
