// Browser tests of the web console (docs/console.md): playwright-core drives Debian's
// chromium, headless, against the real controlplane binary ($AGENTPLANE_BIN) in
// multi-tenant mode, with the scripted runtime (`ctl runtime run --script`, $CTL_BIN)
// playing refund.script.yaml. Screenshots go to $SCREENSHOT_DIR (printed). Run by .ci/run:
//   AGENTPLANE_BIN=... CTL_BIN=... SCREENSHOT_DIR=... npm test
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';
import { WAIT, chromiumPath, logs, start, stopAll, waitFor } from './harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const run = promisify(execFile);
const QUEUE = 'console-e2e';
const MAIL_QUEUE = 'console-e2e-mail';

// The arguments mail.script.yaml's call sends, exactly: its args_json block.
const MAIL_ARGS = (() => {
  const lines = readFileSync(path.join(here, 'mail.script.yaml'), 'utf8').split('\n');
  const at = lines.findIndex((l) => /^\s*args_json: \|-$/.test(l));
  const out = [];
  for (const l of lines.slice(at + 1)) {
    if (!l.startsWith('        ')) break;
    out.push(l.slice(8));
  }
  return out.join('\n');
})();

const shots = process.env.SCREENSHOT_DIR || mkdtempSync(path.join(tmpdir(), 'console-shots-'));
mkdirSync(shots, { recursive: true });
console.log(`# screenshots: ${shots}`);

function principal(name, tenant, roles) {
  const token = 'apt_' + randomBytes(32).toString('base64url');
  return { name, tenant, roles, token, sha256: createHash('sha256').update(token).digest('hex') };
}
const starter = principal('acme-user', 'acme', ['user']);        // starts tasks, cannot approve
const approver = principal('acme-approver', 'acme', ['approver']);
const outsider = principal('globex-lead', 'globex', ['user', 'approver']);
const runtime = principal('fleet', '*', ['runtime']);

let work, cp, rt, base, grpcAddr;

function ctlText(who, ...args) {
  return run(process.env.CTL_BIN, args, {
    env: { ...process.env, AGENTPLANE_ADDR: grpcAddr, AGENTPLANE_TOKEN: who.token }, cwd: here,
  }).then(({ stdout }) => stdout);
}

function ctl(who, ...args) {
  return ctlText(who, '-o', 'json', ...args).then((stdout) => JSON.parse(stdout));
}

// events is a task's log, read with ctl task watch -o json (which ends with the task).
async function events(who, id) {
  const out = await ctlText(who, '-o', 'json', 'task', 'watch', id);
  return out.trim().split('\n').map((l) => JSON.parse(l));
}

// noSidewaysScroll: nothing on the page is wider than the screen.
function noSidewaysScroll(page) {
  return page.evaluate(() => document.scrollingElement.scrollWidth <= document.scrollingElement.clientWidth);
}

async function startRefund(extra = []) {
  const out = await ctl(starter, 'task', 'start', '--agent', 'refund.agent.yaml', '--policy', 'refund.policy.yaml',
    '--queue', QUEUE, '--interrupt-timeout', '30m', '--label', 'team=refunds', '--input', 'refund order 42', ...extra);
  const id = out.taskId || out.task_id || out.task?.taskId || out.task?.task_id;
  assert.ok(id, `no task id in ${JSON.stringify(out)}`);
  return id;
}

// browser opens a fresh chromium profile (its own --user-data-dir) for one person.
async function browser(who) {
  const dir = mkdtempSync(path.join(work, `profile-${who.name}-`));
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
  // A page that breaks its own Content-Security-Policy (an inline script or style) fails the test.
  page.on('console', (m) => { if (m.type() === 'error' && /Content Security Policy/i.test(m.text())) problems.push(m.text()); });
  const close = ctx.close.bind(ctx);
  ctx.close = async () => {
    await close();
    assert.deepEqual(problems, [], 'script errors or CSP violations in the pages');
  };
  return { ctx, page };
}

