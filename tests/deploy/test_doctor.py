#!/usr/bin/env python3
"""`k3serve doctor`: the machine facts it reports agree with the machine, the plans it proposes
for a model agree with the model's sizes, and it refuses (exit 3) when nothing fits. `k3serve
plan`, which projects with the same model: a plan for every budget that fits (the real K3 at
128/256 GB included: auto once refused those), none below the smallest."""
import re
import json, os, shutil, subprocess, tempfile, unittest

BIN = os.environ.get('K3SERVE_BIN', 'build/k3serve')


def doctor(*args):
    r = subprocess.run([BIN, 'doctor', '--json', '--seconds', '0.3', *args], capture_output=True, text=True, timeout=120)
    return r.returncode, (json.loads(r.stdout) if r.stdout.strip().startswith('{') else None), r.stderr


class Doctor(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix='k3-doctor-', dir=os.environ.get('K3_TEST_TMP'))
        cls.model = os.path.join(cls.tmp, 'tiny')
        subprocess.run([BIN, 'make-model', cls.model, '--preset', 'tiny'], check=True, capture_output=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_machine_facts(self):
        rc, j, err = doctor(self.model)
        self.assertEqual(rc, 0, err)
        self.assertEqual(j['cpu']['logical_cpus'], os.cpu_count())
        self.assertLessEqual(j['cpu']['physical_cores'], os.cpu_count())
        self.assertIn(j['cpu']['kernels'], ('scalar', 'avx2', 'avx512', 'neon'))
        flags = open('/proc/cpuinfo').read()
        if j['cpu']['kernels'] == 'avx512':
            self.assertIn('avx512f', flags)
        if os.uname().machine == 'aarch64':
            self.assertEqual(j['cpu']['kernels'], 'neon')
        meminfo = dict(l.split(':') for l in open('/proc/meminfo'))
        self.assertEqual(j['memory']['total_bytes'], int(meminfo['MemTotal'].split()[0]) * 1024)
        st = os.statvfs(self.model)
        self.assertAlmostEqual(j['disk']['free_bytes'], st.f_bavail * st.f_frsize, delta=1 << 30)
        self.assertGreater(j['disk']['sequential_gbps'], 0)
        self.assertGreater(j['memory']['bandwidth_gbps'], 0)
        self.assertIn(j['transparent_hugepages']['enabled'], ('always', 'madvise', 'never'))

    def test_a_small_model_runs_resident(self):
        rc, j, err = doctor(self.model, '--disk-gbps', '1', '--mem-gbps', '10')
        self.assertEqual(rc, 0, err)
        self.assertTrue(j['can_run'])
        self.assertEqual(j['recommended'], 'resident')
        self.assertEqual(j['plans'][0]['disk_bytes_per_token'], 0)
        self.assertIn(f'k3serve serve {self.model}', j['next'])

    def test_real_k3_plans_follow_memory(self):
        common = ('--disk', self.tmp, '--disk-gbps', '2', '--mem-gbps', '20')
        plans = {}
        for gb in (12, 128, 256):
            rc, j, err = doctor(*common, '--memory-gb', str(gb))
            self.assertIsNotNone(j, err)
            # The 1.56 TB checkpoint does not fit on this machine's disk: exit 3, saying so.
            self.assertEqual(rc, 3)
            self.assertTrue(any('of disk' in p for p in j['problems']), j['problems'])
            self.assertEqual(j['model']['name'], 'Kimi K3 (built-in config)')
            self.assertAlmostEqual(j['model']['trunk_bytes'] / 1e9, 108.8, delta=1.0)   # spec: ~109 GB bf16 trunk
            self.assertTrue(all(p['memory_bytes'] <= 0.95 * gb * 1e9 for p in j['plans']))
            plans[gb] = j
        # 12 GB: the laptop preset (trunk 3 GB, cache 1 GB) fits: its byte ring holds the 2.34 GB
        # layer 0 (two uniform slots of it, 4.68 GB, did not fit in 3 GB).
        self.assertEqual(plans[12]['recommended'], 'laptop')
        self.assertEqual(plans[128]['recommended'], 'workstation')
        self.assertEqual(plans[256]['recommended'], 'max')
        minimal = plans[12]['plans'][0]
        # With a ring of 3 GB the whole trunk streams: at least trunk - 5 GB per token.
        self.assertGreater(minimal['disk_bytes_per_token'], plans[12]['model']['trunk_bytes'] - 5e9)
        self.assertIn('--preset laptop', plans[12]['next'])
        # Each plan's prompt (32,768 tokens by default) in passes of the plan's size: as many as
        # it takes, each reading the weights once (docs/performance.md, "Prefill passes").
        for gb, j in plans.items():
            for p in j['plans']:
                self.assertGreater(p['prefill_pass_tokens'], 0, p)
                self.assertEqual(p['prefill_passes'], -(-32768 // p['prefill_pass_tokens']), (gb, p))
                self.assertGreater(p['prefill_pass_read_bytes'], 0, (gb, p))
        # at 256 GB the max preset's pass is larger than the 12 GB laptop's: fewer passes
        self.assertLess(plans[256]['plans'][0]['prefill_passes'], plans[12]['plans'][0]['prefill_passes'])
        best = plans[256]['plans'][0]
        self.assertLess(best['seconds_per_token'], minimal['seconds_per_token'] / 2)
        self.assertLess(best['disk_bytes_per_token'], minimal['disk_bytes_per_token'])
        # At 1 GB no plan fits at all.
        rc, j1, _ = doctor(*common, '--memory-gb', '1')
        self.assertEqual(rc, 3)
        self.assertEqual(j1['plans'], [])
        self.assertTrue(any('no memory plan fits' in p for p in j1['problems']))

    def test_text_report_and_usage_error(self):
        r = subprocess.run([BIN, 'doctor', self.model, '--seconds', '0.3'], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('recommended: resident', r.stdout)
        self.assertIn('passes x tokens', r.stdout)
        self.assertIn('next: k3serve verify', r.stdout)
        r = subprocess.run([BIN, 'doctor', '--bogus'], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown option '--bogus'", r.stderr)


class Plan(unittest.TestCase):
    def plan(self, *args):
        r = subprocess.run([BIN, 'plan', *args], capture_output=True, text=True, timeout=120)
        return r.returncode, r.stdout, r.stderr

    def test_real_k3_at_four_budgets(self):
        rc, out, err = self.plan('--memory-gb', '8,32,128,256', '--disk-gbps', '1', '--mem-gbps', '20', '--gflops', '40')
        self.assertEqual(rc, 0, err + out)
        sections = dict(re.findall(r'^(\d+) GB:\n((?:  .*\n?)+)', out, re.M))
        self.assertEqual(sorted(sections, key=int), ['8', '32', '128', '256'], out)
        # 8 GB: the trunk streams through a byte ring that holds layer 0 (2.34 GB) alone and two
        # of the 1.27 GB layers; the reads it cannot overlap are charged.
        self.assertRegex(sections['8'], r'0/93 layers pinned \(0\.00 GB\) \+ ring 3\.\d+ GB \(reads up to \d layers? ahead')
        self.assertRegex(sections['8'], r'layer reads not overlapped with compute: \+[\d.]+ s')
        total, avail = map(float, re.search(r'total ([\d.]+) GB of ([\d.]+) GB available', sections['8']).groups())
        self.assertLessEqual(total, 0.95 * avail)
        per_token = {}
        for gb in ('8', '32', '128', '256'):
            self.assertNotIn('no plan', sections[gb], sections[gb])
            per_token[gb] = float(re.search(r'expected ([\d.]+) s/token', sections[gb]).group(1))
            self.assertRegex(sections[gb], r'prefill: a \d+-token pass reads')
        # More memory: fewer bytes from the disk, fewer seconds a token.
        self.assertGreater(per_token['8'], per_token['32'])
        self.assertGreater(per_token['32'], per_token['128'])
        self.assertGreaterEqual(per_token['128'], per_token['256'])
        # A compressed trunk streams fewer bytes at the budget where the trunk streams.
        _, packed, _ = self.plan('--memory-gb', '32', '--disk-gbps', '1', '--mem-gbps', '20', '--gflops', '40',
                                 '--compress-ratio', '0.75')
        self.assertLess(float(re.search(r'expected ([\d.]+) s/token', packed).group(1)), per_token['32'])

    def test_ranks(self):
        # Expert parallelism over N machines like the one described (cli/rank_projection.h).
        machine = ['--memory-gb', '128', '--disk-gbps', '7', '--mem-gbps', '33', '--gflops', '40',
                   '--attention-gflops', '40', '--prompt-tokens', '10000']
        rc, one, err = self.plan(*machine)
        self.assertEqual(rc, 0, err + one)
        # One rank is today's plan, to the byte.
        rc, same, err = self.plan(*machine, '--ranks', '1')
        self.assertEqual((rc, same), (0, one), err)
        one_token = float(re.search(r'expected ([\d.]+) s/token', one).group(1))
        one_first = float(re.search(r'time to first token, 10000-token prompt: ([\d.]+) s', one).group(1))

        def ranks(n, gbit):
            rc, out, err = self.plan(*machine, '--ranks', str(n), '--net-gbit', str(gbit))
            self.assertEqual(rc, 0, err + out)
            self.assertTrue(out.startswith(one), 'the one-machine plan comes first, unchanged')
            part = out[len(one):]
            self.assertIn(f'{n} ranks (each machine at the figures above; network {gbit:g} Gbit/s', part)
            shares = re.findall(r'rank (\d+): ([\d.]+)% of each layer\'s experts( and the trunk)?', part)
            self.assertEqual([int(r) for r, _, _ in shares], list(range(n)), part)
            self.assertAlmostEqual(sum(float(s) for _, s, _ in shares), 100, delta=0.2)
            self.assertEqual([bool(t) for _, _, t in shares], [True] + [False] * (n - 1))
            self.assertRegex(part, r'rank 1: [^\n]*\n +decode: reads [\d.]+ GB per token \(trunk 0\.000,')
            exchange = re.search(r'exchange: ([\d.]+) kB a MoE layer, ([\d.]+) MB a token: ([\d.]+) s a token', part)
            self.assertIsNotNone(exchange, part)
            token = float(re.search(r'expected ([\d.]+) s/token', part).group(1))
            first = float(re.search(r'time to first token, 10000-token prompt: ([\d.]+) s', part).group(1))
            return token, first, float(exchange.group(1)), float(exchange.group(3))

        four_10, first_10, kb_4, net_10 = ranks(4, 10)
        four_25, first_25, _, net_25 = ranks(4, 25)
        _, _, kb_2, _ = ranks(2, 10)
        # Four machines: every disk, memory and set of cores on each token; the network's share
        # shrinks with its speed; more ranks exchange more of a token's rows.
        self.assertLess(four_10, one_token)
        self.assertLess(first_10, one_first)
        self.assertLessEqual(four_25, four_10)
        self.assertLessEqual(first_25, first_10)
        self.assertLess(net_25, net_10)
        self.assertGreater(kb_4, kb_2)
        # A slow enough network makes the exchange the bound: slower than one machine.
        slow, _, _, net_slow = ranks(4, 0.01)
        self.assertGreater(slow, one_token)
        self.assertGreater(slow, net_slow)
        # Too little memory for rank 0: refused, naming the rank.
        rc, out, err = self.plan('--memory-gb', '4', '--disk-gbps', '7', '--mem-gbps', '33', '--gflops', '40',
                                 '--ranks', '2')
        self.assertEqual(rc, 1, err + out)
        self.assertIn('2 ranks: no plan: rank 0: --preset auto: MemAvailable is', out)
        # Machines unlike: each rank's memory and disk; rank 3's slow disk bounds the token.
        rc, out, err = self.plan(*machine, '--ranks', '4', '--rank-memory-gb', '256,64,64,64',
                                 '--rank-disk-gbps', '7,7,7,2')
        self.assertEqual(rc, 0, err + out)
        part = out[len(one):]
        self.assertIn("each machine's memory and disk as given", part)
        self.assertRegex(part, r'rank 0: [^\n]*machine 256 GB, disk 7\.00 GB/s')
        self.assertRegex(part, r'rank 3: [^\n]*machine 64 GB, disk 2\.00 GB/s')
        self.assertGreater(float(re.search(r'expected ([\d.]+) s/token', part).group(1)), four_10)
        for bad in (['--ranks', '0'], ['--ranks', '2', '--net-gbit', '0'], ['--ranks', '2', '--net-latency-us', '-1'],
                    ['--ranks', '4', '--rank-memory-gb', '128,64'], ['--rank-disk-gbps', '7,7'],
                    ['--ranks', '2', '--rank-disk-gbps', '7,0']):
            rc, _, err = self.plan('--memory-gb', '128', *bad)
            self.assertEqual(rc, 2, bad)

    def test_measures_a_model_directory(self):
        model = os.path.join(tempfile.mkdtemp(prefix='k3-plan-', dir=os.environ.get('K3_TEST_TMP')), 'tiny')
        subprocess.run([BIN, 'make-model', model, '--preset', 'tiny'], check=True, capture_output=True)
        try:
            rc, out, err = self.plan(model, '--trunk-gb', '0.001', '--cache-gb', '0.01', '--seconds', '0.3')
            self.assertEqual(rc, 0, err + out)
            self.assertIn('measured', out)
            self.assertIn('explicit budgets:', out)
            self.assertRegex(out, r'expected [\d.]+ s/token')
            rc, _, err = self.plan(model, '--compress-ratio', '2')
            self.assertEqual(rc, 2)
            self.assertIn('--compress-ratio', err)
        finally:
            shutil.rmtree(os.path.dirname(model), ignore_errors=True)


if __name__ == '__main__':
    unittest.main(verbosity=2)
