"""Host side of the integrated system: compiled layers for its PEs, their routing, and the golden model run.

A layer is compiled by the host compiler (:func:`trainforge.sim.neurotrainer.compiler.compile_layer`)
for the system's PEs (:func:`compile_for_system`). :func:`layer_config` gives the ``config``
port value, :func:`vault_programs` the PMAG programs of every vault, :func:`prepare_layer` the
data the golden model (:func:`trainforge.golden.neurotrainer.integration.nt_system`) takes,
and :func:`run_layers` the golden model's result with each layer's output tensor.

Vault numbering here is the system's: 0 = the common vault, ``1 + i`` = PE ``i``'s vault
(the compiler's -1 and ``i``).
"""
import numpy as np

from ...errors import ProgramError
from ...golden.neurotrainer.integration import nt_system
from ...golden.neurotrainer.pmag import nt_pmag
from ...spec.neurotrainer import integration as spec
from ...spec.neurotrainer.pe_program import decode_pe_program
from . import executor
from .compiler import COMMON, compile_layer

__all__ = ["compile_for_system", "layer_config", "vault_programs", "host_images", "prepare_layer", "run_layers",
           "write_program_requests"]


def _system(params):
    return spec.PARAMS.resolve(**{key: value for key, value in params.items() if key in spec.PARAMS.names})


def compile_for_system(kind, dims, *, sr=False, bits=None, lut=None, **params):
    """``compile_layer(kind, dims)`` for the system's PEs and LUTs (``params``: NTSystem parameters;
    ``lut``: ``{input tensor: "f" | "df"}``, the inputs read through the vault controllers' LUTs)."""
    system = _system(params)
    return compile_layer(kind, dims, pes=system["pes"], pe={key: system[key] for key in spec.PE_KEYS}, sr=sr,
                         bits=bits, lut=lut, lut_params=spec.lut_functions(system))


def _data_requests(program):
    return int(np.count_nonzero(~nt_pmag(program, counter_bits=16)["pad"][:-1]))


def _one(values, what):
    values = set(values)
    if len(values) != 1:
        raise ProgramError(f"the system needs one {what} per layer; the layer has {sorted(values)}")
    return values.pop()


