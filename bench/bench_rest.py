"""Benchmark: the REST API under load, and how soon a change reaches the change stream.

Starts ``converge api`` in its own process (SQLite, a token), creates a stack of 1,000
``OS::Heat::None`` resources through the API, then measures (1) requests per second for
stack show and for resource list with several keep-alive clients, and (2) the latency from
a resource's status change (mark unhealthy / healthy through the API) to its event on the
Server-Sent Events stream (target under 100 ms). ``--compare-with REV`` also serves a git
revision's package (its ``src`` on PYTHONPATH) for the requests.
Figures go to docs/benchmarks.md (section ``rest``) unless ``--no-write``.
Run: ``python bench/bench_rest.py [--resources N] [--seconds S] [--compare-with REV]
[--no-write]``.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path
from typing import Any

import httpx

from _report import ROOT, git_head, provenance, write_section

CONVERGE = str(Path(sys.executable).with_name("converge"))
TARGET_MS = 100.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_server(
    state: Path, environment: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], str, str]:
    token = subprocess.run(
        [CONVERGE, "token", "create", "--project", "bench", "--state", str(state)],
        capture_output=True,
        text=True,
        check=True,
        env=environment,
    ).stdout.strip()
    port = free_port()
    server = subprocess.Popen(
        [CONVERGE, "api", f"127.0.0.1:{port}", "--state", str(state)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=environment,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(url + "/", timeout=1)
            return server, url, token
        except httpx.HTTPError:
            time.sleep(0.2)
    server.kill()
    raise RuntimeError("converge api did not start in 60 s")


def create_stack(client: httpx.Client, endpoint: str, count: int) -> str:
    template = {
        "heat_template_version": "2016-10-14",
        "resources": {f"r{i:05d}": {"type": "OS::Heat::None"} for i in range(count)},
    }
    created = client.post(f"{endpoint}/stacks", json={"stack_name": "big", "template": template})
    created.raise_for_status()
    stack_id: str = created.json()["stack"]["id"]
    while True:
        shown = client.get(f"{endpoint}/stacks/big/{stack_id}").json()["stack"]
        if not shown["stack_status"].endswith("IN_PROGRESS"):
            assert shown["stack_status"] == "CREATE_COMPLETE", shown["stack_status_reason"]
            return stack_id
        time.sleep(0.5)


def cpu_seconds(pid: int) -> float:
    """User and system CPU time the process has used (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def throughput(
    url: str, token: str, clients: int, seconds: float, server: int
) -> tuple[float, float, float]:
    """Requests per second over ``clients`` threads, the median latency in ms, and the
    server's CPU ms per request (less at the mercy of the machine's other load)."""
    latencies: list[float] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def work() -> None:
        mine: list[float] = []
        with httpx.Client(headers={"X-Auth-Token": token}, timeout=60) as client:
            while time.monotonic() < stop:
                started = time.perf_counter()
                client.get(url).raise_for_status()
                mine.append(time.perf_counter() - started)
        with lock:
            latencies.extend(mine)

    started = time.monotonic()
    cpu_before = cpu_seconds(server)
    threads = [threading.Thread(target=work) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    cpu_ms = (cpu_seconds(server) - cpu_before) * 1000 / len(latencies)
    return len(latencies) / elapsed, statistics.median(latencies) * 1000, cpu_ms


def stream_latency(
    endpoint: str, token: str, stack_id: str, rounds: int
) -> tuple[list[float], list[float]]:
    """ms from the status change's commit (the event's own time) to its event arriving on
    the stream, and from sending the request that makes the change to that arrival."""
    arrivals: queue.Queue[tuple[float, float, dict[str, Any]]] = queue.Queue()
    ready = threading.Event()

    def listen() -> None:
        try:
            with httpx.stream(
                "GET",
                f"{endpoint}/converge/events/stream",
                params={"stack": stack_id},
                headers={"X-Auth-Token": token},
                timeout=httpx.Timeout(60, read=None),
            ) as response:
                for line in response.iter_lines():
                    if line.startswith(":"):
                        ready.set()
                    elif line.startswith("data: "):
                        arrivals.put((time.perf_counter(), time.time(), json.loads(line[6:])))
        except httpx.HTTPError:
            return  # the server stopped once the rounds were done (or a round times out)

    threading.Thread(target=listen, daemon=True).start()
    ready.wait(30)
    latencies: list[float] = []
    round_trips: list[float] = []
    with httpx.Client(headers={"X-Auth-Token": token}, timeout=60) as client:
        for index in range(rounds):
            unhealthy = index % 2 == 0
            sent = time.perf_counter()
            client.patch(
                f"{endpoint}/stacks/big/{stack_id}/resources/r00000",
                json={"mark_unhealthy": unhealthy, "resource_status_reason": f"round {index}"},
            ).raise_for_status()
            while True:
                arrived, wall, data = arrivals.get(timeout=30)
                if data["resource_status_reason"] == f"round {index}":
                    latencies.append((wall - data["timestamp"]) * 1000)
                    round_trips.append((arrived - sent) * 1000)
                    break
            time.sleep(0.05)
    return latencies, round_trips


@dataclass(frozen=True)
class Requests:
    """One server's figures for show and for the resource list."""

    show: tuple[float, float, float]  # requests/s, median ms, server CPU ms per request
    listing: tuple[float, float, float]


def measure_requests(
    args: argparse.Namespace, src: Path | None = None
) -> tuple[Requests, float, list[float], list[float]]:
    """Show and list throughput, the create's seconds and the stream's latencies, against
    this tree's converge or (``src``) another revision's package."""
    environment = None if src is None else {**os.environ, "PYTHONPATH": str(src)}
    with tempfile.TemporaryDirectory(prefix="converge-bench-rest-") as directory:
        server, url, token = start_server(Path(directory) / "state.db", environment)
        try:
            endpoint = f"{url}/v1/bench"
            with httpx.Client(headers={"X-Auth-Token": token}, timeout=600) as client:
                started = time.monotonic()
                stack_id = create_stack(client, endpoint, args.resources)
                created_s = time.monotonic() - started
            show_url = f"{endpoint}/stacks/big/{stack_id}"
            show = throughput(show_url, token, args.clients, args.seconds, server.pid)
            listing = throughput(
                f"{show_url}/resources", token, args.clients, args.seconds, server.pid
            )
            latencies, round_trips = stream_latency(endpoint, token, stack_id, args.rounds)
        finally:
            server.terminate()
            server.wait(30)
    return Requests(show, listing), created_s, latencies, round_trips


def revision_src(revision: str, into: Path) -> Path:
    """``revision``'s ``src`` unpacked under ``into``."""
    archive = subprocess.run(
        ["git", "archive", revision, "src"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def request_rows(label: str, figures: Requests, resources: int) -> list[str]:
    (show_rps, show_ms, show_cpu), (list_rps, list_ms, list_cpu) = figures.show, figures.listing
    return [
        f"| {label} | `GET /stacks/big/{{id}}` (show) | {show_rps:.0f} | {show_ms:.1f} | "
        f"{show_cpu:.1f} |",
        f"| {label} | `GET /stacks/big/{{id}}/resources` ({resources} resources) | "
        f"{list_rps:.1f} | {list_ms:.0f} | {list_cpu:.1f} |",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--resources", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--compare-with", metavar="REV", help="also serve a git revision's src")
    parser.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    figures, created_s, latencies, round_trips = measure_requests(args)
    rows = request_rows(f"this code ({git_head()})", figures, args.resources)
    if args.compare_with:
        with tempfile.TemporaryDirectory(prefix="converge-old-src-") as old:
            before, *_ = measure_requests(args, revision_src(args.compare_with, Path(old)))
        rows += request_rows(f"before ({args.compare_with})", before, args.resources)
    load_after = os.getloadavg()[0]
    median = statistics.median(latencies)
    p95 = sorted(latencies)[max(0, round(len(latencies) * 0.95) - 1)]
    verdict = "met" if p95 < TARGET_MS else "NOT met"
    lines = [
        "## REST API (`bench/bench_rest.py`)",
        "",
        f"`converge api` in its own process (SQLite, token auth), one stack of "
        f"{args.resources} `OS::Heat::None` resources created through the API in "
        f"{created_s:.1f} s. {args.clients} keep-alive clients for {args.seconds:.0f} s "
        "each; the client runs on the same 2 CPUs as the server.",
        "",
        "| code | request | requests/s | median ms | server CPU ms per request |",
        "|---|---|--:|--:|--:|",
        *rows,
        "",
        "The median is the latency of one of the clients' requests, queued behind the "
        "others' on the server's one event loop, so it follows the machine's other load; "
        "the server's CPU time per request much less. The resource list without details "
        "reads only the columns it shows, and `converge serve` leaves the objects made at "
        "startup out of later garbage collections (before, a full collection every few "
        "listings walked them all, costing more than the listing).",
        "",
        "Change stream: a resource's status change (PATCH mark unhealthy, which writes the "
        "status and its event in one transaction) until its event arrives on "
        "`/converge/events/stream` (Server-Sent Events). *Status change → event* starts at "
        "the event's own commit time; *request → event* at sending the PATCH (it adds the "
        "request's own handling):",
        "",
        "| measure | rounds | median ms | p95 ms | max ms | target |",
        "|---|--:|--:|--:|--:|---|",
        f"| status change → event | {len(latencies)} | {median:.1f} | {p95:.1f} | "
        f"{max(latencies):.1f} | < {TARGET_MS:.0f} ms {verdict} |",
        f"| request → event | {len(round_trips)} | {statistics.median(round_trips):.1f} | "
        f"{sorted(round_trips)[max(0, round(len(round_trips) * 0.95) - 1)]:.1f} | "
        f"{max(round_trips):.1f} | |",
        "",
        f"- load average (1 min): {load_before:.1f} when the run started, {load_after:.1f} "
        "when it ended, on 2 CPUs (the machine is shared: figures on an idle one are better)",
        *provenance(),
    ]
    print("\n".join(lines))
    if not args.no_write:
        write_section("rest", lines)
    else:
        print("(not written to docs/benchmarks.md: --no-write)")
    sys.stdout.flush()
    os._exit(0)  # the stream reader thread blocks on a socket the server closed


if __name__ == "__main__":
    main()
