// Browser test of the console's live updates (docs/console.md#live-updates): an open
// inbox hears of a gated call by server-sent events, and an open task page of a new
// event of its log. Interrupts are created through the HTTP API (a runtime's
// LeaseTasks and CheckToolCall) while the page is open; a MutationObserver in the page
// stamps the moment each row appears, which is compared with the interrupt's
// request_time (the control plane's clock; the same machine's clock, on loopback).
// The figures are printed (p50, p99), never asserted: the test fails only when a row
// does not arrive, when the stream does not open, or when a page breaks its CSP.
// Run by `npm test` after e2e.mjs and guard.mjs:
//   AGENTPLANE_BIN=... CTL_BIN=... npm test
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';
import { WAIT, chromiumPath, logs, start, stopAll, waitFor } from './harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const run = promisify(execFile);
const QUEUE = 'console-live';
const N = Number(process.env.LIVE_INTERRUPTS || 40); // interrupts measured

function principal(name, tenant, roles) {
  const token = 'apt_' + randomBytes(32).toString('base64url');
  return { name, tenant, roles, token, sha256: createHash('sha256').update(token).digest('hex') };
}
const starter = principal('acme-user', 'acme', ['user']);
const approver = principal('acme-approver', 'acme', ['approver']);
const runtime = principal('fleet', '*', ['runtime']);

let work, base, grpcAddr;

function ctl(who, ...args) {
  return run(process.env.CTL_BIN, ['-o', 'json', ...args], {
    env: { ...process.env, AGENTPLANE_ADDR: grpcAddr, AGENTPLANE_TOKEN: who.token }, cwd: here,
  }).then(({ stdout }) => JSON.parse(stdout));
}

