// The conformance kit's Node half: a client of fencegate's SQL protocol
// (docs/SQL.md) on Postgres (pg) and MariaDB/MySQL (mysql2), and the
// scenarios' interpreter (the rules of kit/README.md, as the Go runner's).
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const pg = require('pg');
const mysql = require('mysql2/promise');

const KIT = path.dirname(__dirname);
const ROOT = path.dirname(KIT);
const ENV = { postgres: 'FENCEGATE_TEST_DATABASE_URL', mysql: 'FENCEGATE_TEST_MYSQL_URL' };
const EXISTING = { postgres: 'FENCEGATE_KIT_SCHEMA_POSTGRES', mysql: 'FENCEGATE_KIT_SCHEMA_MYSQL' };

function setupCmd() {
  const exe = process.env.FENCEGATE_KIT_SETUP;
  return exe ? [exe, []] : ['go', ['-C', ROOT, 'run', './kit/cmd/setup']];
}

// setup makes a fresh migrated schema/database (kit/cmd/setup) and returns its name.
function setup(dialect) {
  if (process.env[EXISTING[dialect]]) return process.env[EXISTING[dialect]];
  const [cmd, args] = setupCmd();
  return execFileSync(cmd, [...args, dialect], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
}

function teardown(dialect, name) {
  if (process.env[EXISTING[dialect]]) return;
  const [cmd, args] = setupCmd();
  execFileSync(cmd, [...args, '-drop', name, dialect], { stdio: 'inherit' });
}

// connect returns a Client on the schema/database name.
async function connect(dialect, name) {
  const url = process.env[ENV[dialect]];
  if (!url) throw new Error(`${ENV[dialect]} is not set: the kit needs a ${dialect} server`);
  if (dialect === 'postgres') {
    const conn = new pg.Client({ connectionString: url, options: `-c search_path=${name}` });
    await conn.connect();
    return new Client(dialect, conn);
  }
  const u = new URL(url);
  const conn = await mysql.createConnection({
    host: u.hostname || '127.0.0.1', port: Number(u.port || 3306),
    user: decodeURIComponent(u.username || 'root'), password: decodeURIComponent(u.password || ''),
    database: name, supportBigNumbers: true, charset: 'utf8mb4',
  });
  return new Client(dialect, conn);
}

function norm(v) {
  if (Buffer.isBuffer(v)) return v.toString('utf8');
  if (typeof v === 'bigint') return Number(v);
  return v;
}

// Client runs the protocol's calls; each answers a plain object, and a
// database error as {error: SQLSTATE, detail, message}.
class Client {
  constructor(dialect, conn) {
    this.dialect = dialect;
    this.conn = conn;
    this.mysql = dialect === 'mysql';
  }

  async close() { await this.conn.end(); }

  async raw(q, args) {
    if (this.mysql) {
      const [res, fields] = await this.conn.query(q, args);
      if (!Array.isArray(res)) return { rows: [], cols: [] }; // BEGIN, INSERT, COMMIT: an OkPacket
      // A CALL answers [rows, ..., OkPacket]; a SELECT answers rows.
      const rows = Array.isArray(res) && Array.isArray(res[0]) ? res[0] : res;
      const f = Array.isArray(fields) && Array.isArray(fields[0]) ? fields[0] : fields;
      const cols = (f || []).map((x) => x.name.toLowerCase());
      return { rows: rows.map((r) => Object.fromEntries(cols.map((c, i) => [c, norm(r[f[i].name])]))), cols };
    }
    const res = await this.conn.query(q, args);
    const cols = res.fields.map((x) => x.name.toLowerCase());
    return { rows: res.rows.map((r) => Object.fromEntries(cols.map((c, i) => [c, norm(r[res.fields[i].name])]))), cols };
  }

  call(pgSelect, fn, args) {
    if (this.mysql) return this.raw(`CALL ${fn}(${args.map(() => '?').join(', ')})`, args);
    return this.raw(`SELECT ${pgSelect} FROM ${fn}(${args.map((_, i) => `$${i + 1}`).join(', ')})`, args);
  }

  error(e) {
    if (this.mysql && e.sqlState) {
      const msg = e.sqlMessage || e.message;
      let detail = null;
      const i = msg.indexOf('{');
      if (i >= 0) { try { detail = JSON.parse(msg.slice(i)); } catch { /* no JSON */ } }
      return { error: e.sqlState, detail, message: msg };
    }
    if (!this.mysql && typeof e.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code)) {
      let detail = null;
      try { detail = JSON.parse(e.detail); } catch { /* no JSON */ }
      return { error: e.code, detail, message: e.message };
    }
    throw e;
  }

  async row(pgSelect, fn, args) {
    let r;
    try { r = await this.call(pgSelect, fn, args); } catch (e) { return this.error(e); }
    if (r.rows.length !== 1) throw new Error(`${fn} answered ${r.rows.length} rows, want 1`);
    return r.rows[0];
  }

  async one(fn, args, key) {
    let r;
    try { r = await this.call(fn, fn, args); } catch (e) { return this.error(e); }
    if (r.rows.length !== 1) throw new Error(`${fn} answered ${r.rows.length} rows, want 1`);
    return { [key]: r.rows[0][r.cols[0]] };
  }

  version() { return this.one('fencegate_protocol_version', [], 'version'); }

  claim(resource, holder, ttlMs, requestId = null) {
    return this.row('status, fence, holder, ttl_ms, request_id', 'fencegate_claim', [resource, holder, ttlMs, requestId]);
  }

  async claimSet(resources, holder, ttlMs, requestId = null) {
    const arg = this.mysql ? JSON.stringify(resources) : resources;
    try {
      const r = await this.call('status, fence, holder, ttl_ms, request_id', 'fencegate_claim_set', [arg, holder, ttlMs, requestId]);
      return { rows: r.rows };
    } catch (e) { return this.error(e); }
  }

  renew(resource, holder, fence, ttlMs) { return this.row('renewed, ttl_ms', 'fencegate_renew', [resource, holder, fence, ttlMs]); }

  release(resource, holder, fence) { return this.row('released, reason', 'fencegate_release', [resource, holder, fence]); }

  admit(resource, holder, fence) { return this.row('admitted, floor, floor_holder', 'fencegate_admit', [resource, holder, fence]); }

  logRefusal(resource, holder, fence) { return this.one('fencegate_log_refusal', [resource, holder, fence], 'logged'); }

  // write is a fenced write: the effect's row and fencegate_check in one
  // transaction, then COMMIT; a refusal rolls it all back.
  // beforeCheck, when given, is awaited between the two (the pause
  // scenario stops the process there).
  async write(resource, holder, fence, table = 'kit_effect', beforeCheck = null) {
    const ph = this.mysql ? '?, ?, ?' : '$1, $2, $3';
    try {
      await this.raw('BEGIN', []);
      await this.raw(`INSERT INTO ${table} (resource, holder, fence) VALUES (${ph})`, [resource, holder, fence]);
      if (beforeCheck) await beforeCheck();
      const got = await this.one('fencegate_check', [resource, holder, fence], 'floor');
      await this.raw(got.error ? 'ROLLBACK' : 'COMMIT', []);
      return got;
    } catch (e) {
      try { await this.raw('ROLLBACK', []); } catch { /* the connection's error */ }
      return this.error(e);
    }
  }

  async select(q, args) {
    if (this.mysql) q = q.replace(/\$\d+/g, '?');
    return (await this.raw(q, args)).rows;
  }

  async effects(resource) {
    const rows = await this.select('SELECT holder FROM kit_effect WHERE resource = $1 ORDER BY seq', [resource]);
    return { count: rows.length, holders: rows.map((r) => r.holder) };
  }

  async rejections(resource) {
    const rows = await this.select('SELECT resource, fence, holder, floor, floor_holder FROM fencegate_rejection WHERE resource = $1 ORDER BY seq', [resource]);
    const got = { count: rows.length };
    if (rows.length) got.last = rows[rows.length - 1];
    return got;
  }

  async counts() {
    const [r] = await this.select('SELECT (SELECT count(*) FROM fencegate_lease) AS lease, (SELECT count(*) FROM fencegate_floor) AS floor, '
      + '(SELECT count(*) FROM fencegate_request) AS request, (SELECT count(*) FROM fencegate_rejection) AS rejection, '
      + '(SELECT count(*) FROM kit_effect) AS effect', []);
    return { counts: `lease=${r.lease} floor=${r.floor} request=${r.request} rejection=${r.rejection} effect=${r.effect}` };
  }
}

