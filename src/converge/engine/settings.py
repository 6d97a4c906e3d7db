"""Engine settings: intervals, limits and policies, with the defaults of the embedded mode."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from converge.core.heal import HealPolicy


@dataclass(frozen=True)
class EngineSettings:
    # How often each engine looks for ready work that no worker holds (lost messages).
    sweep_interval: float = 2.0
    # Sweeps in a row that must find a traversal without a new report before its ready
    # work counts as lost and is sent again (``core.stall``; doubled after each re-send).
    sweep_patience: int = 2
    # Sweeps a quiet traversal waits while work moves elsewhere (5 min at the default
    # interval): its work is most likely queued behind that work, not lost.
    sweep_busy_patience: int = 150
    # Heartbeat of this engine in the service table; a claim held by an engine whose
    # heartbeat is older than ``engine_stale_after`` is stolen.
    heartbeat_interval: float = 5.0
    engine_stale_after: float = 30.0
    # Resource checks running at once in this process (actions mostly wait on I/O).
    max_concurrent_checks: int = 4096
    # Local continuation: a worker whose finish makes successors ready checks one of them
    # itself (room permitting, and not bound to another host) instead of sending it
    # through the bus and waiting for some worker to receive it; the rest are sent.
    continue_locally: bool = True
    # Work messages a worker process takes from the broker at once (its prefetch); None:
    # as many as it runs at once (``max_concurrent_checks``), since checks mostly wait
    # (1,000 two-second waits on 2 workers took 8 rounds at the former fixed 64).
    work_prefetch: int | None = None
    # Upper bound for one resource action, on top of the stack's timeout (None: none).
    action_timeout: float | None = None
    # Compare updates with observed reality even without ``converge: true``.
    observe_on_update: bool = False
    allowed_roots: tuple[Path, ...] = ()
    plugin_settings: Mapping[str, Any] = field(default_factory=dict)
    # Local::* types (files, directories, processes on this machine): on for the CLI; a
    # server taking templates from the network turns them on only by configuration.
    enable_local_types: bool = True
    # The name of this machine for work bound to a host (``Local::*``: their rows record
    # it, and their work goes to its queue on the broker); None: its host name.
    host: str | None = None
    project_id: str = "default"
    # Drift handling (engine.drift): heal backoff, and how often recorded drift and drift
    # seen while a stack was busy are looked at again.
    heal_policy: HealPolicy = field(default_factory=HealPolicy)
    drift_recheck_interval: float = 5.0
    # Under ``converge serve``, how long a heal waits for more drift of the same stack
    # (a killed server and its defaced page arrive milliseconds apart): one heal for both.
    heal_gather_window: float = 0.05
    # The synchronizer: seconds between full samples of a type (per type, else the default),
    # the limit on one plugin call (list_all, observe) before the sampler reports it stalled,
    # and how many entities one sampler observes at once.
    observe_interval: float = 30.0
    observe_intervals: Mapping[str, float] = field(default_factory=dict)
    observe_timeout: float = 10.0
    observe_concurrency: int = 32

    @property
    def longest_sweep_patience(self) -> int:
        """The most sweeps a traversal's doubled patience may reach: no longer than a dead
        process's claims stand (``engine_stale_after``), so lost work waits at most about
        as long as work held by a dead process on another host."""
        return max(self.sweep_patience, int(self.engine_stale_after // self.sweep_interval))
