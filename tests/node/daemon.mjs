// Starts a daemon for a Node test and stops it afterwards.
//   fake: tests/server/fake_daemon.cpp (real HTTP layer + worker over the FakeEngine)
//   tiny: `k3serve serve` on the tiny synthetic model (written once into $K3_TEST_TMP)
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';

function need(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run this test through ctest (scripts/test.sh)`);
  return v;
}

// Resolves with {url, port, proc, stop()} once the daemon prints its listening line
// (and, for the real daemon, once /health says ok).
export async function startDaemon(kind, extraArgs = []) {
  let cmd, args;
  if (kind === 'fake') {
    cmd = need('K3_FAKE_DAEMON');
    args = extraArgs;
  } else {
    cmd = need('K3SERVE_BIN');
    const dir = path.join(need('K3_TEST_TMP'), 'node-tiny-model');
    if (!existsSync(path.join(dir, 'config.json'))) {
      mkdirSync(path.dirname(dir), { recursive: true });
      const made = spawnSync(cmd, ['make-model', dir, '--preset', 'tiny'], { encoding: 'utf8' });
      if (made.status !== 0) throw new Error(`make-model failed: ${made.stderr}`);
    }
    args = ['serve', dir, '--port', '0', '--threads', '1', ...extraArgs];
  }
  const proc = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  let log = '';
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`daemon did not start:\n${log}`)), 60000);
    const onData = (d) => {
      log += d.toString();
      const m = log.match(/listening on (http:\/\/[0-9.]+:[0-9]+)/);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    };
    proc.stdout.on('data', onData);
    proc.stderr.on('data', onData);
    proc.on('exit', (code) => reject(new Error(`daemon exited with ${code}:\n${log}`)));
  });
  if (kind !== 'fake') {
    for (let i = 0; i < 600; i++) {
      const r = await fetch(url + '/health').catch(() => null);
      if (r && r.ok) break;
      await new Promise((res) => setTimeout(res, 100));
    }
  }
  return {
    url,
    proc,
    log: () => log,
    stop: () => new Promise((resolve) => {
      if (proc.exitCode !== null) return resolve(proc.exitCode);
      proc.on('exit', (code) => resolve(code));
      proc.kill('SIGTERM');
    }),
  };
}