// --- the scenarios' rules (kit/README.md)
const RAW = {
  empty: Buffer.alloc(0), long: Buffer.alloc(257, 'x'), huge: Buffer.alloc(5000, 'x'),
  invalid_utf8: Buffer.concat([Buffer.from('kit-'), Buffer.from([0xff, 0xfe]), Buffer.from('-bad')]),
};

function toInt(v) {
  if (typeof v === 'number' && Number.isInteger(v)) return v;
  if (typeof v === 'string' && /^-?[0-9]+$/.test(v)) return Number(v);
  return null;
}

class Env {
  constructor(prefix) { this.prefix = prefix; this.vars = {}; }

  name(v, resource) {
    if (v && typeof v === 'object' && 'raw' in v) {
      const raw = RAW[v.raw];
      const s = raw.toString('utf8');
      return Buffer.from(s, 'utf8').equals(raw) ? s : raw;
    }
    return resource ? this.prefix + v : v;
  }

  value(v) {
    if (typeof v === 'string' && v.startsWith('$')) return v.slice(1) in this.vars ? this.vars[v.slice(1)] : `<unset variable ${v.slice(1)}>`;
    if (typeof v === 'string' && v.startsWith('@')) return this.prefix + v.slice(1);
    return v;
  }

  equal(want, got) {
    want = this.value(want);
    if (want === null || want === undefined || got === null || got === undefined) return (want ?? null) === (got ?? null);
    if (typeof want === 'boolean') {
      if (typeof got === 'boolean') return got === want;
      if (typeof got === 'string') return (want ? ['t', 'true', '1'] : ['f', 'false', '0']).includes(got);
      const n = toInt(got);
      return n !== null && (n !== 0) === want;
    }
    const a = toInt(want);
    if (a !== null) return toInt(got) === a;
    return typeof got === 'string' && got === want;
  }

