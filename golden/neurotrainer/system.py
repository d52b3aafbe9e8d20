"""Reference of :class:`trainforge.hw.neurotrainer.system.NTSystem`: compiled layers run back to back.

A layer is compiled by the host compiler (:func:`trainforge.sim.neurotrainer.compiler.compile_layer`)
for the system's PEs. :func:`nt_system` runs a *sequence* of layers the way the system does
between two resets: every layer's vault images are loaded by the host, its programs run, and
each PE keeps its state from one layer to the next, in particular the MAC array's random
generator (SR-LO's LFSR and shift register), which steps once per MAC row of every pass. The
PE arithmetic is the PE golden model's (:func:`~trainforge.golden.neurotrainer.pe.nt_pe`, fed
each PE's passes and buffer blocks of all the layers at once); the data movement is the
compiler's (PMAG golden model address streams, :mod:`trainforge.sim.neurotrainer.executor`).
Results are bit-exact; cycles are not modelled (the system's timing is the sum of its blocks'
and depends on backpressure).

Vault numbering here is the system's: 0 = the common vault, ``1 + i`` = PE ``i``'s vault
(the compiler's -1 and ``i``).
"""
import numpy as np

from ...hw.neurotrainer.pe_program import decode_pe_program
from ...sim.neurotrainer import executor
from ...sim.neurotrainer.compiler import COMMON, compile_layer
from .pe import nt_pe, pass_shape
from .pmag import nt_pmag

__all__ = ["PE_KEYS", "compile_for_system", "layer_config", "vault_programs", "nt_system"]

#: The NTSystem parameters that are the PEs' (the compiler's ``pe``).
PE_KEYS = ("lanes", "in1_depth", "in2_depth", "out_depth", "frac_bits", "frac_bits16", "rounding", "seed",
           "index_bits")

_DEFAULTS = {"pes": 2, "lanes": 2, "in1_depth": 128, "in2_depth": 64, "out_depth": 16, "frac_bits": 8,
             "frac_bits16": 0, "rounding": "sr_lo", "seed": 0xA5, "index_bits": 4}


def _system(params):
    return {**_DEFAULTS, **{key: value for key, value in params.items() if key in _DEFAULTS}}


def compile_for_system(kind, dims, *, sr=False, bits=None, **params):
    """``compile_layer(kind, dims)`` for the system's PEs (``params``: NTSystem parameters)."""
    system = _system(params)
    return compile_layer(kind, dims, pes=system["pes"], pe={key: system[key] for key in PE_KEYS}, sr=sr,
                         bits=bits)


def _data_requests(program):
    return int(np.count_nonzero(~nt_pmag(program, counter_bits=16)["pad"][:-1]))


def _one(values, what):
    values = set(values)
    if len(values) != 1:
        raise ValueError(f"the system needs one {what} per layer; the layer has {sorted(values)}")
    return values.pop()


def layer_config(layer):
    """The ``config`` port value of a layer: how the system routes its streams.

    Raises
    ------
    ValueError
        A layer the system cannot run: copy jobs, unequal block sizes, a broadcast BUF1 and a
        broadcast BUF2 at once, write programs of unequal length, or merged results without one
        write program per result block and the same number of blocks on every PE (the bus's
        turn goes round all PEs).
    """
    if layer.copy_jobs or not layer.pe_jobs:
        raise ValueError(f"{layer.kind}: the system runs PE layers only (no data-preparation copy jobs)")
    jobs = layer.pe_jobs
    broadcast_in1 = any(job.in1 is not None and job.in1.broadcast for job in jobs)
    local_in1 = any(job.in1 is not None and not job.in1.broadcast for job in jobs)
    if broadcast_in1 and any(job.in2.broadcast for job in jobs) or local_in1 and any(not job.in2.broadcast
                                                                                     for job in jobs):
        raise ValueError(f"{layer.kind}: both buffers filled from the same kind of vault")
    merge = _one((job.out.vault == COMMON for job in jobs), "result destination")
    elements = layer.pe["lanes"] * (2 if layer.bits == 16 else 1)
    requests = _one((_data_requests(program) for job in jobs for program in job.out.programs),
                    "write program length")
    if requests % elements:
        raise ValueError(f"{layer.kind}: a write program of {requests} words is not whole rows of {elements}")
    if merge:
        programs = _one((len(job.out.programs) for job in jobs), "number of merged write programs per PE")
        blocks = _one((sum(decode_pe_program(word)["emit"] for word in job.passes) for job in jobs),
                      "number of result blocks per PE")
        if blocks != programs:
            raise ValueError(f"{layer.kind}: a PE emits {blocks} result blocks into {programs} merged write "
                             "program(s); the merge order (one block per turn, PE 0, 1, ...) needs one per block")
    in1 = [size for job in jobs for size in job.in1_blocks]
    return {
        "wide": int(layer.bits == 32),
        "broadcast_in1": int(broadcast_in1),
        "local_in1": int(local_in1),
        "merge": int(merge),
        "in1_block": _one(in1, "BUF Input 1 block size") if in1 else 1,
        "in2_block": _one((size for job in jobs for size in job.in2_blocks), "BUF Input 2 block size"),
        "out_rows": requests // elements,
    }