// signIn goes through the sign-in form from the keyboard.
async function signIn(page, who) {
  await page.goto(`${base}/ui/inbox`);
  assert.match(page.url(), /\/ui\/signin$/, 'an anonymous visit lands on the sign-in page');
  await page.getByLabel('Bearer token').fill(who.token);
  await page.keyboard.press('Enter');
  await page.waitForURL(/\/ui\/inbox$/);
  await page.getByText(`tenant ${who.tenant}`).waitFor();
}

async function snap(page, name, opts = {}) {
  const file = path.join(shots, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true, ...opts });
  return file;
}

before(async () => {
  for (const [name, env] of [['AGENTPLANE_BIN', process.env.AGENTPLANE_BIN], ['CTL_BIN', process.env.CTL_BIN]]) {
    assert.ok(env, `${name} must name the binary`);
  }
  work = mkdtempSync(path.join(tmpdir(), 'console-e2e-'));
  const entry = (p) => `    - {name: ${p.name}, sha256: ${p.sha256}, tenant: "${p.tenant}", roles: [${p.roles.join(', ')}]}`;
  writeFileSync(path.join(work, 'controlplane.yaml'), [
    `data_dir: ${path.join(work, 'data')}`, 'grpc_addr: 127.0.0.1:0', 'http_addr: 127.0.0.1:0', 'log: {level: warn}',
    'auth:', '  require_principal: true', '  tokens:', ...[starter, approver, outsider, runtime].map(entry), '',
  ].join('\n'));
  cp = start('controlplane', process.env.AGENTPLANE_BIN, ['--config', path.join(work, 'controlplane.yaml')]);
  cp.on('exit', (code) => { if (code) logs.controlplane += `\n(exited ${code})`; });
  const m = await waitFor('controlplane listening', () => /gRPC\s+(\S+)[\s\S]*console\s+(http:\/\/\S+)\/ui\//.exec(logs.controlplane));
  grpcAddr = m[1];
  base = m[2];
  rt = start('runtime', process.env.CTL_BIN, ['runtime', 'run', '--script', path.join(here, 'refund.script.yaml'), '--queue', QUEUE,
    '--capacity', '4', '--runtime-id', 'e2e-runtime'], { AGENTPLANE_ADDR: grpcAddr, AGENTPLANE_TOKEN: runtime.token });
  start('mail-runtime', process.env.CTL_BIN, ['runtime', 'run', '--script', path.join(here, 'mail.script.yaml'), '--queue', MAIL_QUEUE,
    '--capacity', '2', '--runtime-id', 'e2e-mail-runtime'], { AGENTPLANE_ADDR: grpcAddr, AGENTPLANE_TOKEN: runtime.token });
});

after(async () => {
  await stopAll(); // the runtime first, then the control plane, each waited for before the files go
  if (work) rmSync(work, { recursive: true, force: true });
});

let taskId, interruptId;

test('an approver sees a gated call arrive, fixes its arguments against the schema, and the task completes', async () => {
  const { ctx, page } = await browser(approver);
  try {
    await signIn(page, approver);
    // The first Tab reaches the skip link: the page is usable from the keyboard.
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Skip to content');
    await page.getByText('Nothing waits for a decision.').waitFor();
    await page.evaluate(() => { window.__sameDocument = true; });

    taskId = await startRefund();
    const row = page.locator('#inbox tbody tr', { hasText: 'issue_refund' });
    await row.waitFor();
    assert.equal(await page.evaluate(() => window.__sameDocument), true, 'the row arrived without a reload');
    assert.match(await page.locator('#inbox-status').textContent(), /^1 waiting/);
    assert.equal(await page.locator('#inbox-status').getAttribute('aria-live'), 'polite');
    assert.match(await row.textContent(), new RegExp(taskId));
    assert.match(await row.textContent(), /money/);
    interruptId = await row.getAttribute('data-id');
    await snap(page, '01-inbox');

    // Filters: another tool hides it, the tag keeps it.
    await page.goto(`${base}/ui/inbox?tool=send_email`);
    await page.getByText('Nothing waits for a decision.').waitFor();
    await page.goto(`${base}/ui/inbox?tag=money`);
    await page.locator('#inbox tbody tr', { hasText: 'issue_refund' }).waitFor();

    await page.getByRole('link', { name: 'issue_refund' }).click();
    await page.waitForURL(new RegExp(`/ui/interrupts/${interruptId}$`));
    await page.getByRole('heading', { name: /issue_refund/ }).waitFor();
    assert.match(await page.locator('main').textContent(), /untrusted: written by the model/);
    assert.match(await page.locator('main').textContent(), /ignore previous instructions/);
    assert.match(await page.locator('time.countdown').textContent(), /left$/, 'the deadline counts down');

    // An edit past the schema's maximum: the server's error, beside the field.
    const amount = page.getByLabel(/amount_eur/);
    assert.equal(await amount.inputValue(), '30');
    await amount.fill('500');
    await page.getByRole('button', { name: 'Run with these arguments' }).click();
    const fieldErr = page.locator('#arg-amount_eur-err');
    await fieldErr.waitFor();
    assert.match(await fieldErr.textContent(), /100/);
    assert.equal(await amount.getAttribute('aria-invalid'), 'true');
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'arg-amount_eur', 'focus moves to the field in error');
    assert.match(await page.locator('#page-error').textContent(), /INTERRUPT_EDIT_INVALID/);
    await snap(page, '02-edit-error');

    // The fixed edit runs.
    await page.getByLabel(/amount_eur/).fill('25');
    await page.getByRole('button', { name: 'Run with these arguments' }).click();
    await page.waitForURL(/\?done=1$/);
    assert.match(await page.locator('#in-state').textContent(), new RegExp(`resolved: edit by ${approver.name}`));

    // The task page follows the run live to the end.
    await page.getByRole('link', { name: taskId }).click();
    await page.waitForURL(new RegExp(`/ui/tasks/${taskId}$`));
    await page.evaluate(() => { window.__sameDocument = true; });
    await page.locator('#task-state', { hasText: 'COMPLETED' }).waitFor();
    await page.locator('#timeline li', { hasText: 'WORKING → COMPLETED' }).waitFor();
    const timeline = await page.locator('#timeline').textContent();
    for (const step of ['task submitted', 'SUBMITTED → WORKING', 'assistant message from support', 'Looking up order 42',
      'gate interrupt issue_refund', 'interrupt raised: tool_approval for issue_refund', `interrupt resolved: edit by ${approver.name}`,
      '"amount_eur":25', 'tool call issue_refund', 'tool result issue_refund', 'R-42', 'output', 'Refunded order 42.', 'WORKING → COMPLETED']) {
      assert.ok(timeline.includes(step), `the timeline lacks "${step}":\n${timeline}`);
    }
    const seqs = await page.locator('#timeline li').evaluateAll((els) => els.map((e) => Number(e.dataset.seq)));
    assert.deepEqual(seqs, seqs.map((_, i) => i + 1), 'every event once, in order');
    await snap(page, '03-task-timeline');

    // Tasks: the state and label filters find it.
    await page.goto(`${base}/ui/tasks?state=COMPLETED&label=team%3Drefunds`);
    await page.getByRole('link', { name: taskId }).waitFor();
    await page.goto(`${base}/ui/tasks?state=FAILED`);
    assert.equal(await page.getByRole('link', { name: taskId }).count(), 0);
    await page.goto(`${base}/ui/capabilities`);
    assert.match(await page.locator('main').textContent(), /Can approve\s*yes/);

    // A phone: nothing wider than the screen.
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(`${base}/ui/tasks/${taskId}`);
    assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), 'no sideways scrolling on a phone');
    await snap(page, '04-task-phone');
  } finally {
    await ctx.close();
  }
});

