"""When the sweeper may re-send a traversal's ready work: only once the traversal stalls.

A ready node that no worker has reported yet is either queued on the broker, being
checked, or lost (a process died between committing a report and sending the next check;
a message was dropped). The sweeper cannot see the broker's queue, but it can see whether
the traversal moves: while new reports keep arriving, queued work is being done and the
edge-triggered path is alive, so re-sending would only duplicate the queue. A lost
trigger leaves its traversal with nothing more to report once the rest of its work is
done: that traversal goes quiet, and its ready work is re-sent then.

A traversal is *stalled* when ``patience`` sweeps in a row found its count of reported
nodes unchanged, and the workers are not busy elsewhere: a traversal's work queued behind
another's (five nested stacks of 20,000 leaves each published one after the other: the
last four wait for the first) is quiet too, and re-sending it only doubles the queue. So
while anything else moves (``observe_activity``: the newest event id of the whole state),
a quiet traversal is stalled only once it has been quiet for ``busy_patience`` sweeps,
which bounds how long lost work waits while the workers are busy (it has to be long: in
the 100,000-resource benchmark nested stacks waited 30 s and more for their turn). After
a re-send its patience doubles (up to ``longest_patience``), so work that was only slow
(long actions) is not re-sent at every sweep; a report brings the patience back to
where it started.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class _Watched:
    reported: int
    quiet: int  # sweeps in a row that found no new report
    patience: int  # quiet sweeps before the traversal counts as stalled


class StallWatch:
    """The progress of the traversals one sweeper looks at, sweep after sweep.

    Each sweep calls ``observe`` once per traversal it looks at, then ``forget_others``;
    ``resent`` after re-sending a stalled traversal's work.
    """

    def __init__(
        self, patience: int = 2, longest_patience: int = 32, busy_patience: int | None = None
    ) -> None:
        busy_patience = longest_patience if busy_patience is None else busy_patience
        if patience < 1 or longest_patience < patience or busy_patience < patience:
            raise ValueError(
                f"patience {patience} must be at least 1 and at most the longest "
                f"patience {longest_patience} and the busy patience {busy_patience}"
            )
        self.patience = patience
        self.longest_patience = longest_patience
        self.busy_patience = busy_patience
        self._watched: dict[str, _Watched] = {}
        self._seen: set[str] = set()
        self._suspected: set[str] = set()
        self._activity: int | None = None
        self._idle_sweeps = 0  # sweeps in a row that found no work done anywhere

    def observe_activity(self, marker: int) -> None:
        """Once per sweep, before ``observe``: a value that moves whenever work is done
        anywhere (the newest event's id)."""
        if marker == self._activity:
            self._idle_sweeps += 1
        else:
            self._activity, self._idle_sweeps = marker, 0

    def observe(self, traversal: str, reported: int) -> None:
        """This sweep found ``reported`` nodes of ``traversal`` reported."""
        self._seen.add(traversal)
        watched = self._watched.get(traversal)
        if watched is None:
            self._watched[traversal] = _Watched(reported, 0, self.patience)
        elif reported != watched.reported:
            watched.reported, watched.quiet, watched.patience = reported, 0, self.patience
        else:
            watched.quiet += 1

    def stalled(self, traversal: str) -> bool:
        """Whether the traversal has been quiet for its patience: its ready work may be lost."""
        if traversal in self._suspected:
            return True
        watched = self._watched.get(traversal)
        if watched is None or watched.quiet < watched.patience:
            return False
        # Quiet while other work moves: queued behind it, unless quiet for very long.
        idle = self._activity is None or self._idle_sweeps >= self.patience
        return idle or watched.quiet >= self.busy_patience

    def suspected(self, traversal: str) -> bool:
        """Whether the traversal counts as stalled because a worker is gone this sweep."""
        return traversal in self._suspected

    def resent(self, traversal: str) -> None:
        """The stalled traversal's ready work was sent again: wait longer before the next time."""
        watched = self._watched.get(traversal)
        if watched is not None:
            watched.quiet = 0
            if traversal not in self._suspected:  # sent because it was slow, not a death
                watched.patience = min(watched.patience * 2, self.longest_patience)

    def suspect_all(self) -> None:
        """A worker is gone: the checks it held (continued ones have no message the broker
        could give back) are lost, so every traversal watched counts as stalled, even
        while it moves, until the end of the next sweep (``forget_others``)."""
        self._suspected |= self._watched.keys()

    def forget_others(self) -> None:
        """End of a sweep: drop the traversals it did not look at (finished, another
        sweeper's share); a traversal seen again later starts afresh."""
        for traversal in self._watched.keys() - self._seen:
            del self._watched[traversal]
        self._suspected = set()
        self._seen = set()
