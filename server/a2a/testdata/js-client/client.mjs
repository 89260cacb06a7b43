// The A2A project's JavaScript SDK (@a2a-js/sdk) as a client of agentplane's A2A
// face, in both protocol versions: 1.0 over JSON-RPC and HTTP+JSON (ClientFactory,
// from the agent card), and 0.3 over JSON-RPC (the SDK's legacy transport). Run by
// server/a2a's TestA2AJSClient against a real control plane (A2A_BASE), whose
// helpdesk agent answers at once and whose calculator agent makes a tool call that a
// person approves (through agentplane's own API: the A2A caller is not the approver).
import assert from 'node:assert/strict';
import { createHmac, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { Client, ClientFactory, ClientFactoryOptions } from '@a2a-js/sdk/client';
import { LegacyJsonRpcTransport } from '@a2a-js/sdk/compat/v0_3/client';
import { Role, TaskState } from '@a2a-js/sdk';

const base = process.env.A2A_BASE;
if (!base) throw new Error('A2A_BASE is not set');
const gate = { 'agentplane.interruptPolicy': { allowlist: { tools: ['send_email'] } } };

let passed = 0;
let failed = 0;
async function check(name, fn) {
  try {
    await fn();
    passed++;
    console.log(`ok - ${name}`);
  } catch (e) {
    failed++;
    console.log(`not ok - ${name}\n${e?.stack ?? e}`);
  }
}

const text = (t) => ({ content: { $case: 'text', value: t } });
const message = (t, extra = {}) => ({ messageId: randomUUID(), role: Role.ROLE_USER, parts: [text(t)], ...extra });

// kind tells the stream's events apart (the SDK yields the StreamResponse's payload).
function kind(ev) {
  if (ev?.payload?.$case) return kind(ev.payload.value);
  if ('artifact' in ev) return 'artifact';
  if ('taskId' in ev && 'status' in ev) return 'status';
  if ('id' in ev && 'status' in ev) return 'task';
  if ('messageId' in ev) return 'message';
  return 'unknown';
}
const unwrap = (ev) => (ev?.payload?.$case ? ev.payload.value : ev);

function statusData(st) {
  for (const p of st?.message?.parts ?? []) {
    if (p.content?.$case === 'data') return p.content.value;
  }
  return undefined;
}
const statusText = (st) => (st?.message?.parts ?? []).filter((p) => p.content?.$case === 'text').map((p) => p.content.value).join('');

async function until(what, fn) {
  const deadline = Date.now() + 20000;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

// approve resolves the interrupt through agentplane's HTTP API, as a reviewer would.
async function approve(interruptId) {
  const res = await fetch(`${base}/v1/interrupts/${encodeURIComponent(interruptId)}:resolve`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ approve: {}, requestId: randomUUID() }),
  });
  assert.equal(res.status, 200, `resolve ${interruptId}: ${await res.text()}`);
}

async function suite(label, helpdesk, calculator, { list }) {
  await check(`${label}: discover`, async () => {
    const card = await helpdesk.getAgentCard();
    assert.equal(card.name, 'helpdesk');
    assert.equal(card.capabilities.streaming, true);
    assert.equal(card.capabilities.pushNotifications, true);
  });

  let done;
  await check(`${label}: send (blocking), and a retry starts nothing new`, async () => {
    const m = message('weather in Paris?');
    done = await helpdesk.sendMessage({ message: m });
    assert.equal(done.status.state, TaskState.TASK_STATE_COMPLETED);
    assert.match(JSON.stringify(done.artifacts), /Paris/);
    const again = await helpdesk.sendMessage({ message: m });
    assert.equal(again.id, done.id);
  });

  await check(`${label}: stream`, async () => {
    const kinds = [];
    let last;
    for await (const ev of helpdesk.sendMessageStream({ message: message('hello') })) {
      kinds.push(kind(ev));
      last = unwrap(ev);
    }
    assert.equal(kinds[0], 'task');
    assert.ok(kinds.includes('artifact'), kinds.join(' '));
    assert.equal(kinds.at(-1), 'status');
    assert.equal(last.status.state, TaskState.TASK_STATE_COMPLETED);
  });

  await check(`${label}: get`, async () => {
    const t = await helpdesk.getTask({ id: done.id, historyLength: 5 });
    assert.equal(t.id, done.id);
    assert.equal(t.status.state, TaskState.TASK_STATE_COMPLETED);
    assert.ok(t.history.length >= 1);
    await assert.rejects(helpdesk.getTask({ id: 'no-such-task' }), /not found/i);
  });

  if (list) {
    await check(`${label}: list`, async () => {
      const res = await helpdesk.listTasks({ pageSize: 100 });
      assert.ok(res.tasks.some((t) => t.id === done.id), JSON.stringify(res.tasks.map((t) => t.id)));
    });
  }

  await check(`${label}: a call waiting for a person is working; resubscribe after killing the stream`, async () => {
    const abort = new AbortController();
    let taskId;
    let interruptId;
    const stream = calculator.sendMessageStream({ message: message('email the customer'), metadata: gate }, { signal: abort.signal });
    for await (const ev of stream) {
      const v = unwrap(ev);
      if (kind(ev) === 'task') taskId = v.id;
      const ids = kind(ev) === 'status' ? statusData(v.status)?.waitingForApproval : undefined;
      if (ids) {
        assert.equal(v.status.state, TaskState.TASK_STATE_WORKING);
        assert.match(statusText(v.status), /approve/);
        interruptId = ids[0];
        break; // kill the stream
      }
    }
    abort.abort();
    assert.ok(taskId && interruptId, 'no approval wait seen');
    await approve(interruptId);
    const kinds = [];
    let last;
    for await (const ev of calculator.resubscribeTask({ id: taskId })) {
      kinds.push(kind(ev));
      last = unwrap(ev);
    }
    assert.equal(kinds[0], 'task');
    assert.equal(last.status.state, TaskState.TASK_STATE_INPUT_REQUIRED, kinds.join(' '));
    const end = await calculator.sendMessage({ message: message('thanks', { taskId }) });
    assert.equal(end.id, taskId);
    assert.equal(end.status.state, TaskState.TASK_STATE_COMPLETED);
  });

  await check(`${label}: cancel`, async () => {
    const t = await calculator.sendMessage({ message: message('email again'), metadata: gate, configuration: { returnImmediately: true, acceptedOutputModes: [] } });
    await until('the approval wait', async () => statusData((await calculator.getTask({ id: t.id })).status)?.waitingForApproval);
    const c = await calculator.cancelTask({ id: t.id });
    assert.equal(c.id, t.id);
    await until('CANCELED', async () => (await calculator.getTask({ id: t.id })).status.state === TaskState.TASK_STATE_CANCELED);
    await assert.rejects(calculator.cancelTask({ id: done.id }), /not found|cannot be canceled|not cancelable/i);
  });
}

