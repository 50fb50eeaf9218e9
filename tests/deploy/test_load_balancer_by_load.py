#!/usr/bin/env python3
"""deploy/haproxy/k3serve-by-load.cfg on loopback: two real daemons on the tiny model with
--agent-port behind HAProxy. HAProxy takes each daemon's weight from its agent: both at 100 when
idle; a daemon running a request on its one slot drops to 50 (the rule of docs/operations.md),
and comes back once the request ends (leastconn divides each daemon's requests in flight by
its weight, so new requests lean to the one with room)."""
import csv, io, os, shutil, socket, subprocess, sys, tempfile, time, unittest

sys.path.insert(0, os.path.dirname(__file__))
from test_load_balancer import BIN, HAPROXY, SRC, free_port, request, wait_for  # noqa: E402


def stat_weights(sock_path):
    """Each server's current weight, from HAProxy's stats socket ("show stat")."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock_path)
    s.sendall(b'show stat\n')
    data = b''
    while chunk := s.recv(65536):
        data += chunk
    s.close()
    rows = csv.DictReader(io.StringIO(data.decode().lstrip('# ')))
    return {r['svname']: int(r['weight']) for r in rows if r['pxname'] == 'daemons' and r['svname'] in ('k3a', 'k3b')}


@unittest.skipUnless(os.path.exists(HAPROXY), 'SKIP: haproxy is not installed (scripts/install-deps.sh installs it)')
class LoadWeighted(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix='k3-lbw-', dir=os.environ.get('K3_TEST_TMP'))
        model = os.path.join(cls.tmp, 'tiny')
        subprocess.run([BIN, 'make-model', model, '--preset', 'tiny'], check=True, capture_output=True)
        cls.ports = [free_port(), free_port()]
        cls.agents = [free_port(), free_port()]
        # One slot each; a request that stops reading is held to its end (an hour's write
        # deadline, a 64 MiB budget), so the busy state lasts as long as the test needs.
        cls.daemons = [subprocess.Popen([BIN, 'serve', model, '--port', str(p), '--agent-port', str(a), '--parallel', '1',
                                         '--threads', '1', '--slow-client-s', '3600', '--client-buffer-kb', '65536'],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                       for p, a in zip(cls.ports, cls.agents)]
        for p in cls.ports:
            assert wait_for(lambda: request(p, '/health')[0] == 200), 'daemon did not become healthy'
        cls.lb_port = free_port()
        cls.sock = os.path.join(cls.tmp, 'haproxy.sock')
        cfg = open(os.path.join(SRC, 'deploy/haproxy/k3serve-by-load.cfg')).read()
        cfg = cfg.replace('127.0.0.1:8080', f'127.0.0.1:{cls.lb_port}')
        cfg = cfg.replace('127.0.0.1:8081', f'127.0.0.1:{cls.ports[0]}').replace('127.0.0.1:8082', f'127.0.0.1:{cls.ports[1]}')
        cfg = cfg.replace('agent-port 9081', f'agent-port {cls.agents[0]}').replace('agent-port 9082', f'agent-port {cls.agents[1]}')
        cfg = cfg.replace('agent-inter 1s', 'agent-inter 100ms')  # the test waits for the agent to be asked
        cfg = cfg.replace('global\n', f'global\n    stats socket {cls.sock} level admin\n', 1)
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
            d.terminate()
            d.wait(30)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_weights_follow_the_agents(self):
        self.assertTrue(wait_for(lambda: stat_weights(self.sock) == {'k3a': 100, 'k3b': 100}, 30), stat_weights(self.sock))
        # A long stream on k3a, straight to the daemon, never read: its one slot is busy.
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(('127.0.0.1', self.ports[0]))
        body = b'{"prompt": "x", "max_tokens": 1000000, "stream": true, "ignore_eos": true}'
        s.sendall(b'POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n'
                  b'Content-Length: ' + str(len(body)).encode() + b'\r\n\r\n' + body)
        self.assertTrue(wait_for(lambda: stat_weights(self.sock) == {'k3a': 50, 'k3b': 100}, 30), stat_weights(self.sock))
        status, _, _ = request(self.lb_port, '/v1/completions', {'prompt': 'hi', 'max_tokens': 2})
        self.assertEqual(status, 200)
        s.close()  # the daemon cancels the stream; the weight comes back
        self.assertTrue(wait_for(lambda: stat_weights(self.sock) == {'k3a': 100, 'k3b': 100}, 30), stat_weights(self.sock))


if __name__ == '__main__':
    unittest.main(verbosity=2)
