"""What the iBuffer / layer sequencer's generator and golden model share: parameters, queues, layouts.

The paper's iBuffer (Section 4, Fig. 12: "To enable autonomous operation of the NeuroTrainer, we
embed an on-chip instruction buffer (iBuffer) to store the preceding three tables"; the host
"generates the preceding three tables and loads them in the iBuffer. During execution the
layer-wise operation is" run from it) holds, for every layer, the PMAG programs (Tables 2 and 3)
and the PE programs (Table 4). Ours holds them in one **program queue per consumer**: each
vault's read PMAG, each vault's write PMAG and each PE. A single in-order program stream would
deadlock: a vault's second program can wait for a PE pass queued behind it. A **layer table**
holds, per layer, the system's ``config`` (the routing of the layer) and how many words each
queue issues in that layer.

Queue numbering (:func:`queue_names`): ``0 .. pes`` the read PMAGs of vaults ``0 .. pes`` (0 =
the common vault), ``pes + 1 .. 2 pes + 1`` their write PMAGs, ``2 pes + 2 ..`` PEs ``0 ..
pes - 1``.

Parameters
----------
See :data:`PARAMS`: ``pes``, ``max_layers``, ``queue_depth``.
"""
from amaranth import unsigned
from amaranth.lib import data

from ..params import Param, ParamSchema
from . import pmag

__all__ = ["PARAMS", "IDLE_SETTLE_CYCLES", "PE_PROGRAM_BITS", "config_layout", "pmag_program_layout", "queue_count",
           "queue_names", "queue_widths", "entry_layout", "load_layout", "pack_entry", "unpack_entry",
           "layer_table_target"]

#: Cycles the sequencer waits after the last program word of a layer was taken before it samples
#: the system's ``idle`` (the system's rule: sample ``idle`` from the second cycle after the last
#: program was taken, so that a PMAG that has just taken a program reports it).
IDLE_SETTLE_CYCLES = 2

#: Width of a PE program word (``spec/neurotrainer/pe_program.py``).
PE_PROGRAM_BITS = 32

#: The parameters of ``nt_sequencer``.
PARAMS = ParamSchema((
    Param("pes", int, 2, "PEs of the system it drives (one program queue per PMAG and per PE)", minimum=2,
          maximum=4),
    Param("max_layers", int, 8, "layer table entries (power of two)", minimum=2, maximum=256, power_of_two=True),
    Param("queue_depth", int, 64, "program words of each queue (power of two)", minimum=4, maximum=4096,
          power_of_two=True),
))


def config_layout():
    """The system's per-layer ``config``: ``wide``, ``broadcast_in1``, ``local_in1``, ``merge`` (1 bit each),
    ``in1_block``, ``in2_block``, ``out_rows`` (16 bits each)."""
    return data.StructLayout({
        "wide": 1, "broadcast_in1": 1, "local_in1": 1, "merge": 1,
        "in1_block": unsigned(16), "in2_block": unsigned(16), "out_rows": unsigned(16),
    })


def pmag_program_layout():
    """A vault controller's PMAG program (16-bit counters)."""
    return pmag.program_layout({"counter_bits": 16})


def queue_count(pes):
    """Program queues of a system with ``pes`` PEs: a read and a write PMAG per vault, one per PE."""
    return 2 * (pes + 1) + pes


def queue_names(pes):
    """The queues' names in queue order: ``read_<v>``, ``write_<v>``, ``pe_<i>``."""
    return ([f"read_{v}" for v in range(pes + 1)] + [f"write_{v}" for v in range(pes + 1)]
            + [f"pe_{i}" for i in range(pes)])


def queue_widths(pes):
    """The word width of every queue, in queue order."""
    pmag_bits = pmag_program_layout().size
    return [pmag_bits] * (2 * (pes + 1)) + [PE_PROGRAM_BITS] * pes


def entry_layout(params):
    """A layer table entry: ``config`` and ``counts`` (per queue, the words it issues in the layer, 0 .. queue_depth)."""
    return data.StructLayout({
        "config": config_layout(),
        "counts": data.ArrayLayout(unsigned((params["queue_depth"]).bit_length()), queue_count(params["pes"])),
    })


def layer_table_target(params):
    """The ``target`` of a load into the layer table (the queues are ``0 .. queue_count - 1``)."""
    return queue_count(params["pes"])


def load_layout(params):
    """Payload of ``i_load``: ``target`` (a queue, or :func:`layer_table_target` for the layer table), ``address``
    (the word in the queue or the layer number), ``data`` (the word, low bits used)."""
    widths = queue_widths(params["pes"]) + [entry_layout(params).size]
    depth = max(params["queue_depth"], params["max_layers"])
    return data.StructLayout({
        "target": unsigned((queue_count(params["pes"])).bit_length()),
        "address": unsigned((depth - 1).bit_length()),
        "data": unsigned(max(widths)),
    })


def pack_entry(params, config, counts):
    """The bits of a layer table entry: ``config`` (a dict of :func:`config_layout`'s fields) and ``counts``."""
    return entry_layout(params).const({"config": dict(config), "counts": [int(c) for c in counts]}).as_bits()


def unpack_entry(params, bits):
    """``(config, counts)`` of a layer table entry's bits (inverse of :func:`pack_entry`)."""
    entry = entry_layout(params).from_bits(bits)
    return ({name: int(entry.config[name]) for name, _ in config_layout()},
            [int(count) for count in entry.counts])