// A webhook receiver on loopback: the push notifications of the tasks, as they come.
const received = [];
const receiver = createServer((req, res) => {
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', () => {
    received.push({ headers: req.headers, body });
    res.writeHead(200).end();
  });
});
await new Promise((r) => receiver.listen(0, '127.0.0.1', r));
const hookURL = `http://127.0.0.1:${receiver.address().port}/hook`;

// verifyPush checks a notification as a receiver should: the config's credentials, its
// token, and the Standard Webhooks signature keyed by the token.
function verifyPush(n, token) {
  assert.equal(n.headers.authorization, 'Bearer push-cred');
  assert.equal(n.headers['x-a2a-notification-token'], token);
  const mac = createHmac('sha256', token).update(`${n.headers['webhook-id']}.${n.headers['webhook-timestamp']}.${n.body}`).digest('base64');
  assert.equal(n.headers['webhook-signature'], `v1,${mac}`);
}

async function pushSuite(label, calculator) {
  await check(`${label}: a push notification arrives, signed`, async () => {
    const t = await calculator.sendMessage({ message: message('email for push'), metadata: gate, configuration: { returnImmediately: true, acceptedOutputModes: [] } });
    const token = randomUUID();
    const cfg = await calculator.createTaskPushNotificationConfig({ taskId: t.id, url: hookURL, token, authentication: { scheme: 'Bearer', credentials: 'push-cred' } });
    assert.equal(cfg.url, hookURL);
    const listed = await calculator.listTaskPushNotificationConfig({ taskId: t.id });
    assert.ok(JSON.stringify(listed).includes(hookURL));
    assert.ok(!JSON.stringify(listed).includes(token), 'a read shows the token');
    // The approval wait, then the cancel, change the task's state: each is pushed.
    await until('the approval wait', async () => statusData((await calculator.getTask({ id: t.id })).status)?.waitingForApproval);
    await calculator.cancelTask({ id: t.id });
    const n = await until('a signed notification', async () => received.find((x) => x.body.includes(t.id) && x.body.includes('ancel')));
    verifyPush(n, token);
  });
}

// A2A 1.0: the client picks the interface from the card.
for (const transport of ['JSONRPC', 'HTTP+JSON']) {
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: [transport] }));
  const helpdesk = await factory.createFromUrl(base);
  const calculator = await factory.createFromUrl(`${base}/a2a/calculator/.well-known/agent-card.json`, '');
  assert.equal(helpdesk.protocolVersion, '1.0');
  await suite(`1.0 ${transport}`, helpdesk, calculator, { list: true });
  await pushSuite(`1.0 ${transport}`, calculator);
}

// A2A 0.3: the SDK's 0.3 JSON-RPC transport (message/send, tasks/get, tasks/cancel,
// message/stream, tasks/resubscribe).
{
  const factory = new ClientFactory();
  const cardOf = async (url) => (await factory.createFromUrl(url, '')).getAgentCard();
  const helpdeskCard = await cardOf(`${base}/.well-known/agent-card.json`);
  const calculatorCard = await cardOf(`${base}/a2a/calculator/.well-known/agent-card.json`);
  const legacy = (card) => new Client(new LegacyJsonRpcTransport({ endpoint: card.supportedInterfaces.find((i) => i.protocolVersion === '0.3').url }), card);
  await suite('0.3 JSONRPC', legacy(helpdeskCard), legacy(calculatorCard), { list: false });
  await pushSuite('0.3 JSONRPC', legacy(calculatorCard));
}

receiver.close();
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