test('a user of another tenant sees none of it', async () => {
  assert.ok(taskId && interruptId);
  const { ctx, page } = await browser(outsider);
  try {
    // A notification's link, opened signed out: sign-in, then the page it names (absent for this tenant).
    await page.goto(`${base}/ui/tasks/${taskId}`);
    assert.match(page.url(), /\/ui\/signin\?next=/);
    await page.getByLabel('Bearer token').fill(outsider.token);
    const landed = page.waitForResponse((r) => r.url().endsWith(`/ui/tasks/${taskId}`));
    await page.getByRole('button', { name: 'Sign in' }).click();
    assert.equal((await landed).status(), 404);
    await page.goto(`${base}/ui/inbox`);
    await page.getByText('Nothing waits for a decision.').waitFor();
    await page.goto(`${base}/ui/tasks`);
    assert.equal(await page.getByRole('link', { name: taskId }).count(), 0);
    for (const p of [`/ui/tasks/${taskId}`, `/ui/interrupts/${interruptId}`]) {
      const resp = await page.goto(base + p);
      assert.equal(resp.status(), 404, p);
      assert.doesNotMatch(await page.locator('main').textContent(), /issue_refund|order 42/);
    }
    await snap(page, '05-other-tenant');
  } finally {
    await ctx.close();
  }
});

