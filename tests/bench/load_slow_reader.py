#!/usr/bin/env python3
"""Normal clients' token rate alone, beside one slow reader, and beside an idle flood.

  load_slow_reader.py --port P [--clients 2] [--max-tokens 512] [--rounds 15] [--flood 600]
                      [--slow-heads 200] [--flood-addresses 4]

Each phase runs --clients streamed completions at once (ignore_eos, --max-tokens each) and takes
each client's token rate (its chunks over the time from its request to its last token); the phases
take turns, once a round, for --rounds rounds. Phases: "alone"; "beside a reader" (one more
client asks for a long stream with logprobs and reads it); "slow reader" (the same request,
never read, its connection held); "idle flood" (--flood sockets that connect and never send a
byte, and --slow-heads that send a request head a line a second and never end it, spread over
--flood-addresses loopback addresses 127.0.0.2, .3, ..., held by a process of its own; each one
the daemon closes (its first-byte or head deadline) is opened again at once, so the flood stands
for the whole phase). The phases' order is shuffled each round (--seed).
A slow reader is judged against the same request read normally (each takes a slot while the
daemon computes for it), an idle flood against "alone". Client k of a phase is compared with
client k of its baseline in the same round (the median over the rounds of their ratio): every
client's ratio must be >= 0.8. Prints the
median rate of each phase, the worst client's ratio, how many flood sockets stood during the
flood phases (ours, and the daemon's k3serve:http_connections_open), and the load average;
exit 1 when a ratio is below 0.8 or a normal stream did not finish.
"""
import argparse
import json
import multiprocessing
import os
import random
import selectors
import socket
import statistics
import sys
import threading
import time

HOST = "127.0.0.1"


def stream_rate(port, max_tokens, client, out, failures):
    body = json.dumps({"prompt": "x", "max_tokens": max_tokens, "stream": True, "ignore_eos": True,
                       "temperature": 0}).encode()
    s = socket.create_connection((HOST, port), timeout=600)
    sent = time.monotonic()
    s.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body)
    buf, times, done = b"", [], False
    while True:
        data = s.recv(65536)
        if not data:
            break
        now = time.monotonic()
        buf += data
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            i = event.find(b"data: ")
            if i < 0:
                continue
            payload = event[i + 6:]
            if payload.startswith(b"[DONE]"):
                done = True
            elif b'"text"' in payload:
                times.append(now)
    s.close()
    if not done or len(times) < 2:
        failures.append(f"stream ended early ({len(times)} chunks, done={done})")
        return
    # Tokens over the time from the request to the last token: what the client waited for them
    # (a reader thread that runs late sees chunks in bursts, which would shorten a first-to-last
    # span).
    out.append((client, len(times) / max(1e-9, times[-1] - sent)))


def phase(port, args):
    rates, failures = [], []
    for _ in range(args.rounds):
        threads = [threading.Thread(target=stream_rate, args=(port, args.max_tokens, k, rates, failures))
                   for k in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return rates, failures


LONG_REQUEST = {"prompt": "x", "max_tokens": 3000, "stream": True, "logprobs": 5, "ignore_eos": True}


def send_long_request(port, receive_buffer=0):
    s = socket.socket()
    if receive_buffer:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    s.connect((HOST, port))
    body = json.dumps(LONG_REQUEST).encode()
    s.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body)
    return s


def slow_reader(port):
    return send_long_request(port, 4096)  # never read


def normal_reader(port):
    """The same long request, read as fast as it comes (what the slow reader would cost if it read)."""
    s = send_long_request(port)

    def drain():
        try:
            while s.recv(65536):
                pass
        except OSError:  # our own shutdown at the phase's end may reset it
            pass
        s.close()
    t = threading.Thread(target=drain)
    t.start()
    return s, t


def metric(port, name):
    c = socket.create_connection((HOST, port), timeout=30)
    c.sendall(f"GET /metrics HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n".encode())
    data = b""
    while True:
        chunk = c.recv(65536)
        if not chunk:
            break
        data += chunk
    c.close()
    for line in data.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return -1


def keep_flood(port, kinds, addresses, stop, ready, out):
    """The flood, in a process of its own (so it takes nothing from the measured clients'
    process): holds one socket per entry of `kinds` ("silent": never sends a byte; "slow head":
    a request head a line a second, never ended), from `addresses` in turn, opening again each
    one the daemon closes, until `stop` is set; then puts (sockets standing each second, reopened)
    on `out`. `ready` is set once every socket stands (or after 10 s)."""
    sel = selectors.DefaultSelector()
    lines = {}  # socket -> head lines sent

    def open_one(i):
        s = socket.socket()
        s.setblocking(False)
        s.bind((addresses[i % len(addresses)], 0))
        s.connect_ex((HOST, port))
        sel.register(s, selectors.EVENT_READ, i)
        lines[s] = 0
        return s

    def connected(s):
        try:
            s.getpeername()
            return True
        except OSError:
            return False

    socks = [open_one(i) for i in range(len(kinds))]
    standing, reopened, started = [], 0, time.monotonic()
    last_tick = 0.0
    while not stop.is_set():
        for key, _ in sel.select(timeout=0.2):
            s, i = key.fileobj, key.data
            try:
                data = s.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data = b""
            if not data:  # closed by the daemon (a deadline, a cap): open it again
                sel.unregister(s)
                del lines[s]
                s.close()
                socks[i] = open_one(i)
                reopened += 1
        now = time.monotonic()
        if now - last_tick >= 1.0 or not ready.is_set():
            n = sum(1 for s in socks if connected(s))
            if not ready.is_set() and (n == len(socks) or now - started > 10):
                ready.set()
            if now - last_tick < 1.0:
                continue
            last_tick = now
            standing.append(n)
            for i, s in enumerate(socks):
                if kinds[i] != "slow head":
                    continue
                line = f"GET /health HTTP/1.1\r\nHost: {HOST}\r\n" if lines[s] == 0 else f"X-Slow-{lines[s]}: a\r\n"
                try:
                    s.send(line.encode())
                    lines[s] += 1
                except OSError:
                    pass
    for s in socks:
        s.close()
    out.put((standing, reopened))


