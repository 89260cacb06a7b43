// What the browser tests share: child processes whose output is kept for failure
// messages, a bounded poll, and an orderly stop.
import { spawn } from 'node:child_process';

export const WAIT = 60_000; // the bound of every wait: a failure, not a measurement
export const chromiumPath = process.env.CHROMIUM || '/usr/bin/chromium';

const procs = [];
export const logs = {};

// start spawns bin, keeping its stdout and stderr in logs[name].
export function start(name, bin, args, env = {}) {
  const p = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  logs[name] = '';
  p.stdout.on('data', (d) => { logs[name] += d; });
  p.stderr.on('data', (d) => { logs[name] += d; });
  procs.push(p);
  return p;
}

// waitFor polls check (which may be async) until it answers something truthy, at most WAIT.
export function waitFor(what, check) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what}: not within ${WAIT} ms\n${JSON.stringify(logs, null, 1)}`)), WAIT);
    const poll = async () => {
      const v = await check();
      if (v) { clearTimeout(timer); resolve(v); } else setTimeout(poll, 50);
    };
    poll();
  });
}

// stopAll ends the started processes, the last started first, waiting for each.
export async function stopAll() {
  for (const p of procs.reverse()) {
    if (p.exitCode === null && p.signalCode === null) {
      const gone = new Promise((resolve) => p.once('exit', resolve));
      p.kill('SIGTERM');
      await gone;
    }
  }
}
