"""Work on a resource bound to another host: pass it on, or take the resource over.

``Local::*`` resources live on one machine (``resource.host``) and their checks go to that
host's queue. A check may still reach a worker elsewhere: a machine-local bus delivers
every message to its own process, a row's host may change after its traversal routed the
message, a message may be misrouted. Acting there would make, change or delete the thing
on the wrong machine (a file made twice, a delete that finds nothing and leaks the real
one), so the worker acts only where the resource lives, or where it can no longer live:

- a live worker process recorded the resource's host: the work is that host's. It is sent
  to that host's queue (a bus that reaches hosts), or left for that host otherwise (for a
  sweeper whose bus reaches it to re-send); nothing is done here.
- no live worker has that host: no machine of that name is serving any more. Typically
  this very machine was renamed since the row was written (the embedded mode over a state
  file never moves), or that machine is gone for good; waiting would wait forever. The
  resource is taken over: its row records this host, so its later work comes here.
"""

from __future__ import annotations

import logging

from converge.engine import liveness
from converge.engine.context import EngineContext
from converge.messages import CheckResource
from converge.records import ResourceRecord

log = logging.getLogger("converge.engine.host_binding")


async def on_this_host(
    ctx: EngineContext, message: CheckResource, row: ResourceRecord
) -> ResourceRecord | None:
    """The row to act on here (taken over when its host serves no more), or None when the
    work belongs to the worker of another host (passed on to it) or the takeover lost to
    another change of the row (whoever made it goes on)."""
    if row.host is None or row.host == ctx.host:
        return row
    where = {"resource": row.name, "resource_host": row.host, "host": ctx.host}
    if await worker_alive_on(ctx, row.host):
        if ctx.bus.reaches_other_hosts:
            log.warning("work for a resource of another host: sent to that host", extra=where)
            await ctx.bus.send_work(message.to_dict(), host=row.host)
        else:
            log.warning(
                "work for a resource of another host left for that host's workers: this "
                "process's bus cannot reach them (give it the same --broker)",
                extra=where,
            )
        return None
    log.warning(
        "no worker serves the resource's host any more: taking the resource over here",
        extra=where,
    )
    return await ctx.store.update_resource(row.id, row.atomic_key, {"host": ctx.host}, current=row)


async def worker_alive_on(ctx: EngineContext, host: str) -> bool:
    """Whether another process with the worker role on ``host`` is alive now."""
    alive = await liveness.live_services(
        ctx.store,
        ctx.engine_id,
        ctx.clock.now(),
        ctx.settings.engine_stale_after,
        host=ctx.host,
    )
    return any(service.host == host and "worker" in service.roles for service in alive)