def layer_config(layer):
    """The ``config`` port value of a layer: how the system routes its streams.

    Raises
    ------
    ProgramError
        A layer the system cannot run: copy jobs, unequal block sizes, a broadcast BUF1 and a
        broadcast BUF2 at once, write programs of unequal length, or merged results without one
        write program per result block and the same number of blocks on every PE (the bus's
        turn goes round all PEs).
    """
    if not layer.pe_jobs:
        raise ProgramError(f"{layer.kind}: the system runs PE layers only (data preparation runs on the host)")
    jobs = layer.pe_jobs
    broadcast_in1 = any(job.in1 is not None and job.in1.broadcast for job in jobs)
    local_in1 = any(job.in1 is not None and not job.in1.broadcast for job in jobs)
    if broadcast_in1 and any(job.in2.broadcast for job in jobs) or local_in1 and any(not job.in2.broadcast
                                                                                     for job in jobs):
        raise ProgramError(f"{layer.kind}: both buffers filled from the same kind of vault")
    merge = _one((job.out.vault == COMMON for job in jobs), "result destination")
    elements = layer.pe["lanes"]          # result words per row (16-bit: two elements each)
    requests = _one((_data_requests(program) for job in jobs for program in job.out.programs),
                    "write program length")
    if requests % elements:
        raise ProgramError(f"{layer.kind}: a write program of {requests} words is not whole rows of {elements}")
    if merge:
        programs = _one((len(job.out.programs) for job in jobs), "number of merged write programs per PE")
        blocks = _one((sum(decode_pe_program(word)["emit"] for word in job.passes) for job in jobs),
                      "number of result blocks per PE")
        if blocks != programs:
            raise ProgramError(f"{layer.kind}: a PE emits {blocks} result blocks into {programs} merged write "
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
                raise ProgramError(f"{layer.kind}: vault {stream.vault} has two read streams")
            reads[stream.vault + 1] = list(stream.programs)
    writes[0] = [program for _, program in layer.merged_writes()]
    for job in layer.pe_jobs:
        if job.out.vault != COMMON:
            writes[job.out.vault + 1] += list(job.out.programs)
    return reads, writes


def host_images(layer, tensors):
    """The vault images the host writes for a layer, by compiler vault number (-1 = common).

    The input tensors by their placements, then the layer's data-preparation copy jobs (the
    im2col gather of a tiled convolution) run by the host on the element slots: the system has
    no copy engine, so only the PE part of such a layer runs on it. 16-bit layers: two elements
    per word (``spec/neurotrainer/packing.py``).
    """
    return executor.pack_images(layer, executor.run_copies(layer, executor.load_elements(layer, tensors)))


def write_program_requests(stream):
    """Data and pad requests of each of ``stream``'s PMAG programs, in order (the END requests left out)."""
    return [len(request["pad"]) - 1 for request in stream.golden()]


def prepare_layer(layer, tensors, config=None):
    """The golden model's view of ``layer`` with the input tensors ``tensors``: vault images and PE jobs.

    ``config`` (the ``config`` port value the layer runs with, :func:`layer_config`'s unless a test sets another)
    adds the END-MARK cadence (``out_rows``) and each job's write program lengths, so that the golden model joins
    the results with the write requests as the vault controllers do."""
    vaults = host_images(layer, tensors)
    jobs = []
    for job in layer.pe_jobs:
        blocks1, blocks2 = executor.pe_buffer_images(layer, vaults, job)
        address, pad = job.out.requests()
        jobs.append({"pe": job.pe, "passes": list(job.passes), "blocks1": list(blocks1), "blocks2": list(blocks2),
                     "out_vault": job.out.vault + 1, "out_address": address, "out_pad": pad,
                     "out_programs": write_program_requests(job.out)})
    prepared = {"kind": layer.kind, "bits": layer.bits, "jobs": jobs,
                "vaults": {vault + 1: words for vault, words in vaults.items()}}
    if config is not None:
        prepared["out_rows"] = config["out_rows"]
    return prepared


def run_layers(layers, inputs, configs=None, **params):
    """The layers run one after the other from a reset, as the system runs them (golden model).

    Parameters
    ----------
    layers : sequence of CompiledLayer
        Compiled for the system (:func:`compile_for_system`).
    inputs : sequence of dict
        Each layer's input tensors (``layer.inputs``), integer words.
    configs : sequence of dict or None, optional
        Each layer's ``config`` port value when it is not :func:`layer_config`'s (None: the golden model takes
        every write program to hold its END-MARK's words; :func:`prepare_layer`).
    **params
        The NTSystem parameters.

    Returns
    -------
    list of dict
        Per layer: ``output`` (the output tensor, signed, int64), ``vaults`` (the images the
        host loads, by system vault number) and ``final`` (the vault images after the layer,
        32-bit words as int64).

    Raises
    ------
    ProgramError
        A layer compiled for other PEs than the system's.
    """
    system = _system(params)
    pe_params = {key: system[key] for key in spec.PE_KEYS}
    for layer in layers:
        if layer.pes != system["pes"] or layer.pe != {**layer.pe, **pe_params}:
            raise ProgramError(f"{layer.kind}: compiled for other PEs than the system's")
        if layer.lut and layer.lut != spec.lut_functions(system):
            raise ProgramError(f"{layer.kind}: compiled for other LUTs than the system's")
    configs = configs or [None] * len(layers)
    prepared = [prepare_layer(layer, tensors, config) for layer, tensors, config in zip(layers, inputs, configs)]
    outcome = nt_system(prepared, **system)
    for layer, result in zip(layers, outcome):
        result["output"] = executor.unload(layer, {vault - 1: words for vault, words in result["final"].items()})
    return [{"output": result["output"], "vaults": result["vaults"], "final": result["final"]} for result in outcome]
