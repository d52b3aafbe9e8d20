"""Multi-layer programs on the integrated system: layers that read what the layer before them wrote.

The compiler places every layer's tensors from word 0 of each vault. For a program that runs
without the host between its layers (the iBuffer / layer sequencer), the host loads every
vault once, before the program, so the layers must not overwrite one another's inputs and a
layer must read its input where the layer before it wrote its output:

- :func:`relocate` moves a compiled layer in the vaults (every PMAG program's base and every
  placement, per vault);
- :func:`chain` compiles nothing: it relocates each layer after the words the layers before it
  use, and its linked input onto the earlier layer's output, which must have the same
  placement (the same element of the same vault in every slot);
- :func:`host_images` gives the vault images the host loads once (the tensors no layer of the
  program writes);
- :func:`run_program` is the golden model's run of the program: the vault images carried from
  layer to layer, the PEs' state too (the golden model of the system, ``nt_system``, run over
  the layers so far).
"""
import copy

import numpy as np

from ...errors import ProgramError
from ...golden.neurotrainer.integration import nt_system
from ...spec.neurotrainer import integration as spec
from ...spec.neurotrainer.integration import LUT_ADDRESS_MASK
from ...spec.neurotrainer.packing import elements_per_word, pack_words, unpack_words
from . import executor
from .compiler import COMMON

__all__ = ["relocate", "chain", "host_images", "run_program"]


def prepared_layer(layer, vaults):
    """The golden ``nt_system``'s entry for ``layer``: its PE jobs with their buffer images, read from ``vaults``.

    Parameters
    ----------
    layer : CompiledLayer
    vaults : dict
        System vault number (1 = the first PE's) -> its words, before the layer runs.
    """
    by_pe_vault = {vault - 1: words for vault, words in vaults.items()}
    jobs = []
    for job in layer.pe_jobs:
        blocks1, blocks2 = executor.pe_buffer_images(layer, by_pe_vault, job)
        address, pad = job.out.requests()
        jobs.append({"pe": job.pe, "passes": list(job.passes), "blocks1": list(blocks1),
                     "blocks2": list(blocks2), "out_vault": job.out.vault + 1, "out_address": address,
                     "out_pad": pad})
    return {"kind": layer.kind, "bits": layer.bits, "jobs": jobs, "vaults": vaults}


def relocate(layer, offsets):
    """A copy of ``layer`` moved by ``offsets`` words per compiler vault number (-1 = common; missing: 0)."""
    moved = copy.deepcopy(layer)
    per = elements_per_word(layer.bits)
    seen = set()
    for _, _, stream in moved.streams():
        offset = offsets.get(stream.vault, 0)
        for program in stream.programs:
            if id(program) in seen:
                continue
            seen.add(id(program))
            address = program["base"] & LUT_ADDRESS_MASK
            program["base"] = (program["base"] & ~LUT_ADDRESS_MASK) | (address + offset)
    for _, placements in moved.tensors.values():
        for place in placements:
            place.base += offsets.get(place.vault, 0) * per
    moved.vault_words = {vault: words + offsets.get(vault, 0) for vault, words in layer.vault_words.items()}
    return moved


def _slots(layer, name):
    shape, placements = layer.tensors[name]
    return shape, sorted((place.vault, place.base, tuple(place.index.tolist())) for place in placements)


