"""cocotb drivers for ``amaranth.lib.stream`` ports, with random backpressure (for the project's testbenches and yours).

Amaranth flattens a stream member ``s`` into the ports ``s__payload``,
``s__valid`` and ``s__ready``. Payloads cross as integers; the testbench packs
and unpacks them through the block's own ``lib.data`` layout
(:func:`pack`, :func:`unpack`), never with hand-written bit offsets.

Timing discipline: every coroutine changes its inputs right after a rising
edge and samples in the ``ReadOnly`` phase of the same cycle, so a transfer
is recorded exactly when ``valid`` and ``ready`` are both high before the
next edge, under Icarus and Verilator alike.
"""
import collections

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge
from cocotb.utils import get_sim_time

__all__ = ["pack", "unpack", "Cycle", "StreamSource", "StreamSink"]


def pack(layout, fields):
    """Bits of a ``lib.data`` layout value built from a (nested) dict or list."""
    return layout.const(fields).as_bits()


def unpack(layout, bits):
    """A ``lib.data.Const`` view of ``bits``: read fields as attributes or items."""
    return layout.from_bits(int(bits))


class Cycle:
    """Counts rising edges of the clock (``now`` is the current cycle number) and steps the stream drivers.

    One coroutine serves every :class:`StreamSource` and :class:`StreamSink` made with this counter:
    after each rising edge it lets each driver set its inputs (in the order the drivers were made),
    then, in the ``ReadOnly`` phase, lets each record its transfer. That is two resumptions per cycle
    instead of two per driver per cycle, which is most of a testbench's Python time (``nt_system`` has
    about twenty streams). A driver made at some time first acts at the first rising edge after it,
    as a coroutine of its own started then would.
    """

    def __init__(self, clock):
        self.clock = clock
        self.now = 0
        self._drivers = []      # stepped every cycle, in the order they were made
        self._waiting = []      # (time made, driver): stepped from the first edge after that time
        cocotb.start_soon(self._count())

    def attach(self, driver):
        """Step ``driver`` (``_drive_inputs()`` after each edge, ``_sample()`` in ``ReadOnly``) from the next edge."""
        self._waiting.append((get_sim_time(), driver))

    async def _count(self):
        edge, read_only = RisingEdge(self.clock), ReadOnly()
        active = self._drivers
        while True:
            await edge
            self.now += 1
            if self._waiting:
                now = get_sim_time()
                active.extend(driver for made, driver in self._waiting if made < now)
                self._waiting = [(made, driver) for made, driver in self._waiting if made >= now]
            for driver in active:
                driver._drive_inputs()
            await read_only
            for driver in active:
                driver._sample()


class _StreamPorts:
    """The ``valid``, ``ready`` and ``payload`` handles of stream member ``name``, and the clock cycle.

    A driver owns the handshake port it drives (a source's ``valid``, a sink's ``ready``) from its
    creation and writes it only when the level changes (:meth:`_drive`; a write per driver per cycle
    was a fifth of ``nt_system``'s Python time), so nothing else may write that port while the driver
    lives.
    """

    def __init__(self, dut, name, cycle, rng, owned):
        self.valid = getattr(dut, f"{name}__valid")
        self.ready = getattr(dut, f"{name}__ready")
        self.payload = getattr(dut, f"{name}__payload")
        self.cycle = cycle
        self.rng = rng
        self._owned = getattr(self, owned)
        self._level = None

    def _drive(self, level):
        """Write ``level`` to the owned handshake port unless it already holds it."""
        if level != self._level:
            self._owned.value = level
            self._level = level


class StreamSource(_StreamPorts):
    """Drives a stream's ``valid``/``payload`` from a queue; ``valid`` is raised with probability ``valid_probability``.

    Parameters
    ----------
    dut : cocotb handle
    name : str
        Stream member name, e.g. ``"i_row"``.
    cycle : Cycle
    rng : random.Random
    valid_probability : float
        Chance, each cycle with a queued item, of offering it.

    Attributes
    ----------
    sent : list of (int, int)
        ``(cycle, payload)`` of every accepted transfer.
    """

    def __init__(self, dut, name, cycle, rng, valid_probability=1.0):
        super().__init__(dut, name, cycle, rng, owned="valid")
        self.valid_probability = valid_probability
        self.pattern = None
        self.queue = collections.deque()
        self.sent = []
        self.enabled = True
        self._drive(0)
        self._offered = None
        cycle.attach(self)

    def send(self, payloads):
        self.queue.extend(payloads)

    def follow(self, pattern):
        """From the next rising edge, offer (when there is something to offer) as ``pattern[k]`` says in cycle ``k``.

        ``pattern`` is a sequence of booleans, repeated; ``None`` goes back to
        :attr:`valid_probability`. A scenario sets the same pattern in the
        golden model, so both see the same handshakes cycle by cycle.
        """
        self.pattern = None if pattern is None else (tuple(bool(x) for x in pattern), [0])

    def _wants_to_offer(self):
        if self.pattern is None:
            return self.rng.random() < self.valid_probability
        pattern, index = self.pattern
        return pattern[index[0] % len(pattern)]
    def drop(self):
        """Forget everything queued and any offer in progress (used around a reset)."""
        self.queue.clear()
        self._offered = None
        self._drive(0)

    @property
    def idle(self):
        return not self.queue and self._offered is None

    def _drive_inputs(self):
        """After a rising edge: offer the next queued payload, or keep offering the one not yet taken."""
        offer = self._wants_to_offer()
        if self.pattern is not None:
            self.pattern[1][0] += 1
        if self._offered is None and self.queue and self.enabled and offer:
            self._offered = self.queue.popleft()
            self.payload.value = self._offered
        self._drive(int(self._offered is not None))

    def _sample(self):
        """In ``ReadOnly``: the offer was taken if ``ready`` is high."""
        if self._offered is not None and self.ready.value == 1:
            self.sent.append((self.cycle.now, self._offered))
            self._offered = None


