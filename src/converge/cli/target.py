"""Where a command's stacks live and who does the work: the state and the broker.

``--state`` (``CONVERGE_STATE``) is a SQLite file or a database URL
(``postgresql://…``); ``--broker`` (``CONVERGE_BROKER``, ``amqp://…``) is the RabbitMQ
that several processes share work through. Without a broker the command's own process
does the work (its in-process bus), as the embedded default always did. With one, the
command starts operations itself — it prepares the template, stores it and plans the
traversal, so errors still point at the user's file and line — and leaves the resource
checks to the ``converge serve`` processes that hold the worker role.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import click

from converge.adapters.urls import without_password
from converge.errors import StoreError, Unavailable

if TYPE_CHECKING:
    from converge.api import Converge
    from converge.engine.settings import EngineSettings

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_NAMESPACE = "converge"
_META_KEY = "converge.broker"
# Every role; a command with a broker runs none of them in the background.
ALL_ROLES = ("engine", "worker", "observer")
EMBEDDED_ROLES = ("engine", "worker")
# How often a command following an operation asks whether a worker is still alive (a
# worker that stops cleanly removes its row at once; a killed one on another host is seen
# when its heartbeat goes stale).
WORKER_CHECK_SECONDS = 2.0


@dataclass(frozen=True)
class Broker:
    url: str
    namespace: str = DEFAULT_NAMESPACE

    def shown(self) -> str:
        return f"{without_password(self.url)} (namespace {self.namespace})"


def is_database_url(state: str) -> bool:
    """A database URL (``postgresql://…``, ``sqlite:///…``) rather than a file path."""
    return "://" in state


def shown_state(state: str) -> str:
    """The state as it may be printed: a URL's password left out."""
    return without_password(state) if is_database_url(state) else state


def _remember(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    if value is not None:
        ctx.meta[f"{_META_KEY}.{param.name}"] = value
    return value


def broker_options(function: F) -> F:
    """``--broker URL`` and ``--broker-namespace NAME``, kept on the click context (so each
    command's signature stays as it was: ``current_broker()`` reads them)."""
    decorators = [
        click.option(
            "--broker",
            envvar="CONVERGE_BROKER",
            metavar="URL",
            expose_value=False,
            callback=_remember,
            help="RabbitMQ (amqp://USER:PASSWORD@HOST/) shared with `converge serve` "
            "processes that do the work (env CONVERGE_BROKER); without it, this process "
            "does the work.",
        ),
        click.option(
            "--broker-namespace",
            envvar="CONVERGE_BROKER_NAMESPACE",
            metavar="NAME",
            expose_value=False,
            callback=_remember,
            help=f"Prefix of the broker's queues and exchange (default {DEFAULT_NAMESPACE}; "
            "env CONVERGE_BROKER_NAMESPACE).",
        ),
    ]
    for decorator in reversed(decorators):
        function = decorator(function)
    return function


def current_broker() -> Broker | None:
    """The running command's broker, if it was given one."""
    context = click.get_current_context(silent=True)
    if context is None:
        return None
    url = context.meta.get(f"{_META_KEY}.broker")
    if not url:
        return None
    namespace = context.meta.get(f"{_META_KEY}.broker_namespace") or DEFAULT_NAMESPACE
    return Broker(url, namespace)


def command_roles(broker: Broker | None) -> tuple[str, ...]:
    """What a one-shot command runs in its own process: everything a traversal needs
    without a broker; with one, nothing in the background (the serving processes check
    resources and sweep; a command that came and went must hold no share of that)."""
    return () if broker is not None else EMBEDDED_ROLES


@contextlib.asynccontextmanager
async def open_state(
    state: str,
    settings: EngineSettings,
    *,
    read_only: bool = False,
    roles: tuple[str, ...] | None = None,
    broker: Broker | None = None,
) -> AsyncIterator[Converge]:
    """A ``Converge`` over ``state`` (a file or a URL) and the command's broker.

    ``roles`` default to ``command_roles``; ``read_only`` runs no engine at all.
    """
    from converge.api import Converge

    broker = broker or current_broker()
    roles = command_roles(broker) if roles is None else roles
    broker_url = broker.url if broker is not None else None
    namespace = broker.namespace if broker is not None else DEFAULT_NAMESPACE
    handle: contextlib.AbstractAsyncContextManager[Converge]
    if is_database_url(state):
        handle = Converge.open(
            state,
            settings=settings,
            broker_url=broker_url,
            broker_namespace=namespace,
            roles=roles,
            read_only=read_only,
        )
    else:
        handle = Converge.embedded(
            state,
            settings=settings,
            read_only=read_only,
            broker_url=broker_url,
            broker_namespace=namespace,
            roles=roles,
        )
    async with handle as cv:
        yield cv


def _no_worker(broker: Broker) -> str:
    return f"no converge worker is alive on this state and broker {broker.shown()}"


def _relies_on_workers(cv: Converge) -> Broker | None:
    """The broker when the work of ``cv`` is done by other processes: none without a
    broker (this process is the worker) or through a server's API (``--url``)."""
    broker = current_broker()
    engine = getattr(cv, "engine", None)  # a RemoteConverge has none
    if broker is None or engine is None or "worker" in engine.roles:
        return None
    return broker


async def require_broker(cv: Converge | None, broker: Broker | None = None) -> None:
    """Refuse to go on when the broker cannot be reached (nothing is started): the work
    could not be sent, and whether workers are alive would tell nothing. ``broker``: the
    one ``cv`` was opened with, when it is not the command's own (``serve``, which may
    have no ``cv`` when it only supervises workers)."""
    from converge import api

    broker = broker or (_relies_on_workers(cv) if cv is not None else None)
    if broker is None:
        return
    try:
        if cv is not None:
            await cv.reach_broker()
        else:
            await api.reach_broker(broker.url, broker.namespace)
    except Unavailable as exc:
        cause = exc.__cause__ or exc
        raise Unavailable(
            f"cannot reach the broker {broker.shown()}: {cause}; nothing was started. Check "
            "--broker (or CONVERGE_BROKER) and that RabbitMQ runs there, and try again"
        ) from exc


async def require_worker(
    cv: Converge,
    stack: str | None = None,
    template: Any = None,
    environments: Sequence[Any] = (),
) -> None:
    """Refuse to start an operation that no process would carry out (nothing is started):
    the broker must answer, and a live process must hold the worker role, also on every
    host where resources of the operation are bound (``Local::*``: their work waits in
    that host's queue). ``stack``: the stack operated on; ``template`` and
    ``environments``: what an apply converges it to."""
    broker = _relies_on_workers(cv)
    if broker is None:
        return
    await require_broker(cv, broker)
    workers = await cv.live_services("worker")
    if not workers:
        raise Unavailable(
            f"{_no_worker(broker)}: nothing would do the work, so nothing was started. Start "
            "one (`converge serve`, or `converge serve --roles worker`) with the same --state "
            "and --broker, and try again"
        )
    serving = {worker.host for worker in workers}
    needed = await cv.hosts_needed(stack, template, environments)
    for host, names in sorted(needed.items()):
        if host not in serving:
            raise Unavailable(
                f"no converge worker is alive on host {host}, where {_bound(names)} (Local::* "
                f"work runs only on its own host; workers are alive on "
                f"{', '.join(sorted(serving))}): "
                "nothing was started. Start one on that host (`converge serve`, or `converge "
                "serve --roles worker`) with the same --state and --broker, and try again"
            )


@contextlib.asynccontextmanager
async def watching_workers(
    cv: Converge, what: str, stack: str | None = None
) -> AsyncIterator[None]:
    """While following an operation, say on stderr when no worker is alive any more, or
    none on a host where resources of ``stack`` are bound (their work waits for one: the
    operation is stored and resumes when a worker starts), and when one is back. Nothing
    to watch without a broker."""
    broker = _relies_on_workers(cv)
    if broker is None:
        yield
        return
    task = asyncio.create_task(_watch(cv, broker, what, stack), name="converge-watch-workers")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _watch(cv: Converge, broker: Broker, what: str, stack: str | None) -> None:
    alive = True
    needed: dict[str, list[str]] | None = None  # read once the operation has its rows
    missing: set[str] = set()
    while True:
        await asyncio.sleep(WORKER_CHECK_SECONDS)
        try:
            workers = await cv.live_services("worker")
            if needed is None:
                needed = await cv.hosts_needed(stack) if stack is not None else {}
        except StoreError:
            continue  # the database is away: following says so and waits for it
        now_alive = bool(workers)
        if alive and not now_alive:
            click.echo(
                f"warning: {_no_worker(broker)}; the {what} waits until one starts (Ctrl-C "
                "stops following it; the operation stays stored)",
                err=True,
            )
        elif now_alive and not alive:
            click.echo(f"note: a worker is alive again; the {what} goes on", err=True)
        alive = now_alive
        serving = {worker.host for worker in workers}
        now_missing = {host for host in needed if host not in serving} if now_alive else set()
        for host in sorted(now_missing - missing):
            click.echo(
                f"warning: no converge worker is alive on host {host}, where "
                f"{_bound(needed[host])}; that work waits until one starts there",
                err=True,
            )
        for host in sorted(missing - now_missing):
            click.echo(f"note: a worker is alive on host {host} again; its work goes on", err=True)
        missing = now_missing


def _bound(names: Sequence[str]) -> str:
    """``note of this operation is bound``, ``a, b and 3 more of this operation are bound``."""
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return f"{shown} of this operation {'is' if len(names) == 1 else 'are'} bound"
