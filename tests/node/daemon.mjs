// Starts a daemon for a Node test and stops it afterwards.
//   fake: tests/server/fake_daemon.cpp (real HTTP layer + worker over the FakeEngine)
//   tiny: `k3serve serve` on the tiny synthetic model (written once per test process into a
//         private directory under $K3_TEST_TMP, removed at exit: never a half-written or stale
//         model left by another run)
//   agent: the same on `make-model --preset agent` (64k context: the coding agents' first
//         prompts are 12k-41k tokens)
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';

function need(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run this test through ctest (scripts/test.sh)`);
  return v;
}

let scratchRoot = null;
// A directory private to this test process, removed at exit.
export function scratchDir(name) {
  if (!scratchRoot) {
    mkdirSync(need('K3_TEST_TMP'), { recursive: true });
    scratchRoot = mkdtempSync(path.join(need('K3_TEST_TMP'), 'node-'));
    process.on('exit', () => rmSync(scratchRoot, { recursive: true, force: true }));
  }
  const dir = path.join(scratchRoot, name);
  mkdirSync(dir, { recursive: true });
  return dir;
}

const models = {};
function syntheticModel(bin, preset) {
  if (models[preset]) return models[preset];
  const dir = path.join(scratchDir('models'), preset);
  const made = spawnSync(bin, ['make-model', dir, '--preset', preset], { encoding: 'utf8' });
  if (made.status !== 0) throw new Error(`make-model failed: ${made.stderr}`);
  models[preset] = dir;
  return dir;
}

// With K3_TEST_RANKS=N (N > 1) the real daemon is rank 0 of an `mpirun` job of N ranks on this
// machine, the others `k3serve rank` on the same model (docs/operations.md "Several machines");
// stop() then sends SIGTERM to rank 0 alone, which drains and ends the job, so mpirun exits 0
// only when every rank ended cleanly.
function mpiJob(bin, model, serveArgs) {
  const ranks = Number(process.env.K3_TEST_RANKS);
  return ['mpirun', ['--allow-run-as-root', '--oversubscribe', '--bind-to', 'none', '--enable-recovery',
    '--mca', 'btl', 'self,tcp', '--mca', 'btl_tcp_if_include', 'lo', '--mca', 'oob_tcp_if_include', 'lo',
    '-n', '1', bin, ...serveArgs, ':', '-n', String(ranks - 1), bin, 'rank', model, '--threads', '1']];
}

// Rank 0's pid under mpirun: the child whose command line is `k3serve serve ...`.
function rankZeroPid(launcherPid) {
  const children = readFileSync(`/proc/${launcherPid}/task/${launcherPid}/children`, 'utf8').trim().split(/\s+/);
  for (const c of children) {
    const argv = readFileSync(`/proc/${c}/cmdline`, 'utf8').split('\0');
    if (argv[1] === 'serve') return Number(c);
  }
  return launcherPid;
}

// Resolves with {url, port, proc, stop()} once the daemon prints its listening line
// (and, for the real daemon, once /health says ok). With K3_WEB_DIR set, both daemons serve the
// UI's own files from that directory (--web-dir): tests/node/web_ui_against.sh runs the UI
// tests against an older web/ that way, to show that a test fails without the change it covers.
export async function startDaemon(kind, extraArgs = []) {
  let cmd, args;
  if (process.env.K3_WEB_DIR) extraArgs = [...extraArgs, '--web-dir', process.env.K3_WEB_DIR];
  if (kind === 'fake') {
    cmd = need('K3_FAKE_DAEMON');
    args = extraArgs;
  } else {
    cmd = need('K3SERVE_BIN');
    args = ['serve', syntheticModel(cmd, kind), '--port', '0', '--threads', kind === 'agent' ? '2' : '1', ...extraArgs];
    if (Number(process.env.K3_TEST_RANKS || 1) > 1) [cmd, args] = mpiJob(cmd, args[1], args);
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
      if (cmd === 'mpirun') process.kill(rankZeroPid(proc.pid), 'SIGTERM');
      else proc.kill('SIGTERM');
    }),
  };
}
