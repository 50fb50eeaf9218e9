#!/usr/bin/env python3
"""Normal clients' token rate alone, beside one slow reader, and beside an idle flood.

  load_slow_reader.py --port P [--clients 2] [--max-tokens 256] [--rounds 3] [--flood 2000]

Each phase runs --clients streamed completions at once (ignore_eos, --max-tokens each), --rounds
times, and takes each client's token rate (chunks from its first to its last token over that
time). Phases: "alone"; "slow reader" (one more client asks for a long stream with logprobs,
reads nothing, and holds its connection); "idle flood" (--flood sockets that connect and never
send a byte, kept open). Prints the median rate of each phase and its ratio to "alone" with the
load average; exit 1 when a phase's ratio is below 0.8 or a normal stream did not finish.
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


def slow_reader(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect((HOST, port))
    body = json.dumps({"prompt": "x", "max_tokens": 3000, "stream": True, "logprobs": 5,
                       "ignore_eos": True}).encode()
    s.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\n\r\n").encode() + body)
    return s  # never read


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--flood", type=int, default=2000)
    args = ap.parse_args()

    results, ok = {}, True
    alone, failures = phase(args.port, args)
    results["alone"] = statistics.median(alone) if alone else 0
    held = [slow_reader(args.port)]
    time.sleep(0.5)  # let it take its slot and fill its buffers
    rates, f2 = phase(args.port, args)
    failures += f2
    results["slow reader"] = statistics.median(rates) if rates else 0
    for s in held:
        s.close()
    flood = []
    for _ in range(args.flood):
        try:
            flood.append(socket.create_connection((HOST, args.port), timeout=5))
        except OSError:
            break
    rates, f3 = phase(args.port, args)
    failures += f3
    results["idle flood"] = statistics.median(rates) if rates else 0
    for s in flood:
        s.close()

    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average {load}; {args.clients} clients x {args.rounds} rounds x {args.max_tokens} tokens; "
          f"flood {len(flood)} sockets")
    for name, rate in results.items():
        ratio = rate / results["alone"] if results["alone"] else 0
        print(f"  {name:12s} {rate:8.1f} tokens/s per client   ratio {ratio:.2f}")
        ok = ok and ratio >= 0.8
    for f in failures[:10]:
        print("  failure:", f)
    ok = ok and not failures
    print("RESULT:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