  match(p, want, got) {
    const show = (x) => JSON.stringify(x);
    if (want && typeof want === 'object' && !Array.isArray(want)) {
      const keys = Object.keys(want);
      if (keys.length === 1 && keys[0] === 'one_of') {
        return want.one_of.some((o) => this.equal(o, got)) ? [] : [`${p}: got ${show(got)}, want one of ${show(want.one_of)}`];
      }
      if (keys.length && keys.every((k) => ['gt', 'ge', 'lt', 'le', 'ne'].includes(k))) {
        const bad = [];
        for (const op of keys) {
          const x = this.value(want[op]);
          if (op === 'ne') { if (this.equal(want[op], got)) bad.push(`${p}: got ${show(got)}, want not ${show(x)}`); continue; }
          const a = toInt(got); const b = toInt(x);
          const ok = a !== null && b !== null && { gt: a > b, ge: a >= b, lt: a < b, le: a <= b }[op];
          if (!ok) bad.push(`${p}: got ${show(got)}, want ${op} ${show(x)}`);
        }
        return bad;
      }
      if (!got || typeof got !== 'object') return [`${p}: got ${show(got)}, want an object`];
      return keys.flatMap((k) => this.match(`${p}.${k}`, want[k], got[k]));
    }
    if (Array.isArray(want)) {
      if (!Array.isArray(got) || got.length !== want.length) return [`${p}: got ${show(got)}, want ${want.length} elements like ${show(want)}`];
      return want.flatMap((x, i) => this.match(`${p}.${i}`, x, got[i]));
    }
    return this.equal(want, got) ? [] : [`${p}: got ${show(got)}, want ${show(this.value(want))}`];
  }

  check(expect, got) {
    const bad = [];
    for (const k of Object.keys(expect || {}).sort()) {
      if (!(k in got)) bad.push(`${k}: missing, want ${JSON.stringify(expect[k])} (answer ${JSON.stringify(got)})`);
      else bad.push(...this.match(k, expect[k], got[k]));
    }
    if (!('error' in (expect || {})) && 'error' in got) bad.push(`error: got ${got.error} (${got.message}), want none`);
    return bad;
  }

  save(save, got) {
    for (const [name, p] of Object.entries(save || {})) {
      let v = got;
      for (const k of p.split('.')) v = v[k];
      this.vars[name] = v;
    }
  }
}

async function runStep(client, env, st) {
  const r = () => env.name(st.resource, true);
  const h = () => env.name(st.holder, false);
  const n = (k) => toInt(env.value(st[k]));
  switch (st.op) {
    case 'version': return client.version();
    case 'claim': return client.claim(r(), h(), n('ttl_ms'), st.request_id ?? null);
    case 'claim_set': return client.claimSet(st.resources.map((x) => env.name(x, true)), h(), n('ttl_ms'), st.request_id ?? null);
    case 'renew': return client.renew(r(), h(), n('fence'), n('ttl_ms'));
    case 'release': return client.release(r(), h(), n('fence'));
    case 'admit': return client.admit(r(), h(), n('fence'));
    case 'log_refusal': return client.logRefusal(r(), h(), n('fence'));
    case 'write': return client.write(r(), h(), n('fence'));
    case 'effects': return client.effects(r());
    case 'rejections': return client.rejections(r());
    case 'counts': return client.counts();
    default: throw new Error(`unknown op ${st.op}`);
  }
}

function load() {
  return JSON.parse(fs.readFileSync(path.join(KIT, 'scenarios.json'), 'utf8'));
}

module.exports = { setup, teardown, connect, Client, Env, runStep, load };
