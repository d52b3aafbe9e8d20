"""Cycles of a compiled layer on a NeuroTrainer module, derived from its programs.

The time of a layer comes from what the compiler emitted (``sim/neurotrainer/compiler.py``),
not from a separate dataflow: the PE pass words (each pass's row count and its pipeline
cost from the PE golden timing, ``golden/neurotrainer/pe.py``), the PMAG programs of every
stream (their request counts and the PMAG's per-program set-up, ``spec/neurotrainer/pmag.py``),
the block sizes of the two input buffers, and the vault and bus rates and latencies
(``spec/neurotrainer/vault.py``, ``spec/neurotrainer/bus.py``).

Rules (``hw/neurotrainer/README.md``, section "System model"):

- **PE.** Pass ``p`` is accepted at ``A = max(idle, its BUF1 block complete, its BUF2 block
  complete)`` and the PE is idle again at ``A + J + ROW_DELAY + 1 + LAT`` (``J`` rows, steps plus
  preloads, :func:`~trainforge.golden.neurotrainer.pe.pass_shape`; ``LAT`` the MAC array's or
  the comparators' latency): the golden model's timing, with the fill streams' block times
  below instead of full-rate fills. A pass releases its blocks (the half may be refilled)
  when it is idle, unless it holds them.
- **Fill streams.** A stream is its PMAG programs run back to back: a program costs its
  requests (one per ``vault_interval`` cycles) plus ``PMAG_PROGRAM_CYCLES`` of set-up and
  END-MARK. Block ``b`` of a buffer (a BUF2 block of ``R`` rows is ``R k`` requests; a BUF1
  block of ``W`` words is ``W`` requests, or ``ceil(W / 2)`` in a 16-bit layer, whose words hold
  two elements each, ``spec/neurotrainer/packing.py``; the BUF1 row packer then makes two
  buffer words of each, so that stream moves at most one request per two cycles) starts when
  block ``b - 1`` is in and the half it goes to was released by the pass that read block
  ``b - 2``; it streams at the vault's rate, through the vault latency, and for a broadcast
  also the bus.
- **Shared resources.** Each PE's vault serves its read stream and, for results written
  locally, its write stream; the common vault and the bus serve the broadcast stream and
  the merged results of every PE. A resource is a single server with a busy-until time:
  reads wait for it, writes (which have priority in the vault controller) take it when
  their words are there and push later reads back. A broadcast block goes to every PE, so
  it starts only when every PE has released the half.
- **Merged results** go round the PEs in turn (PE 0, 1, ..., one result block each) through
  the bus and the common vault, so the common path carries ``pes`` blocks per round.
- **PEs with the same work.** The compiler gives every PE the same passes and block sizes
  (it pads the shares), so one PE is simulated and the shared resources are loaded by all
  ``pes`` of them.

What it leaves out, and so the bound of the comparison with the RTL: the order in which a
shared vault interleaves reads and writes word by word (here block by block), the FIFOs
between the vaults and the PEs (a stalled stream restarts at full rate at once), and the
fixed latencies of the glue (row packer, unpacker, FIFOs: ``GLUE_CYCLES``).
"""
from dataclasses import dataclass, field

import numpy as np

from ...errors import ParameterError
from ...golden.neurotrainer.pe import MAC_LATENCY, MAX_LATENCY, pass_shape
from ...golden.neurotrainer.pmag import nt_pmag
from ...spec.neurotrainer.bus import LATENCY as BUS_LATENCY
from ...spec.neurotrainer.pe import ROW_DELAY
from ...spec.neurotrainer.pe_program import OP_MAC, decode_pe_program
from ...spec.neurotrainer.pmag import LATENCY as PMAG_LATENCY, SETUP_CYCLES

__all__ = ["ModuleTiming", "LayerTime", "layer_time", "program_requests", "PMAG_PROGRAM_CYCLES", "GLUE_CYCLES",
           "CREDIT_LOOP_EXTRA_CYCLES"]

#: Cycles a PMAG program costs beyond its requests: acceptance, ``SETUP_CYCLES`` of set-up,
#: the END-MARK step and the cycle before the next program is accepted.
PMAG_PROGRAM_CYCLES = SETUP_CYCLES + 3