class Flood:
    """--flood silent sockets and --slow-heads from --flood-addresses loopback addresses
    (127.0.0.2, .3, ...), standing from start() to stop() (keep_flood, in its own process)."""

    def __init__(self, port, silent, slow_heads, addresses):
        self.args = (port, ["silent"] * silent + ["slow head"] * slow_heads,
                     [f"127.0.0.{2 + i}" for i in range(max(1, addresses))])
        self.stop_event, self.ready, self.out = multiprocessing.Event(), multiprocessing.Event(), multiprocessing.Queue()
        self.standing, self.reopened = [], 0

    def start(self):
        self.proc = multiprocessing.Process(target=keep_flood,
                                            args=(*self.args, self.stop_event, self.ready, self.out))
        self.proc.start()
        self.ready.wait(30)

    def stop(self):
        self.stop_event.set()
        self.standing, self.reopened = self.out.get(timeout=60)
        self.proc.join()


def wait_until(pred):
    """Polls a state of the daemon (a request running, none running) until it holds."""
    while not pred():
        time.sleep(0.02)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--flood", type=int, default=600)
    ap.add_argument("--slow-heads", type=int, default=200)
    ap.add_argument("--flood-addresses", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1, help="for the order of the phases in each round")
    args = ap.parse_args()

    # The phases take turns, round after round, so that a change in the machine's load during
    # the run falls on all of them alike (a shared machine's load moves within a minute), in an
    # order shuffled each round (seeded), so that what one phase leaves behind does not always
    # fall on the same next one. Each phase starts once the daemon runs nothing.
    rates = {"alone": [], "beside a reader": [], "slow reader": [], "idle flood": []}
    failures, standing, daemon_open, reopened = [], [], [], 0
    one_round = argparse.Namespace(**{**vars(args), "rounds": 1})
    running = lambda: metric(args.port, "llamacpp:requests_processing")
    order = random.Random(args.seed)
    for round_ in range(args.rounds):
        names = list(rates)
        order.shuffle(names)
        for name in names:
            wait_until(lambda: running() == 0)
            held = drained = flood = None
            if name == "slow reader":
                held = slow_reader(args.port)
            elif name == "beside a reader":
                held, drained = normal_reader(args.port)
            elif name == "idle flood":
                flood = Flood(args.port, args.flood, args.slow_heads, args.flood_addresses)
                flood.start()
                daemon_open.append(metric(args.port, "k3serve:http_connections_open"))
            if held:
                wait_until(lambda: running() >= 1)
            r, f = phase(args.port, one_round)
            rates[name] += [(round_, k, x) for k, x in r]
            failures += f
            if drained:
                held.shutdown(socket.SHUT_RDWR)
                drained.join()
            elif held:
                held.close()
            if flood:
                daemon_open.append(metric(args.port, "k3serve:http_connections_open"))
                flood.stop()
                standing += flood.standing
                reopened += flood.reopened

    results = {name: statistics.median([x for _, _, x in r]) if r else 0 for name, r in rates.items()}
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average {load}; {args.clients} clients x {args.rounds} rounds x {args.max_tokens} tokens, "
          f"phases in turn, shuffled each round")
    if standing:
        print(f"flood: {args.flood} silent + {args.slow_heads} slow-head sockets from {args.flood_addresses} addresses; "
              f"standing during the phases min {min(standing)} mean {statistics.mean(standing):.0f}, "
              f"{reopened} reopened after the daemon closed them; daemon's connections open "
              f"{', '.join(str(int(x)) for x in daemon_open)}")
    # A slow reader is judged against the same request read normally (both take a slot for
    # as long as the daemon computes for them), an idle flood against the clients alone. Client
    # k's ratio is the median over the rounds of its rate over its baseline's in the same round
    # (the load moves less within a round than between rounds).
    baselines = {"alone": "alone", "beside a reader": "alone", "slow reader": "beside a reader",
                 "idle flood": "alone"}
    ok = True
    for name, rate in results.items():
        base_name = baselines[name]
        base = {(rnd, k): x for rnd, k, x in rates[base_name]}
        per_client = {}
        for rnd, k, x in rates[name]:
            if base.get((rnd, k)):
                per_client.setdefault(k, []).append(x / base[(rnd, k)])
        ratios = {k: statistics.median(v) for k, v in per_client.items()}
        worst = min(ratios.values(), default=0)
        print(f"  {name:16s} {rate:8.1f} tokens/s per client (median)   ratio {statistics.median(ratios.values()) if ratios else 0:.2f} "
              f"to {base_name}, worst client {worst:.2f}   (rates: {' '.join(f'{x:.0f}' for _, _, x in rates[name])})")
        if name in ("slow reader", "idle flood"):
            ok = ok and worst >= 0.8
    for f in failures[:10]:
        print("  failure:", f)
    ok = ok and not failures
    print("RESULT:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
