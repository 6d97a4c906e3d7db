"""Cleaning up what a test left on the RabbitMQ broker."""

from __future__ import annotations

import contextlib

import aio_pika


async def delete_namespace(url: str, namespace: str, hosts: tuple[str, ...] = ()) -> None:
    """Delete a namespace's work queues (shared and per host) and its notification exchange.

    Each channel is closed before the connection: closing only the connection leaves the
    channels' close callbacks as tasks nobody awaits, destroyed pending with the test's loop.
    """
    connection = await aio_pika.connect(url)
    try:
        queues = (f"{namespace}.work", *(f"{namespace}.work.host.{host}" for host in hosts))
        for queue in queues:
            channel = await connection.channel()
            with contextlib.suppress(aio_pika.exceptions.AMQPError):
                await channel.queue_delete(queue)
                await channel.close()
        channel = await connection.channel()
        with contextlib.suppress(aio_pika.exceptions.AMQPError):
            await channel.exchange_delete(f"{namespace}.notifications")
            await channel.close()
    finally:
        await connection.close()