#: Cycles of a broadcast credit's loop beyond the bus stages: the word enters the PE's
#: broadcast FIFO, then leaves it for the row packer, which returns the credit. With
#: ``broadcast_credits`` credits the broadcast moves at most ``credits / (bus_latency + this)``
#: words per cycle.
CREDIT_LOOP_EXTRA_CYCLES = 2

#: Fixed cycles of the system's glue on a read path: the vault controller's returned-data
#: FIFO and the row packer's register (the integration's own, not a block's latency).
GLUE_CYCLES = 2


@dataclass(frozen=True)
class ModuleTiming:
    """The rates and latencies of one module, in cycles.

    Parameters
    ----------
    vault_latency : int
        Read latency of every vault (``nt_vault`` ``latency``).
    vault_interval : int
        Cycles per request of every vault (``nt_vault`` ``interval``).
    bus_latency : int
        Stages of the broadcast/merge bus.
    broadcast_credits : int
        Words of each PE's broadcast FIFO: how far a broadcast stream runs ahead of a buffer
        half that is not free yet (a PE's own read stream runs ahead by the vault latency:
        its returned-data FIFO holds ``latency + 4`` words).
    common_interval : int, optional
        Counterfactual: cycles per word of the common path (common vault and bus); 0 = no
        limit. Default: ``vault_interval``, as the system has.
    elements_per_request : int
        16-bit elements per vault request in 16-bit layers: 2, the paper's packing, as the
        compiled streams and the RTL's row packers have it (two elements per 32-bit word);
        1 = the counterfactual of the earlier RTL, one element per word (twice the BUF2 and
        result requests, and every weight read twice: ``2 W`` requests per BUF1 block).
    preload_rows : bool
        Counterfactual when False: accumulating passes without the preload row per output
        row (partial sums kept in the accumulator).
    """
    vault_latency: int = 4
    vault_interval: int = 1
    bus_latency: int = BUS_LATENCY
    broadcast_credits: int = 8
    common_interval: int = None
    elements_per_request: int = 2
    preload_rows: bool = True

    def __post_init__(self):
        for name, low in (("vault_latency", 0), ("vault_interval", 1), ("bus_latency", 0),
                          ("broadcast_credits", 1), ("elements_per_request", 1)):
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= low):
                raise ParameterError(f"parameter '{name}' = {value!r} is invalid; allowed: an integer >= {low}")
        if self.elements_per_request > 2:
            raise ParameterError(f"parameter 'elements_per_request' = {self.elements_per_request!r} is invalid; "
                                 "allowed: 1 or 2")
        if self.common_interval is not None and not (isinstance(self.common_interval, int)
                                                     and self.common_interval >= 0):
            raise ParameterError(f"parameter 'common_interval' = {self.common_interval!r} is invalid; allowed: "
                                 "None or an integer >= 0")


@dataclass
class LayerTime:
    """The time of one compiled layer.

    Attributes
    ----------
    cycles : int
        From the cycle the programs are queued to the last result written.
    compute_cycles : int
        Sum of the busiest PE's pass costs (``J + ROW_DELAY + 1 + LAT``): the time with
        every block always there.
    mac_rows : int
        MAC rows (steps and preloads) of one PE.
    stall_cycles : int
        Cycles the PE waited for a block (``cycles`` minus compute and the write-back tail).
    passes : int
        Passes of one PE.
    words : dict
        Requests per PE and on the common path: ``local_read``, ``local_write``,
        ``broadcast``, ``merge`` (all PEs), ``copy`` (data preparation, not timed here).
    programs : dict
        PMAG programs of one PE's streams and of the common vault.
    """
    cycles: int
    compute_cycles: int
    mac_rows: int
    stall_cycles: int
    passes: int
    words: dict = field(default_factory=dict)
    programs: dict = field(default_factory=dict)


def program_requests(program, *, counter_bits=16):
    """Data requests (pad requests included, the END-MARK not) of one PMAG program.

    The product of the seven counter ranges; with the window's *skip* mode the steps outside
    the window issue nothing, so those programs are counted by the PMAG golden model.
    """
    steps = int(np.prod([int(m) + 1 for m in program["max"]], dtype=np.int64))
    if program.get("window", 0) != 1:
        return steps
    return int(np.count_nonzero(~nt_pmag(program, counter_bits=counter_bits)["end"])) if steps else 0


