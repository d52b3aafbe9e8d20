"""The PMAG address sequence of :func:`~trainforge.golden.neurotrainer.pmag.nt_pmag`, step range by step range.

``nt_pmag`` builds a table of every source for every counter step (about 200 bytes per step),
so a program of hundreds of millions of steps (AlexNet C1 BP's BUF Input 2 stream has 600 M)
does not fit in memory. This model computes the same requests for any range of counter steps
with a few bytes per step, using that every quantity the PMAG computes is linear in the counters:

- ``p = s + t`` and ``q = u + v`` are sums of two sources, each a counter, ``const`` or zero
  (``p`` and ``q`` never wrap: both terms are below ``2**counter_bits``, and ``p`` is kept to
  ``counter_bits + 1`` bits);
- ``a .. d``, ``h`` and ``k`` each pick one source (zero, a counter, ``const``, ``p`` or ``q``);
- ``address = base + a*stride[0] + ... + d*stride[3] (mod 2**32)`` is therefore
  ``base + sum_l coefficient_l * r_l (mod 2**32)`` with one coefficient per counter level.

Step ``i`` of a program is the mixed-radix number of the counters (``r7`` fastest). A range of
steps is computed as an outer part (the slow counters, per block of ``inner`` steps) plus a
table of the fast counters' part, one addition per step. The requests (address, ``pad``) are
those ``nt_pmag`` issues in that range, END-MARK excluded; ``window`` skip and pad modes as there.
"""
import numpy as np

from ...spec.neurotrainer.pmag import LEVELS, PARAMS, WINDOW_MODES

__all__ = ["ProgramSteps"]

_MASK32 = (1 << 32) - 1
_CONST, _P, _Q = 8, 9, 10
#: Largest table of the fast counters' terms, in steps.
_INNER_LIMIT = 1 << 18


class ProgramSteps:
    """One PMAG program's requests over any range of its counter steps.

    Parameters
    ----------
    program : dict
        Program fields, as for :func:`~trainforge.golden.neurotrainer.pmag.nt_pmag`.
    counter_bits : int
        Counter width (the PMAG parameter).
    inner_limit : int
        Largest table of the fast counters' terms, in steps (smaller: more outer blocks).

    Attributes
    ----------
    counts : list of int
        Iterations of ``r1`` (outermost) .. ``r7``.
    steps : int
        Counter steps of the program (issued or not; the END-MARK not included).
    """

    def __init__(self, program, counter_bits=PARAMS["counter_bits"].default, inner_limit=_INNER_LIMIT):
        limit = (1 << counter_bits) - 1
        mask_wide = (1 << (counter_bits + 1)) - 1
        self.counts = [(int(m) & limit) + 1 for m in program["max"]]
        self.steps = int(np.prod(self.counts, dtype=object))
        const = int(program["const"]) & limit

        def source(code, allow_pq):
            """Coefficients (constant term, r1 .. r7) of a decoder's source."""
            vector = [0] * (LEVELS + 1)
            code = int(code) & 15
            if 1 <= code <= LEVELS:
                vector[code] = 1
            elif code == _CONST:
                vector[0] = const
            elif allow_pq and code in (_P, _Q):
                pair = ("s", "t") if code == _P else ("u", "v")
                for name in pair:
                    vector = [x + y for x, y in zip(vector, source(program[name], False))]
            return vector

        address = [int(program["base"]) & _MASK32] + [0] * LEVELS
        for name, stride in zip("abcd", program["stride"]):
            address = [x + y * (int(stride) & _MASK32) for x, y in zip(address, source(program[name], True))]
        self._address = [x & _MASK32 for x in address]
        window = int(program["window"])
        self._window = window if window in (WINDOW_MODES["skip"], WINDOW_MODES["pad"]) else WINDOW_MODES["off"]
        self._h, self._k = source(program["h"], True), source(program["k"], True)
        self._bounds = [int(program[name]) & mask_wide for name in ("h_lo", "h_hi", "k_lo", "k_hi")]
        # Split the levels: the fast ones (a table of at most _INNER_LIMIT steps) and the slow ones.
        split, inner = LEVELS, 1
        while split > 0 and inner * self.counts[split - 1] <= inner_limit:
            split -= 1
            inner *= self.counts[split]
        self._split, self._inner = split, inner
        self._tables = {}

    def _vector(self, name):
        return {"address": self._address, "h": self._h, "k": self._k}[name]

    def _table(self, name):
        """The fast counters' part of quantity ``name`` for inner steps ``0 .. inner - 1`` (built once)."""
        if name not in self._tables:
            vector = self._vector(name)
            table = np.zeros(1, dtype=np.int64)
            for level in range(self._split, LEVELS):
                digits = np.arange(self.counts[level], dtype=np.int64) * np.int64(vector[level + 1])
                table = (table[:, None] + digits[None, :]).reshape(-1)
            self._tables[name] = table
        return self._tables[name]

    def _outer(self, vector, index):
        """The slow counters' part (``r1 .. r_split``) of the outer block numbers ``index``."""
        value = np.zeros(index.shape, dtype=np.int64)
        rest = index.copy()
        for level in range(self._split - 1, -1, -1):
            rest, digit = np.divmod(rest, self.counts[level])
            if vector[level + 1]:
                value += digit * np.int64(vector[level + 1])
        return value

    def _values(self, name, start, stop):
        """The linear quantity ``name`` (constant term included) for steps ``start .. stop - 1``."""
        vector = self._vector(name)
        first, last = start // self._inner, (stop - 1) // self._inner
        outer = self._outer(vector, np.arange(first, last + 1, dtype=np.int64)) + np.int64(vector[0])
        values = (outer[:, None] + self._table(name)[None, :]).reshape(-1)
        offset = first * self._inner
        return values[start - offset:stop - offset]

    def requests(self, start=0, stop=None):
        """``(address, pad)`` of the requests issued by counter steps ``start .. stop - 1`` (int64, bool).

        Parameters
        ----------
        start, stop : int
            A range of counter steps (``stop`` defaults to :attr:`steps`).
        """
        stop = self.steps if stop is None else min(int(stop), self.steps)
        if stop <= start:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
        address = self._values("address", start, stop) & np.int64(_MASK32)
        if self._window == WINDOW_MODES["off"]:
            return address, np.zeros(address.size, dtype=bool)
        h, k = self._values("h", start, stop), self._values("k", start, stop)
        h_lo, h_hi, k_lo, k_hi = self._bounds
        inside = (h >= h_lo) & (h < h_hi) & (k >= k_lo) & (k < k_hi)
        if self._window == WINDOW_MODES["skip"]:
            return address[inside], np.zeros(int(inside.sum()), dtype=bool)
        return address, ~inside