test('a user without the approver role cannot approve', async () => {
  const second = await startRefund();
  const { ctx, page } = await browser(starter);
  try {
    await signIn(page, starter);
    const row = page.locator('#inbox tbody tr', { hasText: second });
    await row.waitFor();
    const id = await row.getAttribute('data-id');
    await row.getByRole('link', { name: 'issue_refund' }).click();
    await page.waitForURL(new RegExp(`/ui/interrupts/${id}$`));
    assert.equal(await page.getByRole('button', { name: 'Approve' }).count(), 0, 'no approve button for a user');
    assert.match(await page.locator('main').textContent(), /needs the approver role/);
    // Forge the approve the page does not offer: the API refuses it.
    const refused = await page.evaluate(async (path) => {
      const csrf = document.querySelector('meta[name="csrf"]').content;
      const r = await fetch(path, { method: 'POST', body: new URLSearchParams({ csrf, decision: 'approve' }) });
      return { status: r.status, body: await r.text() };
    }, `/ui/interrupts/${id}`);
    assert.equal(refused.status, 403);
    assert.match(refused.body, /AUTH_PERMISSION_DENIED/);
    await page.reload();
    assert.equal(await page.locator('#in-state').textContent(), 'pending');
    await snap(page, '06-user-cannot-approve');

    // The approver rejects it (the script then fails the task). Everyone reads it as refused, not run.
    await ctl(approver, 'hitl', 'reject', id, '--reason', 'test over: <b>no</b>');
    await page.reload();
    await page.locator('#decision').waitFor();
    assert.match(await page.locator('#decision-what').textContent(), /rejected: the call did not run/);
    assert.match(await page.locator('#decision-by').textContent(), new RegExp(approver.name));
    assert.equal(await page.locator('#decision-reason').textContent(), 'test over: <b>no</b>', 'the reason, as text');
    await snap(page, '07-rejected-interrupt');

    await page.getByRole('link', { name: second }).first().click();
    await page.locator('#task-state', { hasText: 'FAILED' }).waitFor();
    await page.reload();
    assert.match(await page.locator('#task-failure').textContent(), /tool\.rejected[\s\S]*tool issue_refund was rejected:[\s\S]*test over: <b>no<\/b>/,
      'the failure message, not only its reason');
    const refusedLines = page.locator('#timeline li.ev-refused');
    assert.equal(await refusedLines.count(), 2, 'the call and what the model was told, both marked refused');
    assert.match(await refusedLines.first().textContent(), new RegExp(`refused: issue_refund \\(step-2\\) did not run, rejected by ${approver.name}`));
    assert.match(await refusedLines.first().locator('pre.untrusted').textContent(), /reason: test over: <b>no<\/b>/);
    assert.doesNotMatch(await page.locator('#timeline').textContent(), /tool call issue_refund/, 'a refused call does not read as run');
    await snap(page, '08-refused-timeline');

    // ctl task watch says the same.
    const watched = await ctlText(approver, 'task', 'watch', second);
    assert.match(watched, new RegExp(`refused\\s+issue_refund \\[step-2\\] did not run: rejected by ${approver.name}: test over: <b>no</b>`), watched);
    assert.doesNotMatch(watched, /tool call\s+issue_refund/, watched);

    // The task list names the agent and shows the input.
    await page.goto(`${base}/ui/tasks`);
    const listed = page.locator('#tasks tbody tr', { hasText: second });
    assert.match(await listed.textContent(), /support[\s\S]*refund order 42/);
    await snap(page, '12-tasks');
  } finally {
    await ctx.close();
  }
});

