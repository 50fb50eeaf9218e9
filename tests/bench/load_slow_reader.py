#!/usr/bin/env python3
"""Normal clients' token rate alone, beside one slow reader, and beside an idle flood.

  load_slow_reader.py --port P [--clients 2] [--max-tokens 256] [--rounds 5] [--flood 2000]

Each phase runs --clients streamed completions at once (ignore_eos, --max-tokens each) and takes
each client's token rate (chunks from its first to its last token over that time); the phases
take turns, once a round, for --rounds rounds. Phases: "alone"; "beside a reader" (one more
client asks for a long stream with logprobs and reads it); "slow reader" (the same request,
never read, its connection held); "idle flood" (--flood sockets that connect and never send a
byte, kept open). A slow reader is judged against the same request read normally (each takes a
slot while the daemon computes for it), an idle flood against "alone". Prints the median rate
of each phase and its ratio with the load average; exit 1 when a ratio is below 0.8 or a normal
stream did not finish.
"""
import argparse
import json
import os
import socket
import statistics
import sys
import threading
import time

HOST = "127.0.0.1"


def stream_rate(port, max_tokens, out, failures):
    body = json.dumps({"prompt": "x", "max_tokens": max_tokens, "stream": True, "ignore_eos": True,
                       "temperature": 0}).encode()
    s = socket.create_connection((HOST, port), timeout=600)
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
    out.append((len(times) - 1) / max(1e-9, times[-1] - times[0]))


def phase(port, args):
    rates, failures = [], []
    for _ in range(args.rounds):
        threads = [threading.Thread(target=stream_rate, args=(port, args.max_tokens, rates, failures))
                   for _ in range(args.clients)]
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
        while s.recv(65536):
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


def wait_until(pred):
    """Polls a state of the daemon (a request running, none running) until it holds."""
    while not pred():
        time.sleep(0.02)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--flood", type=int, default=2000)
    args = ap.parse_args()

    # The phases take turns, round after round, so that a change in the machine's load during
    # the run falls on all of them alike (a shared machine's load moves within a minute). Each
    # phase starts once the daemon runs nothing (the previous phase's long request ended).
    rates = {"alone": [], "beside a reader": [], "slow reader": [], "idle flood": []}
    failures, flooded = [], 0
    one_round = argparse.Namespace(**{**vars(args), "rounds": 1})
    running = lambda: metric(args.port, "llamacpp:requests_processing")
    for _ in range(args.rounds):
        wait_until(lambda: running() == 0)
        r, f = phase(args.port, one_round)
        rates["alone"] += r
        failures += f

        # The same long request, once read normally and once never read.
        for name in ("beside a reader", "slow reader"):
            wait_until(lambda: running() == 0)
            if name == "slow reader":
                held, drained = slow_reader(args.port), None
            else:
                held, drained = normal_reader(args.port)
            wait_until(lambda: running() >= 1)
            r, f = phase(args.port, one_round)
            rates[name] += r
            failures += f
            if drained:
                held.shutdown(socket.SHUT_RDWR)
                drained.join()
            else:
                held.close()

        wait_until(lambda: running() == 0)
        flood = []
        for _ in range(args.flood):
            try:
                flood.append(socket.create_connection((HOST, args.port), timeout=5))
            except OSError:
                break
        flooded = len(flood)
        r, f = phase(args.port, one_round)
        rates["idle flood"] += r
        failures += f
        for s in flood:
            s.close()

    results = {name: statistics.median(r) if r else 0 for name, r in rates.items()}
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average {load}; {args.clients} clients x {args.rounds} rounds x {args.max_tokens} tokens, "
          f"phases in turn; flood {flooded} sockets")
    # A slow reader is judged against the same request read normally (both take a slot for
    # as long as the daemon computes for them), an idle flood against the clients alone.
    baselines = {"alone": "alone", "beside a reader": "alone", "slow reader": "beside a reader",
                 "idle flood": "alone"}
    ok = True
    for name, rate in results.items():
        base = results[baselines[name]]
        ratio = rate / base if base else 0
        print(f"  {name:16s} {rate:8.1f} tokens/s per client (median)   ratio {ratio:.2f} to {baselines[name]}")
        if name in ("slow reader", "idle flood"):
            ok = ok and ratio >= 0.8
    for f in failures[:10]:
        print("  failure:", f)
    ok = ok and not failures
    print("RESULT:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
