"""Work messages acknowledged in runs (``amqp_bus._Acknowledgements``), without a broker.

The broker closes a channel on an acknowledgement of a delivery tag it no longer holds:
one acknowledged alone after a ``multiple`` acknowledgement already covered it. Checks
that finish in bursts (statements sent in batches) made two flushes overlap that way.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from converge.adapters.amqp_bus import _Acknowledgements


@dataclass(eq=False)
class _Channel:
    is_closed: bool = False
    acked: set[int] = field(default_factory=set)  # tags the broker no longer holds
    delivered: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@dataclass
class _Message:
    channel: _Channel
    delivery_tag: int

    async def ack(self, multiple: bool = False) -> None:
        await asyncio.sleep(0)  # a frame written: other tasks run meanwhile
        await asyncio.sleep(0)
        tags = (
            [t for t in self.channel.delivered if t <= self.delivery_tag]
            if multiple
            else [self.delivery_tag]
        )
        if not multiple and self.delivery_tag in self.channel.acked:
            self.channel.errors.append(f"unknown delivery tag {self.delivery_tag}")
        self.channel.acked.update(tags)


async def test_overlapping_flushes_never_ack_a_tag_already_covered() -> None:
    channel = _Channel()
    acks = _Acknowledgements()
    deliveries = []
    for tag in range(1, 41):
        channel.delivered.append(tag)
        deliveries.append(acks.delivered(_Message(channel, tag)))  # type: ignore[arg-type]
    # A burst finishes behind an unfinished elder (tag 1): each acknowledged alone...
    for delivery in deliveries[5:20]:
        acks.done(delivery)
    await asyncio.sleep(0)  # the first flush has decided its frames and is sending them
    # ...then the elder and the rest finish: one ``multiple`` covers them all.
    for delivery in deliveries[:5] + deliveries[20:]:
        acks.done(delivery)
    await acks.sent()
    for _ in range(100):
        await asyncio.sleep(0)
    assert channel.errors == []
    assert channel.acked == set(range(1, 41))