class StreamSink(_StreamPorts):
    """Drives a stream's ``ready`` (high with probability ``ready_probability``) and records transfers.

    Attributes
    ----------
    received : list of (int, int)
        ``(cycle, payload)`` of every transfer.
    """

    def __init__(self, dut, name, cycle, rng, ready_probability=1.0):
        super().__init__(dut, name, cycle, rng, owned="ready")
        self.ready_probability = ready_probability
        self.pattern = None
        self.received = []
        self._drive(0)
        self._ready = False
        cycle.attach(self)

    def follow(self, pattern):
        """From the next rising edge, drive ``ready`` as ``pattern[k]`` in cycle ``k`` (repeated); ``None``: random again."""
        self.pattern = None if pattern is None else (tuple(bool(x) for x in pattern), [0])

    def _drive_inputs(self):
        """After a rising edge: ``ready`` for this cycle, random or from the pattern."""
        if self.pattern is None:
            ready = self.rng.random() < self.ready_probability
        else:
            pattern, index = self.pattern
            ready = pattern[index[0] % len(pattern)]
            index[0] += 1
        self._ready = ready
        self._drive(int(ready))

    def _sample(self):
        """In ``ReadOnly``: record a transfer."""
        if self._ready and self.valid.value == 1:
            self.received.append((self.cycle.now, int(self.payload.value)))


def stream_ports(bench):
    """``(inputs, outputs)``: the port names of every stream member of the component, array members included.

    A member ``s`` is ``s``; a ``.array(n)`` member is ``s__0`` .. ``s__<n-1>`` (Amaranth's port names).
    """
    from amaranth.lib import wiring

    inputs, outputs = [], []
    for name, member in bench.component.signature.members.items():
        if not member.is_signature:
            continue
        names = [name] if not member.dimensions else [f"{name}__{index}" for index in range(member.dimensions[0])]
        for port in names:
            if hasattr(bench.dut, f"{port}__ready") and hasattr(bench.dut, f"{port}__valid"):
                (inputs if member.flow == wiring.In else outputs).append(port)
    return inputs, outputs


async def check_no_ready_path(bench, inputs=None, outputs=None, cycles=40, valid_probability=0.8, ready_period=None,
                              before_each_cycle=None):
    """Fail if any input stream's ``ready`` changes within a cycle when an output stream's ``ready`` does.

    Every input offers random payloads with random ``valid``; outputs are ready once in
    ``ready_period`` cycles (never, by default), so that they fill up. In each cycle every output's
    ``ready`` is toggled 1, 0, 1, 100 ps apart (all inside one clock period), and every input's
    ``ready`` must keep the value it had after the clock edge. A registered ``ready`` (the shared
    stream stage's) never moves then; a combinational path from an output's ``ready`` would. The
    inputs are idle again afterwards.

    Parameters
    ----------
    bench : tbutil.Bench
    inputs, outputs : list of str, optional
        Stream port names (``i_row``, ``i_merge__0``); by default every stream of the component
        (:func:`stream_ports`).
    valid_probability : float or dict
        Per input port, or one for all.
    before_each_cycle : callable, optional
        ``before_each_cycle(cycle)`` drives the block's other inputs.
    """
    from cocotb.triggers import Timer

    dut = bench.dut
    found_inputs, found_outputs = stream_ports(bench)
    inputs = found_inputs if inputs is None else inputs
    outputs = found_outputs if outputs is None else outputs
    probability = valid_probability if isinstance(valid_probability, dict) else \
        {name: valid_probability for name in inputs}
    width = {name: len(getattr(dut, f"{name}__payload")) for name in inputs}
    for cycle in range(cycles):
        if before_each_cycle is not None:
            before_each_cycle(cycle)
        for name in inputs:
            getattr(dut, f"{name}__valid").value = int(bench.rng.random() < probability[name])
            getattr(dut, f"{name}__payload").value = bench.rng.getrandbits(width[name])
        for name in outputs:
            getattr(dut, f"{name}__ready").value = int(ready_period is not None and cycle % ready_period == 0)
        await RisingEdge(dut.clk)
        await Timer(1, units="ns")
        held = {name: int(getattr(dut, f"{name}__ready").value) for name in inputs}
        for output in outputs:
            for level in (1, 0, 1):
                getattr(dut, f"{output}__ready").value = level
                await Timer(100, units="ps")
                now = {name: int(getattr(dut, f"{name}__ready").value) for name in inputs}
                assert now == held, (f"input ready {held} -> {now} within a cycle when {output}.ready went to "
                                     f"{level}: a combinational path from an output's ready {bench.where()}")
    for name in inputs:
        getattr(dut, f"{name}__valid").value = 0
