"""Reference executor of compiled NeuroTrainer layers: vault images, PMAG streams, PE passes.

:func:`execute` runs a :class:`~trainforge.sim.neurotrainer.compiler.CompiledLayer` the way
the hardware does, with the golden models of its blocks:

1. the input tensors are stored in the vault images by their placements (16-bit layers: two
   elements per word, ``spec/neurotrainer/packing.py``; the data-preparation copies run on the
   element slots before the words are packed);
2. every read stream's addresses come from the PMAG golden model
   (:func:`~trainforge.golden.neurotrainer.pmag.nt_pmag`); a read request with ``pad``
   delivers 0; a data request whose address bits 31 .. 30 select a table (``"f"`` or ``"df"``,
   ``spec/neurotrainer/integration.py`` ``LUT_SELECT``) delivers its word through the vault
   controller's LUT (:func:`~trainforge.golden.neurotrainer.lut.nt_lut_words` with
   ``layer.lut[function]``); the vault word is at the address bits below;
3. each PE job's BUF Input 1 / BUF Input 2 streams are cut into the compiled blocks
   (``lanes`` words per BUF2 row; in 16-bit layers a BUF1 word is each 16-bit half of a read
   word in both halves, an odd block's last high half dropped) and run through the PE golden model
   (:func:`~trainforge.golden.neurotrainer.pe.nt_pe`: CNT2/CNT1 sweeps, the MAC arithmetic
   of ``golden/neurotrainer/mac.py`` including SR-LO, the comparators' max/argmax);
4. the PE's result words (rows of ``lanes`` words, packed as they are in 16-bit layers) are stored
   by its write stream; results merged
   into the common vault are cut into result blocks (one per write program), interleaved as the
   bus merges them (PE 0, 1, ..., one block per turn) and stored by the common vault's merged
   write programs in :meth:`~trainforge.sim.neurotrainer.compiler.CompiledLayer.merged_writes`
   order, the way the common write PMAG runs them; for data
   preparation the read stream's words go to the write stream's non-pad requests and pad
   requests store 0;
5. the output tensor is read back from the vaults by its placement.
"""
import numpy as np

from ...golden.neurotrainer.lut import nt_lut_words
from ...spec.neurotrainer.integration import LUT_ADDRESS_MASK, LUT_SELECT, LUT_SELECT_SHIFT
from ...golden.neurotrainer.pe import nt_pe
from ...spec.neurotrainer.packing import elements_per_word, pack_words, splat_halves, unpack_words
from .compiler import COMMON, Stream

__all__ = ["load", "load_elements", "pack_images", "run_copies", "unload", "pe_buffer_images", "execute",
           "maxpool_decode"]

_MASK32 = (1 << 32) - 1


def load(layer, inputs):
    """Vault images (dict vault -> int64 array of 32-bit words) holding the layer's input tensors.

    Parameters
    ----------
    layer : CompiledLayer
    inputs : dict of str to array_like of int
        Every name in ``layer.inputs``, with the tensor's logical shape (values taken modulo 2**32,
        or 2**16 in a 16-bit layer, two per word).
    """
    return pack_images(layer, load_elements(layer, inputs))


def pack_images(layer, slots):
    """Word images of element-slot images (16-bit layers: two slots per word, the first in the low half)."""
    return {vault: pack_words(values, layer.bits) for vault, values in slots.items()}


def load_elements(layer, inputs):
    """Element-slot images holding the layer's input tensors (a 32-bit layer's slots are its words)."""
    per = elements_per_word(layer.bits)
    vaults = {vault: np.zeros(words * per, dtype=np.int64) for vault, words in layer.vault_words.items()}
    for name in layer.inputs:
        shape, placements = layer.tensors[name]
        tensor = np.asarray(inputs[name], dtype=np.int64)
        if tensor.shape != shape:
            raise ValueError(f"input {name!r} has shape {tensor.shape}; the layer expects {shape}")
        flat = np.append(tensor.reshape(-1) & ((1 << layer.bits) - 1), 0)          # index -1 reads the trailing 0
        for place in placements:
            vaults[place.vault][place.base:place.base + place.index.size] = flat[place.index]
    return vaults


def unload(layer, vaults, name=None):
    """A tensor (default: the output) read back from the vault images, as signed 32-bit int64."""
    shape, placements = layer.tensors[name or layer.output]
    flat = np.zeros(int(np.prod(shape)), dtype=np.int64)
    slots = {vault: unpack_words(vaults[vault], layer.bits) for vault in {place.vault for place in placements}}
    for place in placements:
        words = slots[place.vault][place.base:place.base + place.index.size]
        used = place.index >= 0
        flat[place.index[used]] = words[used]
    bits = np.int64(layer.bits)
    flat = flat & ((1 << layer.bits) - 1)
    flat = flat - ((flat >> (bits - 1)) << bits)
    return flat.reshape(shape)


def run_copies(layer, vaults):
    """Run the layer's data-preparation copy jobs on element-slot images (:func:`load_elements`), in order (in place).

    The copies are element-level: in a 16-bit layer a copy request moves one 16-bit element
    (the system does not run data preparation; the host does, on the elements).
    """
    for job in layer.copy_jobs:
        _write(job.dest, vaults, _read(job.source, vaults))
    return vaults


