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

``execute(..., pe_model="batched")`` gives the same output, vault contents and per-job PE
results with the batched PE model
(:func:`~trainforge.golden.neurotrainer.pe_batched.nt_pe_batched`) instead of ``nt_pe``, and
reads every stream piece by piece (:class:`~trainforge.sim.neurotrainer.stream_cursor.StreamCursor`)
instead of building it whole: the copies run chunk by chunk, the PE fill streams are read as
the PE batches need them, and the vault images hold 32-bit words (``uint32``), so a layer
needs about 4 bytes per vault word plus a bounded working set. The copies may then not read
what they write (true of every compiled layer: "regions never overlap").
"""
import numpy as np

from ...errors import ParameterError
from ...golden.neurotrainer.lut import nt_lut_words
from ...spec.neurotrainer.integration import LUT_ADDRESS_MASK, LUT_SELECT, LUT_SELECT_SHIFT
from ...golden.neurotrainer.pe import nt_pe
from ...golden.neurotrainer.pe_batched import BlockList, nt_pe_batched
from ...golden.neurotrainer.pmag_steps import ProgramSteps
from ...spec.neurotrainer.packing import elements_per_word, pack_words, splat_halves, unpack_words
from .compiler import COMMON, Stream
from .program import COUNTER_BITS
from .stream_cursor import StreamCursor

__all__ = ["PE_MODELS", "load", "load_elements", "pack_images", "run_copies", "unload", "pe_buffer_images",
           "execute", "maxpool_decode"]

#: The PE models :func:`execute` can run: ``nt_pe`` pass by pass, or the batched model.
PE_MODELS = ("per_pass", "batched")

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
    per = elements_per_word(layer.bits)
    for place in placements:
        slots = place.base + np.arange(place.index.size, dtype=np.int64)
        words = np.asarray(vaults[place.vault][slots // per], dtype=np.int64)     # only the placement's words
        if per > 1:
            words = (words >> (16 * (slots % per))) & 0xFFFF
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
    return _read_words(vaults[stream.vault], address, pad, layer)


def _read_words(image, address, pad, layer=None):
    """The words read requests ``(address, pad)`` deliver from a vault image (pad: 0; LUT-selected: the LUT's)."""
    padded = pad.any()
    select = (address >> LUT_SELECT_SHIFT) & 3
    if not select.any():                        # no table selected: the vault words as they are
        words = np.asarray(image[np.where(pad, 0, address) if padded else address], dtype=np.int64)
        return np.where(pad, 0, words) if padded else words
    words = np.asarray(image[np.where(pad, 0, address & LUT_ADDRESS_MASK)], dtype=np.int64)
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


def execute(layer, inputs, *, pe_model="per_pass", batch_words=1 << 23):
    """Run a compiled layer on its inputs.

    Parameters
    ----------
    layer : CompiledLayer
    inputs : dict of str to array_like of int
        The input tensors (``layer.inputs``), integer words (fixed point as the PE's format).
    pe_model : {"per_pass", "batched"}
        ``nt_pe`` pass by pass with every stream built whole, or the batched PE model with the
        streams read piece by piece (the same results; see the module docstring).
    batch_words : int
        ``"batched"``: about how many operand words a batch of passes reads.

    Returns
    -------
    dict
        ``output`` (the output tensor, signed 32-bit values as int64), ``vaults`` (the final
        vault images: int64, or uint32 with ``"batched"``), ``pe`` (per PE job the ``nt_pe``
        result dict).
    """
    if pe_model not in PE_MODELS:
        raise ParameterError(f"pe_model = {pe_model!r}; allowed: {', '.join(PE_MODELS)}")
    if pe_model == "batched":
        return _execute_batched(layer, inputs, batch_words)
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


def _load_slots(layer, inputs):
    """:func:`load_elements` into compact images: uint32 slots (32-bit layers) or uint16 (16-bit)."""
    per = elements_per_word(layer.bits)
    dtype = np.uint32 if per == 1 else np.uint16
    vaults = {vault: np.zeros(words * per, dtype=dtype) for vault, words in layer.vault_words.items()}
    for name in layer.inputs:
        shape, placements = layer.tensors[name]
        tensor = np.asarray(inputs[name], dtype=np.int64)
        if tensor.shape != shape:
            raise ValueError(f"input {name!r} has shape {tensor.shape}; the layer expects {shape}")
        flat = np.append(tensor.reshape(-1) & ((1 << layer.bits) - 1), 0).astype(dtype)
        for place in placements:
            vaults[place.vault][place.base:place.base + place.index.size] = flat[place.index]
    return vaults


def _write_chunked(stream, image, words):
    """:func:`_write` request chunk by request chunk: ``words`` to the data requests in order, 0 to pad ones."""
    cursor, used = StreamCursor(stream), 0
    while (chunk := cursor.next_chunk()) is not None:
        address, pad = chunk
        data = int(np.count_nonzero(~pad))
        if used + data > len(words):
            used += data + cursor.remaining()
            break
        values = np.zeros(len(address), dtype=image.dtype)
        values[~pad] = words[used:used + data]
        image[address] = values
        used += data
    if used != len(words):
        raise ValueError(f"write stream on vault {stream.vault} has {used} data requests for {len(words)} words")


def _copy_chunked(job, vaults):
    """One copy job on element-slot images, chunk by chunk: the source's words to the dest's data requests."""
    source, dest = StreamCursor(job.source), StreamCursor(job.dest)
    image, copied = vaults[job.dest.vault], 0
    while (chunk := dest.next_chunk()) is not None:
        address, pad = chunk
        data = int(np.count_nonzero(~pad))
        values = np.zeros(len(address), dtype=image.dtype)
        if data:
            values[~pad] = _read_words(vaults[job.source.vault], *source.take(data))
        image[address] = values
        copied += data
    left = source.remaining()
    if left:
        raise ValueError(f"write stream on vault {job.dest.vault} has {copied} data requests for "
                         f"{copied + left} words")


class _StreamBlocks:
    """A PE fill stream as a feed of :func:`nt_pe_batched`: the blocks read from the vault as they are taken."""

    def __init__(self, layer, vaults, stream, sizes, width, name):
        self.layer, self.image, self.width, self.name = layer, vaults[stream.vault], width, name
        self.sizes = list(sizes)
        self.cursor = StreamCursor(stream)
        self.buf1 = width == 1 and layer.bits == 16       # a 16-bit BUF Input 1 stream: two weights per word
        self._next = 0

    def _requests(self, sizes):
        return sum(-(-size // 2) for size in sizes) if self.buf1 else sum(sizes) * self.width

    def take(self, count):
        sizes = self.sizes[self._next:self._next + count]
        self._next += count
        words = _read_words(self.image, *self.cursor.take(self._requests(sizes)), self.layer)
        if self.buf1:
            words = _buf1_words(words, sizes, 16)
        return words.reshape(-1, self.width)

    def finish(self):
        """Take the blocks no pass read; the stream must end exactly with the last block (as :func:`_blocks`)."""
        need = self._requests(self.sizes)
        taken = self._requests(self.sizes[:self._next])
        rest = self.cursor.remaining()
        if taken + rest != need:
            raise ValueError(f"{self.name} stream has {taken + rest} words; the blocks need {need}")


def _result_blocks_counted(stream, words):
    """:func:`_result_blocks` with the data requests counted by :class:`ProgramSteps`."""
    sizes = [int(np.count_nonzero(~ProgramSteps(program, COUNTER_BITS).requests()[1])) for program in stream.programs]
    if sum(sizes) != len(words):
        raise ValueError(f"merged write programs have {sum(sizes)} data requests for {len(words)} result words")
    return np.split(words, np.cumsum(sizes)[:-1])


def _execute_batched(layer, inputs, batch_words):
    """:func:`execute` with the batched PE model and streams read piece by piece (uint32 vault images)."""
    slots = _load_slots(layer, inputs)
    for job in layer.copy_jobs:
        _copy_chunked(job, slots)
    if layer.bits == 32:
        vaults = slots
    else:
        vaults = {vault: pack_words(values, 16).astype(np.uint32) for vault, values in slots.items()}
    del slots
    lanes = layer.pe["lanes"]
    pe_results, merged = [], {}
    for job in layer.pe_jobs:
        feed1 = _StreamBlocks(layer, vaults, job.in1, job.in1_blocks, 1, "BUF Input 1") \
            if job.in1 is not None else BlockList([], 1)
        feed2 = _StreamBlocks(layer, vaults, job.in2, job.in2_blocks, lanes, "BUF Input 2")
        result = nt_pe_batched(job.passes, feed1, feed2, **layer.pe, batch_words=batch_words)
        for feed in (feed1, feed2):
            if isinstance(feed, _StreamBlocks):
                feed.finish()
        pe_results.append(result)
        words = result["results"].astype(np.int64).reshape(-1)
        if job.out.vault == COMMON:
            merged[job.pe] = _result_blocks_counted(job.out, words)
        else:
            _write_chunked(job.out, vaults[job.out.vault], words)
    if merged:
        _write_chunked(Stream(COMMON, [program for _, program in layer.merged_writes()]), vaults[COMMON],
                       _bus_merge(merged))
    return {"output": unload(layer, vaults), "vaults": vaults, "pe": pe_results}