// api calls the HTTP/JSON API as who.
async function api(who, method, p, body) {
  const r = await fetch(base + p, {
    method, headers: { 'Authorization': `Bearer ${who.token}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  assert.ok(r.ok, `${method} ${p}: ${r.status} ${text}`);
  return JSON.parse(text);
}

// ms reads an RFC 3339 timestamp to fractional milliseconds since the epoch.
function ms(ts) {
  const m = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?Z$/.exec(ts);
  assert.ok(m, `timestamp ${ts}`);
  return Date.parse(m[1] + 'Z') + Number('0.' + (m[2] || '0')) * 1000;
}

function pct(xs, p) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
}

function report(what, xs) {
  const f = (x) => x.toFixed(1);
  console.log(`# ${what}: n=${xs.length} p50=${f(pct(xs, 50))} ms p99=${f(pct(xs, 99))} ms max=${f(Math.max(...xs))} ms`);
}

// leased starts n refund tasks on QUEUE and leases them all as the runtime.
async function leased(n) {
  const ids = new Set();
  for (let i = 0; i < n; i++) {
    const out = await ctl(starter, 'task', 'start', '--agent', 'refund.agent.yaml', '--policy', 'refund.policy.yaml',
      '--queue', QUEUE, '--interrupt-timeout', '30m', '--input', `refund order ${i}`);
    ids.add(out.taskId || out.task_id || out.task?.taskId || out.task?.task_id);
  }
  const leases = [];
  await waitFor(`leases of ${n} tasks`, async () => {
    const got = await api(runtime, 'POST', '/v1/runtime/leases', { runtimeId: 'live-e2e', maxTasks: n - leases.length, queues: [QUEUE], wait: '1s' });
    for (const l of got.leases || []) {
      const id = l.task.taskId;
      if (ids.has(id)) leases.push({ taskId: id, leaseId: l.leaseId, epoch: l.epoch });
    }
    return leases.length === n;
  });
  return leases;
}

// gate asks the gate about a refund under lease: a pending approval (an interrupt).
async function gate(lease, note) {
  const out = await api(runtime, 'POST', `/v1/runtime/tasks/${lease.taskId}:checkToolCall`, {
    lease, callId: 'call-' + randomBytes(4).toString('hex'), toolName: 'issue_refund', agentName: 'support',
    argumentsJson: JSON.stringify({ order_id: 1, amount_eur: 5, note }),
  });
  assert.equal(out.outcome, 'GATE_OUTCOME_INTERRUPT', JSON.stringify(out));
  return out.interrupt;
}

async function browser() {
  const dir = mkdtempSync(path.join(work, 'profile-'));
  const ctx = await chromium.launchPersistentContext(dir, {
    executablePath: chromiumPath, headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
      '--disable-sync', '--no-first-run'],
    viewport: { width: 1280, height: 900 },
  });
  const page = ctx.pages()[0] || await ctx.newPage();
  page.setDefaultTimeout(WAIT);
  const problems = [];
  page.on('pageerror', (e) => problems.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error' && /Content Security Policy/i.test(m.text())) problems.push(m.text()); });
  return {
    page,
    close: async () => { await ctx.close(); assert.deepEqual(problems, [], 'script errors or CSP violations in the pages'); },
  };
}

async function signIn(page, who) {
  await page.goto(`${base}/ui/inbox`);
  await page.getByLabel('Bearer token').fill(who.token);
  await page.keyboard.press('Enter');
  await page.waitForURL(/\/ui\/inbox$/);
}

// streamOpened resolves when the page's stream at a path ending in suffix answers 200.
function streamOpened(page, suffix) {
  return page.waitForResponse((r) => new URL(r.url()).pathname.endsWith(suffix) && r.status() === 200);
}

// watchRows stamps, in the page, when each element matching sel first appears under root.
function watchRows(page, root, sel, attr) {
  return page.evaluate(([root, sel, attr]) => {
    window.__seen = {};
    const now = () => performance.timeOrigin + performance.now();
    const stamp = (el) => {
      const key = attr ? el.getAttribute(attr) : String(Object.keys(window.__seen).length);
      if (!(key in window.__seen)) window.__seen[key] = now();
    };
    document.querySelectorAll(root + ' ' + sel).forEach((el) => { window.__seen[attr ? el.getAttribute(attr) : '_' + Math.random()] = 0; });
    new MutationObserver((recs) => {
      for (const r of recs) for (const n of r.addedNodes) {
        if (n.nodeType === 1 && n.matches(sel)) stamp(n);
      }
    }).observe(document.querySelector(root), { childList: true, subtree: true });
  }, [root, sel, attr]);
}

before(async () => {
  for (const [name, env] of [['AGENTPLANE_BIN', process.env.AGENTPLANE_BIN], ['CTL_BIN', process.env.CTL_BIN]]) {
    assert.ok(env, `${name} must name the binary`);
  }
  work = mkdtempSync(path.join(tmpdir(), 'console-live-'));
  const entry = (p) => `    - {name: ${p.name}, sha256: ${p.sha256}, tenant: "${p.tenant}", roles: [${p.roles.join(', ')}]}`;
  writeFileSync(path.join(work, 'controlplane.yaml'), [
    `data_dir: ${path.join(work, 'data')}`, 'grpc_addr: 127.0.0.1:0', 'http_addr: 127.0.0.1:0', 'log: {level: warn}',
    'auth:', '  require_principal: true', '  tokens:', ...[starter, approver, runtime].map(entry), '',
  ].join('\n'));
  const cp = start('controlplane', process.env.AGENTPLANE_BIN, ['--config', path.join(work, 'controlplane.yaml')]);
  cp.on('exit', (code) => { if (code) logs.controlplane += `\n(exited ${code})`; });
  const m = await waitFor('controlplane listening', () => /gRPC\s+(\S+)[\s\S]*console\s+(http:\/\/\S+)\/ui\//.exec(logs.controlplane));
  grpcAddr = m[1];
  base = m[2];
});

after(async () => {
  await stopAll();
  if (work) rmSync(work, { recursive: true, force: true });
});

let leases;

test('a gated call shows in an open inbox by server-sent events, as text', async () => {
  leases = await leased(N + 4);
  const { page, close } = await browser();
  try {
    await signIn(page, approver);
    await page.getByText('Nothing waits for a decision.').waitFor();
    // The stream opened for this page load (a reload, so that the wait starts before it).
    const opened = streamOpened(page, '/ui/inbox/live');
    await page.reload();
    await opened;
    await watchRows(page, '#inbox tbody', 'tr[data-id]', 'data-id');
    const created = {};
    for (const lease of leases.slice(0, N)) {
      // One at a time, each measured alone: a pause of 100-200 ms between them.
      const note = '<img src=x id=injected> & </td><b>bold</b>';
      const it = await gate(lease, note);
      created[it.interruptId] = ms(it.approval.requestTime);
      await new Promise((r) => setTimeout(r, 100 + Math.random() * 100));
    }
    const seen = await waitFor(`${N} rows in the open inbox`, async () => {
      const s = await page.evaluate(() => window.__seen);
      return Object.keys(created).every((id) => s[id]) && s;
    });
    report('inbox: interrupt created -> row shown (server-sent events)', Object.keys(created).map((id) => seen[id] - created[id]));
    assert.equal(await page.locator('#injected').count(), 0, 'a tool argument became markup');
    assert.equal(await page.locator('#inbox tbody b').count(), 0, 'a tool argument became markup');
    assert.match(await page.locator('#inbox tbody').textContent(), /<img src=x id=injected>/);
  } finally {
    await close();
  }
});

test('without its stream the inbox polls', async () => {
  const { page, close } = await browser();
  try {
    await signIn(page, approver);
    await page.route('**/ui/inbox/live', (r) => r.abort());
    await page.reload();
    await page.locator('#inbox tbody tr[data-id]').first().waitFor();
    await watchRows(page, '#inbox tbody', 'tr[data-id]', 'data-id');
    const it = await gate(leases[N], 'polled');
    await waitFor('the row by polling', async () => (await page.evaluate((id) => window.__seen[id], it.interruptId)) > 0);
    const polled = (await page.evaluate((id) => window.__seen[id], it.interruptId)) - ms(it.approval.requestTime);
    console.log(`# inbox without its stream (polling every 2 s): the row after ${polled.toFixed(0)} ms`);
  } finally {
    await close();
  }
});

test('an open task page shows a new event by server-sent events, as text', async () => {
  const { page, close } = await browser();
  try {
    await signIn(page, approver);
    const lease = leases[N + 1];
    const opened = streamOpened(page, `/ui/tasks/${lease.taskId}/live`);
    await page.goto(`${base}/ui/tasks/${lease.taskId}`);
    await opened;
    await watchRows(page, '#timeline', 'li', null);
    const lat = [];
    for (let i = 0; i < 10; i++) {
      const before = await page.locator('#timeline > li').count();
      const t0 = Date.now();
      await api(runtime, 'POST', `/v1/runtime/tasks/${lease.taskId}/events`, {
        lease, events: [{ note: { text: `note ${i} <b id="injected">bold</b>` } }],
      });
      await waitFor(`timeline event ${i}`, async () => (await page.locator('#timeline > li').count()) > before);
      const t = await page.evaluate(() => Math.max(...Object.values(window.__seen)));
      lat.push(t - t0);
    }
    report('task page: ReportEvents sent -> timeline line shown (server-sent events)', lat);
    assert.equal(await page.locator('#injected').count(), 0, 'a note became markup');
    assert.match(await page.locator('#timeline').textContent(), /note 9 <b id="injected">bold<\/b>/);
  } finally {
    await close();
  }
});
