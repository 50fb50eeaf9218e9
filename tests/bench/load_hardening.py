#!/usr/bin/env python3
"""Hostile and careless clients at once against a running daemon (loopback only, bounded).

  load_hardening.py --port P [--streams 64] [--dribblers 64] [--idle 64] [--silent 0]
                    [--requests 2] [--max-tokens 16] [--duration 0] [--time-limit 600]

* streams: clients that each run --requests streamed chat completions one after another (or, with
  --duration S, keep going for S seconds). Each must either finish ([DONE] after a finish_reason)
  or be refused with 503 + Retry-After. Time to first token is measured on the finished ones.
* dribblers: connections that send one header line per second and never finish their request
  (slowloris); when the daemon answers (408) and closes, they reconnect and start over.
* idle: keep-alive connections that send one request, then sit idle like an SDK's pool; when the
  daemon closes one, it reconnects and does it again.
* silent: an idle flood of connections that never send a byte, from four loopback addresses
  (127.0.0.2-5, as other clients would); when the daemon closes one (its first-byte deadline, or
  to make room), it connects again.
* a /health probe on a fresh connection every 250 ms: each must answer 200 within 1 s.

Prints a summary (and JSON with --json PATH). Exit code 1 when a generation ended any other way,
or /health failed or was slower than 1 s.
"""
import argparse
import asyncio
import json
import os
import statistics
import sys
import time

HOST = "127.0.0.1"


def percentile(values, p):
    if not values:
        return float("nan")
    values = sorted(values)
    k = min(len(values) - 1, max(0, int(round(p / 100.0 * (len(values) - 1)))))
    return values[k]


class Stats:
    def __init__(self):
        self.completed = 0
        self.refused = 0
        self.refused_without_retry_after = 0
        self.failed = []
        self.ttft = []
        self.health_ms = []
        self.health_failures = 0
        self.dribbler_answers = {}
        self.idle_reconnects = 0
        self.silent_reconnects = 0


async def read_head(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    return status, headers


async def read_body(reader, headers):
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";")[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                return body
            body += await reader.readexactly(size)
            await reader.readexactly(2)
    n = int(headers.get("content-length", "0"))
    return await reader.readexactly(n)


async def one_stream(port, i, max_tokens, stats):
    body = json.dumps({"messages": [{"role": "user", "content": f"Tell me something, client {i}."}],
                       "max_tokens": max_tokens, "stream": True}).encode()
    req = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
           f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body
    t0 = time.monotonic()
    try:
        reader, writer = await asyncio.open_connection(HOST, port)
        writer.write(req)
        await writer.drain()
        status, headers = await read_head(reader)
        if status == 503:
            stats.refused += 1
            if "retry-after" not in headers:
                stats.refused_without_retry_after += 1
            writer.close()
            return
        if status != 200:
            stats.failed.append(f"status {status}")
            writer.close()
            return
        # Chunked SSE: parse chunk by chunk, look at data events.
        first = None
        finished = done = False
        buf = b""
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";")[0], 16)
            if size == 0:
                break
            buf += await reader.readexactly(size)
            await reader.readexactly(2)
            while b"\n\n" in buf:
                event, buf = buf.split(b"\n\n", 1)
                if not event.startswith(b"data: "):
                    continue
                data = event[6:]
                if data == b"[DONE]":
                    done = True
                    continue
                j = json.loads(data)
                if "error" in j:
                    stats.failed.append("stream error: " + j["error"].get("message", "?"))
                    continue
                for c in j.get("choices", []):
                    if c.get("delta", {}).get("content") and first is None:
                        first = time.monotonic() - t0
                    if c.get("finish_reason"):
                        finished = True
        writer.close()
        if finished and done:
            stats.completed += 1
            if first is not None:
                stats.ttft.append(first)
        else:
            stats.failed.append(f"stream ended without finish_reason/[DONE] (finished={finished}, done={done})")
    except Exception as e:  # a reset or a protocol error is a failure of the daemon
        stats.failed.append(f"{type(e).__name__}: {e}")


async def streamer(port, i, args, stats, stop_at):
    n = 0
    while True:
        if args.duration > 0:
            if time.monotonic() >= stop_at:
                return
        elif n >= args.requests:
            return
        await one_stream(port, i, args.max_tokens, stats)
        n += 1