def vault_programs(layer, pes):
    """Per system vault (0 = common, ``1 + i`` = PE ``i``'s) the ``(read, write)`` PMAG program lists, in order.

    The common vault's write programs (merged results, one per result block) are the compiler's
    :meth:`~trainforge.sim.neurotrainer.compiler.CompiledLayer.merged_writes`: block 0 of PE 0,
    1, ..., then block 1 of each PE, ...: the bus's merge order.
    """
    reads = {vault: [] for vault in range(pes + 1)}
    writes = {vault: [] for vault in range(pes + 1)}
    seen = set()
    for job in layer.pe_jobs:
        for stream in (job.in1, job.in2):
            if stream is None or id(stream) in seen:
                continue
            seen.add(id(stream))
            if reads[stream.vault + 1]:
                raise ValueError(f"{layer.kind}: vault {stream.vault} has two read streams")
            reads[stream.vault + 1] = list(stream.programs)
    writes[0] = [program for _, program in layer.merged_writes()]
    for job in layer.pe_jobs:
        if job.out.vault != COMMON:
            writes[job.out.vault + 1] += list(job.out.programs)
    return reads, writes


def _unpack(words, bits):
    if bits == 32:
        return words
    return np.stack([words & 0xFFFF, (words >> 16) & 0xFFFF], axis=-1).reshape(-1)


def _emitted_rows(passes):
    rows = 0
    for word in passes:
        fields = decode_pe_program(word)
        if fields["emit"]:
            rows += pass_shape(fields)[2]
    return rows


def nt_system(layers, inputs, **params):
    """The layers run one after the other from a reset, as the system runs them.

    Parameters
    ----------
    layers : sequence of CompiledLayer
        Compiled for the system (:func:`compile_for_system`).
    inputs : sequence of dict
        Each layer's input tensors (``layer.inputs``), integer words.
    **params
        The NTSystem parameters.

    Returns
    -------
    list of dict
        Per layer: ``output`` (the output tensor, signed, int64), ``vaults`` (the images the
        host loads, by system vault number) and ``final`` (the vault images after the layer,
        32-bit words as int64).
    """
    system = _system(params)
    pes = system["pes"]
    pe_params = {key: system[key] for key in PE_KEYS}
    images, per_pe = [], [{"passes": [], "blocks1": [], "blocks2": [], "rows": []} for _ in range(pes)]
    for layer, tensors in zip(layers, inputs):
        if layer.pes != pes or layer.pe != {**layer.pe, **pe_params}:
            raise ValueError(f"{layer.kind}: compiled for other PEs than the system's")
        vaults = executor.load(layer, tensors)
        images.append(vaults)
        for job in layer.pe_jobs:
            blocks1, blocks2 = executor.pe_buffer_images(layer, vaults, job)
            state = per_pe[job.pe]
            state["passes"] += list(job.passes)
            state["blocks1"] += list(blocks1)
            state["blocks2"] += list(blocks2)
            state["rows"].append(_emitted_rows(job.passes))
    results = [nt_pe(state["passes"], state["blocks1"], state["blocks2"], **pe_params)["results"].astype(np.int64)
               for state in per_pe]
    outcome, first = [], [0] * pes
    for number, (layer, vaults) in enumerate(zip(layers, images)):
        final = {vault: words.copy() for vault, words in vaults.items()}
        for job in layer.pe_jobs:
            rows = per_pe[job.pe]["rows"][number]
            words = _unpack(results[job.pe][first[job.pe]:first[job.pe] + rows].reshape(-1), layer.bits)
            first[job.pe] += rows
            address, pad = job.out.requests()
            values = np.zeros(len(address), dtype=np.int64)
            if np.count_nonzero(~pad) != len(words):
                raise ValueError(f"{layer.kind}: PE {job.pe} wrote {len(words)} words for "
                                 f"{np.count_nonzero(~pad)} requests")
            values[~pad] = words
            final[job.out.vault][address] = values
        outcome.append({"output": executor.unload(layer, final),
                        "vaults": {vault + 1: words for vault, words in vaults.items()},
                        "final": {vault + 1: words & 0xFFFFFFFF for vault, words in final.items()}})
    return outcome
