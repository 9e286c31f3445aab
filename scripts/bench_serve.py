"""Load on mt-serve: requests of 1-20 lines from 1, 8 and 32 concurrent clients for a fixed time each,
against a server started here on 127.0.0.1; then requests/s, lines/s, latency percentiles, errors and the
server's memory, beside the ceiling: the same checkpoint translating the same lines in one call, as
`translate` does a file, measured before and after each load level (the ratio is against their mean, so
that a machine whose speed drifts compares like with like).

    python scripts/bench_serve.py --checkpoint runs/multi30k.de-en/smoke/checkpoints/final.pt \\
        --lines data/multi30k/test2016.de [--seconds 60] [--clients 1 8 32] [--json out.json]

The client is asyncio with one keep-alive connection per simulated client; each client sends its next
request when the last one is answered (closed loop), so at most `clients` requests are in flight.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--lines", default=str(REPO / "data/multi30k/test2016.de"), help="source lines to send")
    p.add_argument("--seconds", type=float, default=60.0, help="load time per concurrency level")
    p.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    p.add_argument("--max-request-lines", type=int, default=20)
    p.add_argument("--beam", type=int, help="the server's beam (default: the checkpoint's)")
    p.add_argument("--server-args", default="", help="more mt-serve flags, e.g. '--max-wait-ms 10'")
    p.add_argument("--json", help="write the figures here")
    return p.parse_args(argv)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def post(reader, writer, body: bytes) -> tuple[int, bytes]:
    """One HTTP/1.1 request on a kept-alive connection: (status, body)."""
    head = f"POST /translate HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
    writer.write(head.encode() + b"\r\n\r\n" + body)
    await writer.drain()
    status = int((await reader.readline()).split()[1])
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    return status, await reader.readexactly(length)


async def client(port, lines, rng, deadline, most, results):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while time.monotonic() < deadline:
            size = rng.randint(1, most)
            start = rng.randrange(len(lines) - size)
            batch = lines[start : start + size]
            sent = time.perf_counter()
            try:
                status, body = await post(reader, writer, json.dumps({"lines": batch}).encode())
                ok = status == 200 and len(json.loads(body)["translations"]) == size
            except (OSError, ValueError, asyncio.IncompleteReadError):
                ok = False
                writer.close()
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            results.append((time.perf_counter() - sent, size, ok))
    finally:
        writer.close()


async def load(port, lines, clients, seconds, most, pid):
    results, memory = [], []
    deadline = time.monotonic() + seconds

    async def watch():
        while time.monotonic() < deadline:
            memory.append(rss_mb(pid))
            await asyncio.sleep(0.5)

    started = time.perf_counter()
    await asyncio.gather(
        watch(), *(client(port, lines, random.Random(1000 + i), deadline, most, results) for i in range(clients))
    )
    wall = time.perf_counter() - started
    latencies = sorted(r[0] for r in results)

    def pct(q):
        return 1000 * latencies[min(len(latencies) - 1, int(q * len(latencies)))] if latencies else float("nan")

    return {
        "clients": clients,
        "seconds": round(wall, 1),
        "requests": len(results),
        "errors": sum(not r[2] for r in results),
        "requests_per_s": round(len(results) / wall, 2),
        "lines_per_s": round(sum(r[1] for r in results if r[2]) / wall, 1),
        "latency_ms": {"p50": round(pct(0.5), 1), "p95": round(pct(0.95), 1), "p99": round(pct(0.99), 1)},
        "mean_ms": round(1000 * statistics.fmean(latencies), 1) if latencies else None,
        "server_rss_mb": {"first": round(memory[0]), "last": round(memory[-1]), "peak": round(max(memory))},
        "server_rss_mb_each_minute": [round(m) for m in memory[::120]],  # sampled every 0.5 s
    }


def ceiling(args, lines) -> dict:
    """The same checkpoint translating the lines in one call (as `translate` does a file), in a process of
    its own, so that the server's figures and this one never share the two cores."""
    code = (
        "import json, sys, time\n"
        "import mt\n"
        "args = json.loads(sys.argv[1])\n"
        "translator = mt.load_translator(args['checkpoint'], beam=args['beam'])\n"
        "lines = open(args['lines'], encoding='utf-8').read().splitlines()\n"
        "translator.translate(lines[:50])\n"
        "start = time.perf_counter()\n"
        "out = translator.translate(lines)\n"
        "print(json.dumps({'lines': len(out), 'seconds': time.perf_counter() - start}))\n"
    )
    given = json.dumps({"checkpoint": args.checkpoint, "beam": args.beam, "lines": args.lines})
    result = subprocess.run([sys.executable, "-c", code, given], capture_output=True, text=True, check=True)
    found = json.loads(result.stdout.splitlines()[-1])
    return {
        "lines": found["lines"],
        "seconds": round(found["seconds"], 2),
        "lines_per_s": round(found["lines"] / found["seconds"], 1),
    }


def main(argv=None):
    args = parse_args(argv)
    lines = [x for x in Path(args.lines).read_text(encoding="utf-8").splitlines() if x.strip()]

    def measure_ceiling():
        top = ceiling(args, lines)
        print(f"translate, one call: {top['lines']} lines in {top['seconds']} s = {top['lines_per_s']} lines/s")
        return top

    tops = [measure_ceiling()]
    port = free_port()
    command = [str(Path(sys.executable).parent / "mt-serve"), "-c", args.checkpoint, "--port", str(port)]
    command += ["--log-level", "warning", "--max-lines", str(max(64, args.max_request_lines))]
    command += (["--beam", str(args.beam)] if args.beam else []) + args.server_args.split()
    server = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(600):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None:
                    raise SystemExit(f"mt-serve exited: {server.stderr.read()}") from None
                time.sleep(0.1)
        asyncio.run(load(port, lines, 2, 5, args.max_request_lines, server.pid))  # warm-up
        levels = []
        for clients in args.clients:
            level = asyncio.run(load(port, lines, clients, args.seconds, args.max_request_lines, server.pid))
            tops.append(measure_ceiling())  # the server idles meanwhile
            level["vs_translate"] = round(
                level["lines_per_s"] / statistics.fmean(t["lines_per_s"] for t in tops[-2:]), 3
            )
            levels.append(level)
            lat = level["latency_ms"]
            mem = level["server_rss_mb"]
            print(
                f"{clients:>3} clients: {level['requests']} requests ({level['errors']} errors), "
                f"{level['requests_per_s']} req/s, {level['lines_per_s']} lines/s = {level['vs_translate']:.0%} of "
                f"translate; latency p50 {lat['p50']} / p95 {lat['p95']} / p99 {lat['p99']} ms; server RSS "
                f"{mem['first']} -> {mem['last']} MB (peak {mem['peak']}; each minute "
                f"{' '.join(map(str, level['server_rss_mb_each_minute']))})",
                flush=True,
            )
    finally:
        server.terminate()
        server.wait(timeout=60)
    if args.json:
        figures = {"translate": tops, "levels": levels}
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