def chain(layers, links):
    """The layers relocated to run one after the other from one host load.

    Parameters
    ----------
    layers : sequence of CompiledLayer
        Compiled for the same system (``compile_for_system``), from word 0.
    links : sequence of (str or None)
        Per layer after the first, the input tensor that is the previous layer's output (None: none).

    Raises
    ------
    ProgramError
        A linked input whose placement differs from the previous output's (another index map or
        vault), or layers of different element widths.
    """
    if len({layer.bits for layer in layers}) > 1:
        raise ProgramError("a chained program's layers must have one element width (16 or 32 bits)")
    placed = [layers[0]]
    used = dict(layers[0].vault_words)
    for layer, link in zip(layers[1:], links):
        offsets = {vault: used.get(vault, 0) for vault in layer.vault_words}
        if link is not None:
            previous = placed[-1]
            _, outputs = previous.tensors[previous.output]
            _, inputs = layer.tensors[link]
            if len(outputs) != 1 or len(inputs) != 1 or outputs[0].vault != inputs[0].vault:
                raise ProgramError(f"{layer.kind}: input {link!r} and the previous layer's output are not one "
                                   "placement in one vault")
            per = elements_per_word(layer.bits)
            if inputs[0].base % per or outputs[0].base % per:
                raise ProgramError(f"{layer.kind}: input {link!r} does not start at a word")
            offsets[inputs[0].vault] = (outputs[0].base - inputs[0].base) // per
        moved = relocate(layer, offsets)
        if link is not None:
            previous = placed[-1]
            if _slots(moved, link)[1] != _slots(previous, previous.output)[1] or \
                    moved.tensors[link][0] != previous.tensors[previous.output][0]:
                raise ProgramError(f"{layer.kind}: input {link!r} is not placed as the previous layer's output "
                                   f"{previous.output!r} (another shape or element order)")
        for vault, words in moved.vault_words.items():
            used[vault] = max(used.get(vault, 0), words)
        placed.append(moved)
    return placed


def host_images(layers, links, tensors, **params):
    """The images the host loads once, by system vault number, each the vault's depth.

    ``tensors``: per layer the input tensors the host provides (a linked input is left out).
    """
    system = spec.PARAMS.resolve(**{key: value for key, value in params.items() if key in spec.PARAMS.names})
    depth = {COMMON: system["vault_depth"], **{pe: system["pe_vault_depth"] for pe in range(system["pes"])}}
    images = {vault: np.zeros(words, dtype=np.int64) for vault, words in depth.items()}
    for number, (layer, given) in enumerate(zip(layers, tensors)):
        linked = links[number - 1] if number else None
        for name in layer.inputs:
            if name == linked:
                continue
            shape, placements = layer.tensors[name]
            tensor = np.asarray(given[name], dtype=np.int64)
            if tensor.shape != shape:
                raise ProgramError(f"{layer.kind}: input {name!r} has shape {tensor.shape}; expected {shape}")
            flat = np.append(tensor.reshape(-1) & ((1 << layer.bits) - 1), 0)
            for place in placements:
                slots = unpack_words(images[place.vault], layer.bits)
                if place.base + place.index.size > slots.size:
                    raise ProgramError(f"{layer.kind}: input {name!r} beyond vault {place.vault}'s "
                                       f"{depth[place.vault]} words")
                slots[place.base:place.base + place.index.size] = flat[place.index]
                images[place.vault] = pack_words(slots, layer.bits)[:depth[place.vault]]
    for layer in layers:
        for vault, words in layer.vault_words.items():
            if words > depth[vault]:
                raise ProgramError(f"{layer.kind}: vault {vault} needs {words} words, it has {depth[vault]}")
    return {vault + 1: words for vault, words in images.items()}


def run_program(layers, images, **params):
    """The golden model's run of chained layers from one host load, as the system runs them after a reset.

    Parameters
    ----------
    layers : sequence of CompiledLayer
        :func:`chain`'s result.
    images : dict
        :func:`host_images`'s result (system vault numbers).

    Returns
    -------
    list of dict
        Per layer ``output`` (its output tensor, signed) and ``final`` (every vault after it, 32-bit words).
    """
    current = {vault: np.asarray(words, dtype=np.int64) for vault, words in images.items()}
    prepared, outcome = [], []
    for layer in layers:
        prepared.append(prepared_layer(layer, current))
        final = nt_system(prepared, **params)[-1]["final"]
        output = executor.unload(layer, {vault - 1: words for vault, words in final.items()})
        outcome.append({"output": output, "final": final})
        current = final
    return outcome