async def dribbler(port, stats, stop):
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection(HOST, port)
            writer.write(b"GET /health HTTP/1.1\r\n")
            await writer.drain()
            k = 0
            answer = None
            while not stop.is_set():
                try:
                    line = await asyncio.wait_for(reader.readline(), timeout=1.0)
                    answer = line.decode("latin-1").split(" ")[1] if line else "closed"
                    break
                except asyncio.TimeoutError:
                    writer.write(f"X-Slow-{k}: {'a' * 10}\r\n".encode())
                    await writer.drain()
                    k += 1
            writer.close()
            if answer:
                stats.dribbler_answers[answer] = stats.dribbler_answers.get(answer, 0) + 1
        except (ConnectionError, OSError):
            stats.dribbler_answers["reset"] = stats.dribbler_answers.get("reset", 0) + 1
            await asyncio.sleep(0.5)


async def until_closed(reader, stop):
    """Waits until the daemon closes the connection or the run ends."""
    while not stop.is_set():
        try:
            if not await asyncio.wait_for(reader.read(1), timeout=1.0):
                return
        except asyncio.TimeoutError:
            pass


async def idler(port, stats, stop):
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection(HOST, port)
            writer.write(f"GET /v1/models HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
            await writer.drain()
            status, headers = await read_head(reader)
            await read_body(reader, headers)
            # Idle until the daemon closes it (its keep-alive timeout) or the run ends.
            await until_closed(reader, stop)
            writer.close()
            stats.idle_reconnects += 1
        except (ConnectionError, OSError):
            await asyncio.sleep(0.5)


async def silent(port, i, stats, stop):
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection(HOST, port, local_addr=(f"127.0.0.{2 + i % 4}", 0))
            await until_closed(reader, stop)
            writer.close()
            stats.silent_reconnects += 1
        except (ConnectionError, OSError):
            await asyncio.sleep(0.5)


async def health_probe(port, stats, stop):
    while not stop.is_set():
        t0 = time.monotonic()
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, port), timeout=2.0)
            writer.write(f"GET /health HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n".encode())
            await writer.drain()
            status, headers = await asyncio.wait_for(read_head(reader), timeout=2.0)
            writer.close()
            ms = (time.monotonic() - t0) * 1000
            stats.health_ms.append(ms)
            if status != 200:
                stats.health_failures += 1
        except Exception:
            stats.health_failures += 1
            stats.health_ms.append((time.monotonic() - t0) * 1000)
        await asyncio.sleep(0.25)


async def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--dribblers", type=int, default=64)
    ap.add_argument("--idle", type=int, default=64)
    ap.add_argument("--silent", type=int, default=0)
    ap.add_argument("--requests", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--duration", type=float, default=0, help="seconds of continuous load instead of --requests")
    ap.add_argument("--time-limit", type=float, default=600)
    ap.add_argument("--json", help="write the summary here too")
    args = ap.parse_args()

    stats = Stats()
    stop = asyncio.Event()
    t0 = time.monotonic()
    background = [asyncio.create_task(dribbler(args.port, stats, stop)) for _ in range(args.dribblers)]
    background += [asyncio.create_task(idler(args.port, stats, stop)) for _ in range(args.idle)]
    background += [asyncio.create_task(silent(args.port, i, stats, stop)) for i in range(args.silent)]
    background.append(asyncio.create_task(health_probe(args.port, stats, stop)))
    await asyncio.sleep(1.0)  # let the slow clients take their places first
    stop_at = time.monotonic() + args.duration
    streams = [asyncio.create_task(streamer(args.port, i, args, stats, stop_at)) for i in range(args.streams)]
    done, pending = await asyncio.wait(streams, timeout=args.time_limit)
    for t in pending:
        t.cancel()
        stats.failed.append("time limit")
    stop.set()
    await asyncio.gather(*background, return_exceptions=True)
    elapsed = time.monotonic() - t0

    summary = {
        "elapsed_s": round(elapsed, 1),
        "load_average": os.getloadavg(),
        "streams": args.streams, "dribblers": args.dribblers, "idle": args.idle, "silent": args.silent,
        "completed": stats.completed, "refused_503": stats.refused,
        "refused_without_retry_after": stats.refused_without_retry_after,
        "failed": len(stats.failed), "failures": stats.failed[:10],
        "ttft_p50_s": round(percentile(stats.ttft, 50), 3), "ttft_p95_s": round(percentile(stats.ttft, 95), 3),
        "health_probes": len(stats.health_ms), "health_failures": stats.health_failures,
        "health_max_ms": round(max(stats.health_ms), 1) if stats.health_ms else None,
        "health_p99_ms": round(percentile(stats.health_ms, 99), 1),
        "dribbler_answers": stats.dribbler_answers, "idle_reconnects": stats.idle_reconnects,
        "silent_reconnects": stats.silent_reconnects,
    }
    print(json.dumps(summary, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    ok = (not stats.failed and stats.refused_without_retry_after == 0 and stats.health_failures == 0
          and (not stats.health_ms or max(stats.health_ms) < 1000))
    print("RESULT:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
