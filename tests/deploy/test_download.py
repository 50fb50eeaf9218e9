#!/usr/bin/env python3
"""`k3serve download` against a fake hub on loopback (fake_hub.py) serving a tiny model made by
`k3serve make-model`: a full download that `verify` accepts, an interrupted transfer resumed
with a byte range, a truncated local file completed, a corrupted transfer fetched again, an
unknown revision, a missing token (401), and a token that never shows in the output."""
import filecmp, os, shutil, signal, subprocess, sys, tempfile, unittest

BIN = os.environ.get('K3SERVE_BIN', 'build/k3serve')
HERE = os.path.dirname(os.path.abspath(__file__))
TOKEN = 'hf_secret_token_do_not_print'


class Hub:
    def __init__(self, root, *extra):
        self.log = tempfile.mktemp(prefix='hub-log-')
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, 'fake_hub.py'), root, '--token', TOKEN,
                                      '--log', self.log, *extra], stdout=subprocess.PIPE, text=True)
        self.url = 'http://127.0.0.1:' + self.proc.stdout.readline().strip()

    def requests(self):
        return open(self.log).read().splitlines() if os.path.exists(self.log) else []

    def close(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(10)
        if os.path.exists(self.log):
            os.remove(self.log)


class Download(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix='k3-download-', dir=os.environ.get('K3_TEST_TMP'))
        cls.model = os.path.join(cls.tmp, 'source')
        subprocess.run([BIN, 'make-model', cls.model, '--preset', 'tiny', '--seed', '3', '--shards', '2'],
                       check=True, capture_output=True)
        cls.shards = sorted(f for f in os.listdir(cls.model) if f.endswith('.safetensors'))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.dest = tempfile.mkdtemp(prefix='dest-', dir=self.tmp)
        self.hubs = []

    def tearDown(self):
        for h in self.hubs:
            h.close()

    def hub(self, *extra):
        h = Hub(self.model, *extra)
        self.hubs.append(h)
        return h

    def download(self, hub, *extra, token=True):
        env = dict(os.environ)
        env.pop('HF_TOKEN', None)
        env['HOME'] = self.tmp  # no ~/.cache/huggingface/token of the machine's
        if token:
            env['HF_TOKEN'] = TOKEN
        r = subprocess.run([BIN, 'download', 'acme/tiny-k3', self.dest, '--endpoint', hub.url, *extra],
                           capture_output=True, text=True, env=env, timeout=300)
        self.assertNotIn(TOKEN, r.stdout + r.stderr)
        return r

    def assertSameTree(self):
        for f in os.listdir(self.model):
            self.assertTrue(filecmp.cmp(os.path.join(self.model, f), os.path.join(self.dest, f), shallow=False), f)
        self.assertEqual([f for f in os.listdir(self.dest) if f.endswith('.part')], [])

    def test_full_download_is_verified(self):
        h = self.hub()
        r = self.download(h)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertSameTree()
        self.assertIn('verified', r.stdout + r.stderr)
        # Every file was fetched under the pinned commit, with the token.
        resolves = [l for l in h.requests() if '/resolve/' in l]
        self.assertEqual(len(resolves), len(os.listdir(self.model)))
        self.assertTrue(all('auth=yes' in l and '/resolve/main/' not in l for l in resolves))
        # A second run fetches nothing.
        r = self.download(h)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len([l for l in h.requests() if '/resolve/' in l]), len(resolves))

    def test_interrupted_transfer_resumes_with_a_range(self):
        shard = self.shards[0]
        half = os.path.getsize(os.path.join(self.model, shard)) // 2
        h = self.hub('--cut', f'{shard}:{half}')
        r = self.download(h)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertSameTree()
        ranged = [l for l in h.requests() if shard in l and f'range=bytes={half}-' in l]
        self.assertEqual(len(ranged), 1, h.requests())

    def test_truncated_local_file_is_completed(self):
        h = self.hub()
        self.assertEqual(self.download(h).returncode, 0)
        shard = self.shards[1]
        path = os.path.join(self.dest, shard)
        size = os.path.getsize(path)
        with open(path, 'r+b') as f:
            f.truncate(size // 3)
        before = len(h.requests())
        r = self.download(h)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertSameTree()
        fetched = [l for l in h.requests()[before:] if '/resolve/' in l]
        self.assertEqual(len(fetched), 1)
        self.assertIn(f'{shard} range=bytes={size // 3}-', fetched[0])

    def test_wrong_hash_is_fetched_again(self):
        shard = self.shards[0]
        h = self.hub('--corrupt', shard)
        r = self.download(h)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('do not match', r.stderr)
        self.assertSameTree()
        self.assertEqual(len([l for l in h.requests() if f'/{shard} ' in l]), 2)

    def test_corrupt_small_file_fails_after_retries(self):
        # config.json is a small (non-LFS) file: its git blob id is checked; a hub that keeps
        # sending wrong bytes makes the download fail, and no bad file is left in place.
        h = self.hub('--corrupt', 'config.json')
        r = self.download(h, '--retries', '1')
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn('config.json', r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dest, 'config.json')))

    def test_unknown_revision(self):
        r = self.download(self.hub(), '--revision', 'no-such-branch')
        self.assertEqual(r.returncode, 2)
        self.assertIn("no revision 'no-such-branch'", r.stderr)

    def test_missing_token_is_401(self):
        r = self.download(self.hub(), token=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn('HTTP 401', r.stderr)
        self.assertIn('HF_TOKEN', r.stderr)

    def test_token_file(self):
        tf = os.path.join(self.tmp, 'token')
        with open(tf, 'w') as f:
            f.write(TOKEN + '\n')
        r = self.download(self.hub(), '--token-file', tf, '--include', '*.json', '--no-verify', token=False)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.exists(os.path.join(self.dest, 'config.json')))
        self.assertFalse(any(f.endswith('.safetensors') for f in os.listdir(self.dest)))


if __name__ == '__main__':
    unittest.main(verbosity=2)