test('an edit changes only the field the approver changed: every other argument reaches the runtime byte for byte', async () => {
  const { ctx, page } = await browser(approver);
  try {
    await signIn(page, approver);
    const out = await ctl(starter, 'task', 'start', '--agent', 'mail.agent.yaml', '--policy', 'mail.policy.yaml',
      '--queue', MAIL_QUEUE, '--interrupt-timeout', '30m', '--input', 'tell Ann about her refund');
    const id = out.taskId || out.task?.taskId;
    const row = page.locator('#inbox tbody tr', { hasText: 'send_email' });
    await row.waitFor();
    assert.match(await row.locator('td.preview').textContent(), /"to":"ann@example.com","subject":"Order <42>"/, 'an argument preview, as written');

    // A phone: the inbox does not scroll sideways.
    await page.setViewportSize({ width: 390, height: 844 });
    await page.reload();
    await row.waitFor();
    assert.ok(await noSidewaysScroll(page), 'the inbox scrolls sideways at 390 px');
    await snap(page, '09-inbox-phone');
    await page.setViewportSize({ width: 1280, height: 900 });

    await row.getByRole('link', { name: 'send_email' }).click();
    await page.getByRole('heading', { name: /send_email/ }).waitFor();
    await page.locator('details', { hasText: 'Exact JSON text' }).locator('summary').click();
    assert.equal(await page.locator('#args-exact').textContent(), MAIL_ARGS, '"Exact JSON text" is the text the runtime sent');
    assert.equal(await page.locator('#arg-body').evaluate((e) => e.tagName), 'TEXTAREA', 'a multi-line string gets a textarea');
    assert.equal(await page.locator('#arg-body').inputValue(), 'Dear Ann,\n\n  your refund of 30 € is on its way.  \n-- \nBob  ');
    assert.equal(await page.locator('#arg-greeting').inputValue(), '  élève / café ');
    assert.equal(await page.locator('#arg-ref').inputValue(), '12345678901234567890');
    await snap(page, '10-edit-form');

    // Edit one field only, with characters an encoder likes to escape.
    await page.locator('#arg-subject').fill('Order 42 & co <b>');
    await page.getByRole('button', { name: 'Run with these arguments' }).click();
    await page.waitForURL(/\?done=1$/);
    const ran = MAIL_ARGS.replace('"Order <42>"', '"Order 42 & co <b>"');
    assert.notEqual(ran, MAIL_ARGS);

    // The page shows the decision: who, what changed beside the model's, the exact text it runs with.
    await page.locator('#decision').waitFor();
    assert.match(await page.locator('#decision-what').textContent(), /edited/);
    assert.match(await page.locator('#decision-by').textContent(), new RegExp(approver.name));
    const changed = await page.locator('#decision-args tr.changed').evaluateAll((rs) => rs.map((r) => r.dataset.key));
    assert.deepEqual(changed, ['subject']);
    assert.match(await page.locator('#decision-unchanged').textContent(), /to, body, greeting, ref, meta, cc, urgent, prio\./);
    assert.match(await page.locator('#decision-args tr[data-key="subject"]').textContent(), /Order <42>[\s\S]*Order 42 & co <b>/);
    await page.locator('details', { hasText: 'Exact JSON text it runs with' }).locator('summary').click();
    assert.equal(await page.locator('#decision-args-exact').textContent(), ran);
    await snap(page, '11-edited-interrupt');

    // The runtime ran the call with exactly that text: every other value as the model wrote it.
    const log = await events(approver, id);
    const call = log.find((e) => e.toolCall)?.toolCall;
    assert.ok(call, 'the runtime reported the call');
    assert.equal(call.argumentsJson, ran, 'the runtime received every untouched argument byte for byte');
    const decision = log.find((e) => e.interruptResolved)?.interruptResolved.decision;
    assert.equal(decision.argumentsJson, ran);

    const watched = await ctlText(approver, 'task', 'watch', id);
    assert.match(watched, /decision\s+\S+: edit by acme-approver; runs with \{"to":"ann@example.com","subject":"Order 42 & co <b>"/, watched);
  } finally {
    await ctx.close();
  }
});
