"""How a handle picks its bus: the in-process one, or RabbitMQ's when a broker is given
(imported only then: aio-pika is the optional ``rabbitmq`` extra)."""

from __future__ import annotations

from collections.abc import Collection

from converge.adapters.local_bus import LocalBus
from converge.engine.settings import EngineSettings
from converge.errors import InvalidRequest
from converge.ports import Bus


def _bus(
    broker_url: str | None,
    namespace: str,
    roles: Collection[str],
    *,
    read_only: bool,
    settings: EngineSettings,
) -> Bus:
    """The in-process bus, or RabbitMQ's when a broker is given (``settings.host``: this
    machine's name for work bound to a host, by default its host name)."""
    if broker_url is not None:
        return _amqp_bus(broker_url, namespace, settings)
    if not read_only and "worker" not in roles:
        raise InvalidRequest(
            "without a broker the work is done in this process: it needs the worker role"
        )
    return LocalBus()


async def reach_broker(url: str, namespace: str = "converge") -> None:
    """Connect to the broker at ``url`` and leave: ``Unavailable`` if it cannot be reached
    (a process that only supervises workers checks it before it starts them)."""
    bus = _amqp_bus(url, namespace, EngineSettings())
    try:
        await bus.connect()
    finally:
        await bus.close()


def _amqp_bus(url: str, namespace: str, settings: EngineSettings) -> Bus:
    """The RabbitMQ bus; aio-pika is an optional dependency (the ``rabbitmq`` extra)."""
    try:
        from converge.adapters.amqp_bus import AmqpBus
    except ImportError as exc:
        raise InvalidRequest(
            f"a broker URL needs the RabbitMQ bus: pip install 'converge[rabbitmq]' ({exc})"
        ) from exc
    wanted = settings.work_prefetch or settings.max_concurrent_checks
    prefetch = min(wanted, settings.max_concurrent_checks)
    return AmqpBus(url, namespace=namespace, host=settings.host, prefetch=prefetch)
