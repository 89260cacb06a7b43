// Checks the OpenAPI document (gen/openapiv2/agentplane.swagger.json): it validates as
// Swagger 2.0, and a client built from it (swagger-client resolves every call from the
// document: paths, parameters, bodies, content types) makes real calls to a real
// control plane, started from $AGENTPLANE_BIN on loopback ports. Run by .ci/run:
//   AGENTPLANE_BIN=/path/to/controlplane npm test
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import SwaggerParser from '@apidevtools/swagger-parser';
import SwaggerClient from 'swagger-client';

const here = path.dirname(fileURLToPath(import.meta.url));
const docPath = path.join(here, '..', '..', 'gen', 'openapiv2', 'agentplane.swagger.json');

const agentYAML = `apiVersion: qar/v1
kind: AgentSpec
name: openapi-check
instructions: Answer briefly.
model: m
`;

let proc;
let dataDir;
let api;
let base;

function startServer() {
  const bin = process.env.AGENTPLANE_BIN;
  assert.ok(bin, 'AGENTPLANE_BIN must name the controlplane binary');
  dataDir = mkdtempSync(path.join(tmpdir(), 'agentplane-openapi-'));
  proc = spawn(bin, ['--data-dir', dataDir, '--grpc-addr', '127.0.0.1:0', '--http-addr', '127.0.0.1:0', '--log-level', 'warn'],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`no HTTP address within 30 s:\n${out}`)), 30_000);
    const onData = (d) => {
      out += d;
      const m = /HTTP\/JSON\s+(http:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    proc.stdout.on('data', onData);
    proc.stderr.on('data', onData);
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`controlplane exited (${code}):\n${out}`));
    });
  });
}

before(async () => {
  base = await startServer();
  const spec = JSON.parse(readFileSync(docPath, 'utf8'));
  spec.host = new URL(base).host;
  spec.schemes = ['http'];
  api = (await SwaggerClient({ spec })).apis;
});

after(async () => {
  if (proc && proc.exitCode === null) {
    const exited = new Promise((resolve) => proc.once('exit', resolve));
    proc.kill('SIGTERM');
    const timer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  }
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

// call makes a call through the generated client and returns the response, also
// for an error status (swagger-client throws those).
async function call(op, params = {}, opts = {}) {
  try {
    return await op(params, opts);
  } catch (err) {
    if (err.response) return err.response;
    throw err;
  }
}

function errorInfo(body) {
  return (body?.details ?? []).find((d) => d['@type'] === 'type.googleapis.com/google.rpc.ErrorInfo');
}

test('the document is valid Swagger 2.0', async () => {
  await SwaggerParser.validate(docPath);
});

test('GetCapabilities', async () => {
  const res = await call(api.CapabilityService.CapabilityService_GetCapabilities);
  assert.equal(res.status, 200);
  assert.equal(typeof res.body, 'object');
  assert.equal(res.headers['grpc-metadata-content-type'], undefined, 'the transport content-type leaks');
});

test('ValidateSpec takes the raw YAML document as its body', async () => {
  const ok = await call(api.SpecService.SpecService_ValidateSpec, { document: agentYAML, documentName: 'agent.yaml' },
    { requestContentType: 'application/yaml' });
  assert.equal(ok.status, 200, JSON.stringify(ok.body));
  assert.equal(ok.body.valid, true, JSON.stringify(ok.body));
  const bad = await call(api.SpecService.SpecService_ValidateSpec, { document: 'apiVersion: qar/v1\nkind: AgentSpec\n' },
    { requestContentType: 'application/yaml' });
  assert.equal(bad.status, 200);
  assert.equal(bad.body.valid, false);
  assert.ok(bad.body.errors.length > 0 && bad.body.errors[0].rule_id, JSON.stringify(bad.body));
});

test('StartTask, GetTask, ListTasks by labelSelector, CancelTask, WatchTask', async () => {
  const started = await call(api.TaskService.TaskService_StartTask, {
    body: { requestId: 'openapi-check-1', document: Buffer.from(agentYAML).toString('base64'), input: { parts: [{ text: 'hi' }] }, labels: { env: 'prod' } },
  });
  assert.equal(started.status, 200, JSON.stringify(started.body));
  const id = started.body.task.taskId;
  assert.ok(id);

  const got = await call(api.TaskService.TaskService_GetTask, { taskId: id });
  assert.equal(got.status, 200);
  assert.equal(got.body.task.taskId, id);

  const prod = await call(api.TaskService.TaskService_ListTasks, { labelSelector: ['env=prod'] });
  assert.equal(prod.status, 200);
  assert.deepEqual(prod.body.tasks.map((t) => t.taskId), [id]);
  const dev = await call(api.TaskService.TaskService_ListTasks, { labelSelector: ['env=dev'] });
  assert.equal(dev.status, 200);
  assert.equal((dev.body.tasks ?? []).length, 0);

  const canceled = await call(api.TaskService.TaskService_CancelTask, { taskId: id, body: { reason: 'done' } });
  assert.equal(canceled.status, 200, JSON.stringify(canceled.body));

  // The task has ended, so its watch replays its events and ends.
  const watch = await call(api.TaskService.TaskService_WatchTask, { taskId: id }, { parseResponse: false });
  assert.equal(watch.status, 200);
  assert.match(watch.headers['content-type'], /^application\/x-ndjson/);
  assert.equal(watch.headers['grpc-metadata-content-type'], undefined);
  const text = typeof watch.text === 'string' ? watch.text : await watch.text();
  const lines = text.split('\n').filter((l) => l !== '');
  assert.ok(lines.length > 0);
  for (const l of lines) assert.ok(JSON.parse(l).result, l);
});

test('StartTask takes the spec as a JSON object', async () => {
  const res = await call(api.TaskService.TaskService_StartTask, {
    body: { spec: { apiVersion: 'qar/v1', kind: 'AgentSpec', name: 'openapi-json', instructions: 'Answer briefly.', model: 'm' }, input: { parts: [{ text: 'hi' }] } },
  });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.ok(res.body.task.taskId);
});

test('an error carries its ErrorInfo', async () => {
  const res = await call(api.TaskService.TaskService_GetTask, { taskId: 'no-such-task' });
  assert.equal(res.status, 404);
  const info = errorInfo(res.body);
  assert.equal(info?.domain, 'agentplane.dev', JSON.stringify(res.body));
  assert.equal(info.reason, 'TASK_NOT_FOUND');
});

test('Backup is the bbolt file', async () => {
  const res = await call(api.AdminService.AdminService_Backup, {}, { parseResponse: false });
  assert.equal(res.status, 200);
  assert.equal(res.headers['content-type'], 'application/octet-stream');
  const raw = res.data ?? res.body;
  const bytes = Buffer.from(raw instanceof ArrayBuffer ? raw : await new Response(raw).arrayBuffer());
  assert.equal(String(bytes.length), res.headers['content-length']);
  // bbolt's first meta page: a 16-byte page header, then the magic 0xED0CDAED.
  assert.equal(bytes.readUInt32LE(16), 0xed0cdaed);
});