class _Server:
    """A vault (or the bus and the common vault): one word per ``interval`` cycles.

    Writes take the server when their words are there (the vault controller serves the write
    PMAG before the read PMAG) and follow each other; a read block gets the slots the writes
    leave, so every write that overlaps it lengthens it by its own length.
    """

    def __init__(self, interval):
        self.interval = interval
        self.free = 0               # end of the last read block
        self.writes = []            # (start, end) of every write block, in order
        self.written = 0            # end of the last write block
        self.first = 0              # first write block that may still overlap a read

    def read(self, ready, requests, overhead, per_word=None):
        """End of ``requests`` reads (plus ``overhead`` cycles of PMAG set-up) asked for from ``ready``, one per
        ``per_word`` cycles (default the server's ``interval``)."""
        start = max(ready, self.free)
        end = start + requests * max(self.interval, per_word or 0) + overhead
        while self.first < len(self.writes) and self.writes[self.first][1] <= start:
            self.first += 1
        for write_start, write_end in self.writes[self.first:]:
            if write_start >= end:
                break
            end += min(write_end, end) - max(write_start, start)
        self.free = end
        return start, end

    def write(self, ready, words, overhead=0):
        """End of ``words`` writes (plus ``overhead`` cycles of PMAG set-up) whose first word is there at ``ready``."""
        start = max(ready, self.written) + overhead        # the set-up does not use the vault
        self.written = start + words * self.interval
        self.writes.append((start, self.written))
        return self.written


class _Fill:
    """One input buffer's fill stream, block by block: block ``b`` is asked for when block ``b - 1`` has been
    and, less what the FIFOs let the stream run ahead (``ahead`` cycles, at most the read latency), when
    block ``b - 2``'s half is released."""

    def __init__(self, block_requests, block_overheads, server, latency, ahead, per_word=None):
        self.per_word = per_word
        self.requests = block_requests
        self.overheads = block_overheads
        self.server = server
        self.latency = latency
        self.ahead = min(ahead, latency)
        self.asked = 0
        self.ends = []
        self.releases = {}

    def complete(self, block):
        """First cycle in which ``block`` is in its half (a pass may read it)."""
        while len(self.ends) <= block:
            index = len(self.ends)
            ready = self.asked
            if index >= 2:
                ready = max(ready, self.releases[index - 2] - self.ahead)
            _, self.asked = self.server.read(ready, self.requests[index], self.overheads[index], self.per_word)
            self.ends.append(self.asked + self.latency)
        return self.ends[block] + 1


