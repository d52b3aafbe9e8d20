"""A vault's request stream read piece by piece: the requests of :meth:`Stream.requests`, without holding them all.

:meth:`~trainforge.sim.neurotrainer.compiler.Stream.requests` builds every request of a stream
with the PMAG golden model (about 200 bytes per counter step), which does not fit in memory for
a stream of hundreds of millions of requests (AlexNet C1 BP's gather and BUF Input 2 stream).
:class:`StreamCursor` gives the same requests in order, a bounded number of counter steps at a
time, from :class:`~trainforge.golden.neurotrainer.pmag_steps.ProgramSteps`.
"""
import numpy as np

from ...golden.neurotrainer.pmag_steps import ProgramSteps
from .program import COUNTER_BITS

__all__ = ["StreamCursor"]


class StreamCursor:
    """The data requests ``(address, pad)`` of a stream's programs, run back to back, END-MARKs removed.

    Parameters
    ----------
    stream : Stream
        The stream (its ``programs`` are read in order).
    chunk_steps : int
        Counter steps computed at a time.
    """

    def __init__(self, stream, chunk_steps=1 << 22):
        self.stream = stream
        self.chunk_steps = int(chunk_steps)
        self._programs = iter(stream.programs)
        self._current = None
        self._step = 0
        self._address = np.zeros(0, dtype=np.int64)
        self._pad = np.zeros(0, dtype=bool)

    def next_chunk(self):
        """The next requests (at most ``chunk_steps`` counter steps' worth, possibly none), or None at the end."""
        if len(self._address):
            chunk = self._address, self._pad
            self._address, self._pad = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
            return chunk
        while self._current is None or self._step >= self._current.steps:
            program = next(self._programs, None)
            if program is None:
                return None
            self._current, self._step = ProgramSteps(program, COUNTER_BITS), 0
        start, self._step = self._step, min(self._step + self.chunk_steps, self._current.steps)
        return self._current.requests(start, self._step)

    def take(self, count):
        """Exactly the next ``count`` requests ``(address, pad)``.

        Raises
        ------
        ValueError
            The stream ends first.
        """
        if count == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
        addresses, pads, have = [], [], 0
        while have < count:
            chunk = self.next_chunk()
            if chunk is None:
                raise ValueError(f"the stream on vault {self.stream.vault} ends after {have} of the {count} "
                                 "requests needed")
            addresses.append(chunk[0])
            pads.append(chunk[1])
            have += len(chunk[0])
        address = np.concatenate(addresses) if addresses else np.zeros(0, dtype=np.int64)
        pad = np.concatenate(pads) if pads else np.zeros(0, dtype=bool)
        self._address, self._pad = address[count:], pad[count:]
        return address[:count], pad[:count]

    def remaining(self):
        """The number of requests not yet taken (reads the rest of the stream)."""
        total = 0
        while (chunk := self.next_chunk()) is not None:
            total += len(chunk[0])
        return total
