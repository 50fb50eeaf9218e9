#!/usr/bin/env python3
"""deploy/haproxy/k3serve.cfg on loopback: two real daemons on the tiny model behind HAProxy.
A conversation keeps going to one daemon (so its second turn reuses cached tokens), different
conversations spread over both, streams pass through, and when one daemon stops the health
check moves its conversations to the other."""
import http.client, json, os, re, shutil, signal, socket, subprocess, sys, tempfile, time, unittest

BIN = os.environ.get('K3SERVE_BIN', 'build/k3serve')
SRC = os.environ.get('K3_SOURCE_DIR', os.path.join(os.path.dirname(__file__), '../..'))
HAPROXY = shutil.which('haproxy') or '/usr/sbin/haproxy'


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def request(port, path, body=None, headers=None, method=None):
    c = http.client.HTTPConnection('127.0.0.1', port, timeout=60)
    h = {'Content-Type': 'application/json', **(headers or {})}
    c.request(method or ('POST' if body is not None else 'GET'), path, json.dumps(body) if body is not None else None, h)
    r = c.getresponse()
    data = r.read().decode()
    c.close()
    return r.status, r.headers, data  # case-insensitive: HAProxy sends header names in lower case


def wait_for(pred, seconds=60):
    end = time.time() + seconds
    while time.time() < end:
        try:
            if pred():
                return True
        except (OSError, AssertionError, KeyError):
            pass  # not up yet, or refused while the balancer notices
        time.sleep(0.1)
    return False


@unittest.skipUnless(os.path.exists(HAPROXY), 'SKIP: haproxy is not installed (scripts/install-deps.sh installs it)')
class LoadBalancer(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix='k3-lb-', dir=os.environ.get('K3_TEST_TMP'))
        model = os.path.join(cls.tmp, 'tiny')
        subprocess.run([BIN, 'make-model', model, '--preset', 'tiny'], check=True, capture_output=True)
        cls.ports = [free_port(), free_port()]
        cls.daemons = [subprocess.Popen([BIN, 'serve', model, '--port', str(p), '--model-alias', 'tiny'],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for p in cls.ports]
        for p in cls.ports:
            assert wait_for(lambda: request(p, '/health')[0] == 200), 'daemon did not become healthy'
        cls.lb_port = free_port()
        cfg = open(os.path.join(SRC, 'deploy/haproxy/k3serve.cfg')).read()
        cfg = cfg.replace('127.0.0.1:8080', f'127.0.0.1:{cls.lb_port}')
        cfg = cfg.replace('127.0.0.1:8081', f'127.0.0.1:{cls.ports[0]}').replace('127.0.0.1:8082', f'127.0.0.1:{cls.ports[1]}')
        cfg = cfg.replace('inter 2s', 'inter 200ms')  # the test waits for the check to notice
        path = os.path.join(cls.tmp, 'haproxy.cfg')
        open(path, 'w').write(cfg)
        subprocess.run([HAPROXY, '-c', '-q', '-f', path], check=True)
        cls.lb = subprocess.Popen([HAPROXY, '-db', '-f', path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert wait_for(lambda: request(cls.lb_port, '/health')[0] == 200)

    @classmethod
    def tearDownClass(cls):
        cls.lb.terminate()
        cls.lb.wait(10)
        for d in cls.daemons:
            if d.poll() is None:
                d.send_signal(signal.SIGTERM)
                d.wait(30)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def chat(self, conversation, messages, stream=False):
        body = {'model': 'tiny', 'messages': messages, 'max_tokens': 4, 'temperature': 0, 'stream': stream}
        if stream:
            body['stream_options'] = {'include_usage': True}
        status, headers, data = request(self.lb_port, '/v1/chat/completions', body, {'X-Conversation-Id': conversation})
        self.assertEqual(status, 200, data)
        return headers['X-K3-Backend'], data

    def test_1_conversation_is_sticky_and_reuses_its_cache(self):
        long_prompt = 'The quick brown fox jumps over the lazy dog. ' * 20
        messages = [{'role': 'user', 'content': long_prompt}]
        backend, data = self.chat('conversation-42', messages)
        reply = json.loads(data)['choices'][0]['message']['content']
        messages += [{'role': 'assistant', 'content': reply}, {'role': 'user', 'content': 'And then?'}]
        backend2, data2 = self.chat('conversation-42', messages)
        self.assertEqual(backend, backend2)
        self.assertGreater(json.loads(data2)['usage']['prompt_tokens_details']['cached_tokens'], 100)

    def test_2_conversations_spread_over_both_daemons(self):
        seen = {self.chat(f'user-{i}', [{'role': 'user', 'content': 'hi'}])[0] for i in range(16)}
        self.assertEqual(seen, {'k3a', 'k3b'})

    def test_3_streams_pass_through(self):
        _, data = self.chat('stream-1', [{'role': 'user', 'content': 'hi'}], stream=True)
        events = [e[6:] for e in data.split('\n\n') if e.startswith('data: ')]
        self.assertEqual(events[-1], '[DONE]')
        self.assertEqual(json.loads(events[-2])['usage']['completion_tokens'], 4)

    def test_4_a_stopped_daemon_is_taken_out(self):
        backend, _ = self.chat('moving', [{'role': 'user', 'content': 'hi'}])
        victim = self.daemons[0 if backend == 'k3a' else 1]
        victim.send_signal(signal.SIGTERM)
        victim.wait(30)
        survivor = 'k3b' if backend == 'k3a' else 'k3a'
        # After the health check marks it down, the conversation is served by the other daemon.
        self.assertTrue(wait_for(lambda: self.chat('moving', [{'role': 'user', 'content': 'hi'}])[0] == survivor, 30))


if __name__ == '__main__':
    unittest.main(verbosity=2)