def _read(stream, vaults, layer=None):
    address, pad = stream.requests()
    select = (address >> LUT_SELECT_SHIFT) & 3
    words = vaults[stream.vault][np.where(pad, 0, address & LUT_ADDRESS_MASK)]
    for function, code in LUT_SELECT.items():
        chosen = select == code
        if chosen.any():
            words = np.where(chosen, nt_lut_words(words, layer.bits, **layer.lut[function]), words)
    return np.where(pad, 0, words)


def _write(stream, vaults, words):
    address, pad = stream.requests()
    data_requests = int(np.count_nonzero(~pad))
    if data_requests != len(words):
        raise ValueError(f"write stream on vault {stream.vault} has {data_requests} data requests for "
                         f"{len(words)} words")
    values = np.zeros(len(address), dtype=np.int64)
    values[~pad] = words
    vaults[stream.vault][address] = values


def _buf1_words(words, sizes, bits):
    """BUF Input 1 words of a fill stream: the words (32-bit), or per block of ``W`` elements the first ``W``
    16-bit halves of its ``ceil(W / 2)`` words, each in both halves of a BUF1 word."""
    if bits == 32:
        return words
    need = sum(-(-size // 2) for size in sizes)
    if len(words) != need:
        raise ValueError(f"BUF Input 1 stream has {len(words)} words; the blocks need {need}")
    halves = unpack_words(words, 16)
    starts = np.cumsum([0, *[2 * -(-size // 2) for size in sizes]])
    return np.concatenate([splat_halves(halves[start:start + size]) for start, size in zip(starts, sizes)]
                          or [np.zeros(0, dtype=np.int64)])


def _blocks(words, sizes, width, name):
    if len(words) != sum(sizes) * width:
        raise ValueError(f"{name} stream has {len(words)} words; the blocks need {sum(sizes) * width}")
    edges = np.cumsum([0, *sizes]) * width
    return [words[start:end].reshape(-1, width) if width > 1 else words[start:end]
            for start, end in zip(edges[:-1], edges[1:])]


def pe_buffer_images(layer, vaults, job):
    """The BUF Input 1 and BUF Input 2 fill blocks of one PE job, as its streams deliver them.

    Returns
    -------
    (list of numpy.ndarray, list of numpy.ndarray)
        BUF1 blocks (words) and BUF2 blocks (rows x lanes): the ``blocks1``/``blocks2``
        of :func:`~trainforge.golden.neurotrainer.pe.nt_pe` and the PE testbench's fill streams.
    """
    lanes = layer.pe["lanes"]
    blocks1 = _blocks(_buf1_words(_read(job.in1, vaults, layer), job.in1_blocks, layer.bits), job.in1_blocks, 1,
                      "BUF Input 1") if job.in1 is not None else []
    blocks2 = _blocks(_read(job.in2, vaults, layer), job.in2_blocks, lanes, "BUF Input 2")
    return blocks1, blocks2


def execute(layer, inputs):
    """Run a compiled layer on its inputs.

    Parameters
    ----------
    layer : CompiledLayer
    inputs : dict of str to array_like of int
        The input tensors (``layer.inputs``), integer words (fixed point as the PE's format).

    Returns
    -------
    dict
        ``output`` (the output tensor, signed 32-bit values as int64), ``vaults`` (the final
        vault images), ``pe`` (per PE job the ``nt_pe`` result dict).
    """
    vaults = pack_images(layer, run_copies(layer, load_elements(layer, inputs)))
    pe_results, merged = [], {}
    for job in layer.pe_jobs:
        blocks1, blocks2 = pe_buffer_images(layer, vaults, job)
        result = nt_pe(job.passes, blocks1, blocks2, **layer.pe)
        pe_results.append(result)
        words = result["results"].astype(np.int64).reshape(-1)
        if job.out.vault == COMMON:
            merged[job.pe] = _result_blocks(job.out, words)
        else:
            _write(job.out, vaults, words)
    if merged:
        _write(Stream(COMMON, [program for _, program in layer.merged_writes()]), vaults, _bus_merge(merged))
    return {"output": unload(layer, vaults), "vaults": vaults, "pe": pe_results}


def _result_blocks(stream, words):
    """A PE's result words cut into its result blocks: one per write program (its data requests)."""
    sizes = [int(np.count_nonzero(~run["pad"][:-1])) for run in stream.golden()]
    if sum(sizes) != len(words):
        raise ValueError(f"merged write programs have {sum(sizes)} data requests for {len(words)} result words")
    return np.split(words, np.cumsum(sizes)[:-1])


def _bus_merge(blocks):
    """The merged word stream the bus delivers: PE 0, 1, ... in turn, one result block per turn."""
    queues = {pe: list(blocks[pe]) for pe in sorted(blocks)}
    stream = []
    while any(queues.values()):
        for pe in queues:
            if queues[pe]:
                stream.append(queues[pe].pop(0))
    return np.concatenate(stream) if stream else np.zeros(0, dtype=np.int64)


def maxpool_decode(words):
    """``(max, argmax)`` of max-pooling result words ``value & 0xFFFF | index << 16``."""
    words = np.asarray(words, dtype=np.int64) & _MASK32
    value = words & 0xFFFF
    return value - ((value >> 15) << 16), words >> 16