def _block_requests(stream, sizes):
    """Requests and PMAG set-up cycles of each block of a stream whose blocks take ``sizes`` requests."""
    counts = np.array([program_requests(p) for p in stream.programs], dtype=np.int64)
    sizes = np.asarray(sizes, dtype=np.int64)
    if counts.sum() and counts.sum() != sizes.sum():
        # The counterfactual counting (``elements_per_request = 1``): the programs scaled to it.
        counts = -(-counts * int(sizes.sum()) // int(counts.sum()))
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    edges = np.concatenate(([0], np.cumsum(sizes)))
    # Each program's set-up is paid by the block its first request goes to.
    owner = np.clip(np.searchsorted(edges, starts, side="right") - 1, 0, len(sizes) - 1)
    overheads = np.bincount(owner, minlength=len(sizes)) * PMAG_PROGRAM_CYCLES
    return sizes, overheads, int(counts.sum()), len(counts)


def layer_time(layer, timing=None):
    """Cycles of a compiled layer's PE jobs on a module with ``layer.pes`` PEs.

    Parameters
    ----------
    layer : CompiledLayer
        A compiled layer (:func:`~trainforge.sim.neurotrainer.compiler.compile_layer`).
    timing : ModuleTiming, optional

    Returns
    -------
    LayerTime
    """
    timing = timing or ModuleTiming()
    if not layer.pe_jobs:
        raise ValueError(f"{layer.kind}: no PE job to time (data preparation only)")
    job = max(layer.pe_jobs, key=lambda j: len(j.passes))
    pes = layer.pes
    lanes = layer.pe["lanes"]
    narrow = layer.bits == 16
    unpacked = narrow and timing.elements_per_request == 1
    interval = timing.vault_interval
    local = _Server(interval)
    common = _Server(interval if timing.common_interval is None else timing.common_interval)
    read_latency = timing.vault_latency + GLUE_CYCLES
    fills = {}
    words = {"local_read": 0, "local_write": 0, "broadcast": 0, "merge": 0,
             "copy": sum(program_requests(p) for c in layer.copy_jobs for p in c.dest.programs)}
    programs = {"local": 0, "common": 0}
    in1_sizes = [2 * w if unpacked else -(-w // 2) if narrow else w for w in job.in1_blocks]
    in2_sizes = [r * lanes * (2 if unpacked else 1) for r in job.in2_blocks]
    for name, stream, block_sizes in (("in1", job.in1, in1_sizes), ("in2", job.in2, in2_sizes)):
        if stream is None:
            continue
        sizes, overheads, total, count = _block_requests(stream, block_sizes)
        # A packed 16-bit BUF1 word becomes two buffer words in the row packer, one per cycle.
        packer = 2 if name == "in1" and narrow and not unpacked else None
        if stream.broadcast:
            # The credit loop: a credit comes back CREDIT_LOOP cycles after its word entered the bus.
            credit_loop = timing.bus_latency + CREDIT_LOOP_EXTRA_CYCLES
            fills[name] = _Fill(sizes, overheads, common, read_latency + timing.bus_latency,
                                timing.broadcast_credits * common.interval,
                                max(credit_loop / timing.broadcast_credits, packer or 0))
            words["broadcast"] += total
            programs["common"] += count
        else:
            fills[name] = _Fill(sizes, overheads, local, read_latency, read_latency, packer)
            words["local_read"] += total
            programs["local"] += count
    merged = job.out.vault == -1
    out_programs = len(job.out.programs)
    programs["common" if merged else "local"] += out_programs * (pes if merged else 1)

    decoded = {}
    fields = [decoded.setdefault(word, decode_pe_program(int(word))) if word not in decoded else decoded[word]
              for word in job.passes]
    idle = 0
    block1 = block2 = 0
    compute = mac_rows = 0
    last_write = 0
    emitted = 0
    for f in fields:
        is_mac = f["op"] == OP_MAC
        steps, _, outputs, rows = pass_shape(f)
        if not timing.preload_rows:
            rows = steps
        latency = MAC_LATENCY if is_mac else MAX_LATENCY
        accept = max(idle, fills["in2"].complete(block2), fills["in1"].complete(block1) if is_mac else 0)
        cost = rows + ROW_DELAY + 1 + latency
        idle = accept + cost
        compute += cost
        mac_rows += rows if is_mac else 0
        if f["emit"]:
            result_words = outputs * lanes * (2 if unpacked and is_mac else 1)
            first = accept + ROW_DELAY + latency
            setup = PMAG_PROGRAM_CYCLES if emitted < out_programs else 0
            emitted += 1
            if merged:
                # The PEs' blocks in turn; the first PE waits only for its own, the others run behind it.
                words["merge"] += result_words * pes
                end_all = common.write(first, pes * result_words, pes * setup)
                last_write = max(last_write, end_all + timing.bus_latency)
                end = end_all - (pes - 1) * (result_words * common.interval + setup)
            else:
                words["local_write"] += result_words
                end = local.write(first, result_words, setup)
                last_write = max(last_write, end)
            idle = max(idle, end)       # the result stage stalls the PE while its words wait
        if is_mac and not f["hold1"]:
            fills["in1"].releases[block1] = idle
            block1 += 1
        if not f["hold2"]:
            fills["in2"].releases[block2] = idle
            block2 += 1
    cycles = int(np.ceil(max(idle, last_write + 1)))
    return LayerTime(cycles=int(cycles), compute_cycles=int(compute), mac_rows=int(mac_rows),
                     stall_cycles=int(idle - compute), passes=len(fields), words=words, programs=programs)
