"""Golden and cycle models of the ring of ``2 x C`` cores: all-gather, reduce-scatter, the GEMV on all cores.

The cores form a unidirectional systolic ring: core ``k`` sends to core
``(k + 1) % P`` (``P = 2C``); a word takes one cycle per hop, and a link
carries ``n_r`` words per cycle (one per row bus of the sending core).

Both collectives are the ring algorithms of Chan et al. (the paper's [24]):
``P - 1`` steps, in each of which every core sends one of the ``P`` chunks to
its neighbour. A chunk is ``cw = ceil(size / (P n_r))`` words of ``n_r``
elements (the vector is zero-padded to ``P cw n_r`` elements; chunk ``c`` is
words ``c cw .. (c + 1) cw - 1``). Each step costs the chunk's transfer
cycles plus one hop, so

``cycles = (P - 1) * (cw + HOP_CYCLES)``,

except that a word lands ``COLLECTIVE_LANDING_LATENCY`` = 2 cycles after its read (the hop, then a landing
register): a step lasts at least 3 cycles (the next step reads what this one landed), and the command lasts
until its last word has landed: ``(P - 2) * max(cw + 1, 3) + cw + 2`` (``collective_command_cycles``).
Without the hop latency and the rounding this is the paper's
``(n b - n b / P) / n_r``. These are also the exact rules of the RTL ring
:class:`trainforge.hw.caterpillar.ring.CPRing` (:func:`ring_schedule`).
"""
import numpy as np

from ...errors import ProgramError
from ...spec.caterpillar import (COLLECTIVE_LANDING_LATENCY, ERROR_OFFSET, HOP_CYCLES, collective_command_cycles, REJECT_CYCLES, RING_OUTPUT_LATENCY, RING_PARAMS,
                                 RING_READ_LATENCY, RingField,
                                 RingOp, params_with_defaults, ring_command_violation)
from ..dense_pe import wrap
from ..fp import fp32_add
from . import core
from . import core as _core_model  # ``core`` is also a field of a ring command

__all__ = ["HOP_CYCLES", "COLLECTIVE_LANDING_LATENCY", "collective_command_cycles", "RING_OUTPUT_LATENCY", "RING_READ_LATENCY", "RingOp", "RING_GEMV_FORWARD", "RING_GEMV_BACKWARD", "RING_LOAD",
           "RING_WRITE", "RING_READ",
           "RING_ALL_GATHER", "RING_REDUCE_SCATTER", "chunk_words", "chunk_bounds", "all_gather",
           "reduce_scatter", "collective_cycles", "vector_words", "all_gather_buffers",
           "reduce_scatter_buffers", "ring_panels", "ring_gemv_forward", "ring_gemv_backward",
           "backward_words", "backward_buffers", "backward_fetch_cycles", "ring_schedule", "gemv_command_cycles", "RingField", "command", "check_command", "command_error",
           "command_schedule"]

#: Short names of the :class:`~trainforge.spec.caterpillar.RingOp` members.
(RING_GEMV_FORWARD, RING_GEMV_BACKWARD, RING_LOAD, RING_WRITE, RING_READ,
 RING_ALL_GATHER, RING_REDUCE_SCATTER) = (
    RingOp.GEMV_FORWARD, RingOp.GEMV_BACKWARD, RingOp.LOAD, RingOp.WRITE, RingOp.READ,
    RingOp.ALL_GATHER, RingOp.REDUCE_SCATTER)


def _ring_params(given, *names):
    """The values of ``names``: ``given`` (a parameter dict), else the ``cp_ring`` schema defaults."""
    values = params_with_defaults(RING_PARAMS, given)
    return tuple(values[name] for name in names)


def chunk_words(size, cores, elements_per_word=1):
    """Words of ``elements_per_word`` elements (a core's ``n_r``) in each core's chunk of a ``size``-element vector
    (at least one)."""
    return max(1, -(-int(size) // (cores * elements_per_word)))


def chunk_bounds(size, cores, elements_per_word=1):
    """``(start, stop)`` of each core's chunk: ``chunk_words * elements_per_word`` elements each, the last ones
    cut at ``size`` (possibly empty)."""
    length = chunk_words(size, cores, elements_per_word) * elements_per_word
    return [(min(k * length, size), min((k + 1) * length, size)) for k in range(cores)]


def all_gather(chunks):
    """Every core ends with the concatenation of all cores' chunks.

    Parameters
    ----------
    chunks : list of array_like
        ``chunks[k]`` is core ``k``'s block ``Y_k``.

    Returns
    -------
    list of numpy.ndarray
        One (identical) gathered array per core.
    """
    gathered = np.concatenate([np.asarray(chunk) for chunk in chunks])
    return [gathered.copy() for _ in chunks]


def reduce_scatter(partials, *, elements_per_word=1, **params):
    """Core ``k`` ends with chunk ``k`` of the sum of all cores' partial vectors (wrapping sums; ``mac="fp16"``:
    FP32 sums in the ring's order, ``((p_{k+1} + p_{k+2}) + ...) + p_k``).

    Parameters
    ----------
    partials : array_like, shape (P, size)
        Core ``k``'s partial output ``X_k``.
    elements_per_word : int
        Elements per ring word (a core's ``n_r``; chunks are whole words, :func:`chunk_bounds`); 1: chunks of
        single elements.
    **params
        ``acc_width``, ``mac`` (defaults: the ``cp_ring`` schema's).

    Returns
    -------
    list of numpy.ndarray
        ``P`` chunks, by :func:`chunk_bounds`.
    """
    acc_width, mac = _ring_params(params, "acc_width", "mac")
    partials = np.asarray(partials, dtype=np.int64)
    bounds = chunk_bounds(partials.shape[1], partials.shape[0], elements_per_word)
    if mac == "fp16":  # FP32 lanes: chunk k is added up as it travels, from core k + 1 around to core k
        cores, chunks = partials.shape[0], []
        for k, (start, stop) in enumerate(bounds):
            total = partials[(k + 1) % cores, start:stop] & 0xFFFFFFFF
            for step in range(2, cores + 1):
                total = fp32_add(total, partials[(k + step) % cores, start:stop] & 0xFFFFFFFF)
            chunks.append(wrap(np.asarray(total, dtype=np.uint64), acc_width, True))
        return chunks
    total = wrap(partials.astype(np.uint64).sum(axis=0, dtype=np.uint64), acc_width, True)
    return [total[start:stop] for start, stop in bounds]


def collective_cycles(size, cores, n_r):
    """Cycles of a ring all-gather or reduce-scatter of ``size`` elements over ``cores`` cores."""
    chunk = -(-int(size) // cores)
    return collective_command_cycles(-(-chunk // n_r), cores)


def vector_words(vector, words, n_r):
    """``vector`` zero-padded to ``words`` words of ``n_r`` elements, shape ``(words, n_r)``."""
    vector = np.asarray(vector, dtype=np.int64).reshape(-1)
    padded = np.zeros(words * n_r, dtype=np.int64)
    padded[:vector.size] = vector
    return padded.reshape(words, n_r)


def all_gather_buffers(buffers, chunk_words):
    """Ring buffers after the RTL all-gather: chunk ``c`` of every core becomes core ``c``'s chunk ``c``.

    Parameters
    ----------
    buffers : array_like, shape (P, depth, n_r)
        Each core's ring buffer before the collective (``depth >= P * chunk_words``).
    chunk_words : int

    Returns
    -------
    numpy.ndarray, same shape
    """
    result = np.array(buffers, dtype=np.int64)
    cores, cw = result.shape[0], chunk_words
    gathered = np.concatenate([result[c, c * cw:(c + 1) * cw] for c in range(cores)])
    result[:, :cores * cw] = gathered
    return result


def reduce_scatter_buffers(buffers, chunk_words, **params):
    """Ring buffers after the RTL reduce-scatter, every word of them.

    At step ``s`` (``0 .. P - 2``) core ``k`` sends chunk ``(k - s - 1) % P`` and
    core ``k + 1`` adds it to its own copy of that chunk. So chunk ``c`` of core
    ``k`` ends as the sum of the partials of cores ``k, k - 1, ..., k - j``
    (``j = (k - c - 1) % P``): chunk ``k`` is the full sum, chunk ``k - 1`` is
    untouched.

    Parameters
    ----------
    buffers : array_like, shape (P, depth, n_r)
    chunk_words : int
    **params
        ``acc_width`` (default: the ``cp_ring`` schema's).

    Returns
    -------
    numpy.ndarray, same shape
    """
    acc_width, mac = _ring_params(params, "acc_width", "mac")
    source = np.array(buffers, dtype=np.int64)
    result = source.copy()
    cores, cw = source.shape[0], chunk_words
    for k in range(cores):
        for c in range(cores):
            summed = [(k - t) % cores for t in range((k - c - 1) % cores + 1)]
            if mac == "fp16":  # FP32 lanes: the chunk's partials added as they travel, from core c + 1 on
                words = source[summed[-1], c * cw:(c + 1) * cw] & 0xFFFFFFFF
                for sender in reversed(summed[:-1]):
                    words = fp32_add(words, source[sender, c * cw:(c + 1) * cw] & 0xFFFFFFFF)
                result[k, c * cw:(c + 1) * cw] = wrap(words.astype(np.uint64), acc_width, True)
                continue
            words = source[summed, c * cw:(c + 1) * cw].astype(np.uint64).sum(axis=0, dtype=np.uint64)
            result[k, c * cw:(c + 1) * cw] = wrap(words, acc_width, True)
    return result


def ring_panels(weights, n_r, cores):
    """Row panels of ``W`` for the ``P = cores`` cores of the ring GEMV (Fig. 4 on ``P`` cores): ``Mb`` blocks
    split as ``mb = ceil(Mb / P)`` blocks per core, core ``k`` holding blocks ``k * mb .. (k + 1) * mb - 1``
    (the last panels zero-padded, possibly all zeros).

    Returns
    -------
    mb : int
    panels : list of ``cores`` numpy.ndarray, shape (mb * n_r, n)
    """
    weights = np.asarray(weights, dtype=np.int64)
    mb = -(-core.blocks(weights.shape[0], n_r) // cores)
    rows = mb * n_r
    padded = core.pad(weights, cores * rows, weights.shape[1])
    return mb, [padded[k * rows:(k + 1) * rows] for k in range(cores)]


def ring_gemv_forward(weights, x, *, overlap=False, padded=False, **params):
    """Fig. 4(a, c) on all ``P`` cores: core ``k`` holds row panel ``k`` of ``W`` (:func:`ring_panels`) and the
    matching part of ``x``, and reduces internally; the partial outputs are summed by a chain of adds along the
    ring: core 0's word crosses the hop to core 1, which adds its own word and passes the sum on, up to core
    ``P - 1``, whose sum is the output.

    ``padded``: return every lane of the ``Nb`` output words, the padding lanes too (zero in ``fixed``; with
    ``mac="fp16"`` a non-finite ``x`` meeting a padding zero makes them NaN, as in the RTL).

    Returns
    -------
    y : numpy.ndarray
        The output, wrapped to ``acc_width``.
    cycles : int
        From the ring's acceptance of the command to the last output word, without stalls
        (:func:`ring_schedule`).
    """
    cores, n_r, acc_width, reduction, mac = _ring_params(params, "cores", "n_r", "acc_width", "reduction", "mac")
    weights = np.asarray(weights, dtype=np.int64)
    mb, panels = ring_panels(weights, n_r, cores)
    inputs = vector_words(x, cores * mb, n_r).reshape(cores, -1)
    total = None
    for panel, vector in zip(panels, inputs):  # the chain: core k adds its partial to the sum of cores 0 .. k-1
        partial = core.gemv_forward(panel, vector, n_r=n_r, acc_width=acc_width, mac=mac,
                                    reduction=reduction)[1].reshape(-1)
        if total is None:  # core 0's words enter the chain as they are
            total = partial.astype(np.int64).astype(np.uint64) & np.uint64(0xFFFFFFFFFFFFFFFF)
        elif mac == "fp16":  # FP32 lanes: ((p_0 + p_1) + p_2) + ..., one rounding each
            total = fp32_add(total & np.uint64(0xFFFFFFFF), partial & 0xFFFFFFFF).astype(np.uint64)
        else:
            total = total + partial.astype(np.int64).astype(np.uint64)
    y = wrap(total, acc_width, True)
    nb = core.blocks(weights.shape[1], n_r)
    schedule = ring_schedule(RING_GEMV_FORWARD, mb=mb, nb=nb, cores=cores, n_r=n_r, reduction=reduction,
                             overlap=overlap)
    return (y if padded else y[:weights.shape[1]]), int(schedule.output_offsets[-1])


def ring_gemv_backward(weights, e, *, overlap=False, padded=False, **params):
    """Fig. 4(b, d) on all ``P`` cores: ``e`` is broadcast along the ring (core ``k`` gets it ``k`` hops after
    core 0); each core reduces within itself and produces its part of ``d``, rows ``k * mb * n_r ..`` of
    ``W e``.

    Returns
    -------
    d : numpy.ndarray
    cycles : int
        From the ring's acceptance of the command to the last output word, without stalls
        (:func:`ring_schedule`).
    """
    cores, n_r, acc_width, reduction = _ring_params(params, "cores", "n_r", "acc_width", "reduction")
    weights = np.asarray(weights, dtype=np.int64)
    mb, panels = ring_panels(weights, n_r, cores)
    mac, = _ring_params(params, "mac")
    parts = [core.gemv_backward(panel, e, n_r=n_r, acc_width=acc_width, mac=mac, reduction=reduction)[1].reshape(-1)
             for panel in panels]
    nb = core.blocks(weights.shape[1], n_r)
    schedule = ring_schedule(RING_GEMV_BACKWARD, mb=mb, nb=nb, cores=cores, n_r=n_r, reduction=reduction,
                             overlap=overlap)
    d = np.concatenate(parts)  # every row of the P panels (padded=True: the padding rows too, see the forward)
    return (d if padded else d[:weights.shape[0]]), int(schedule.output_offsets[-1])


def backward_words(d, mb, n_r, cores):
    """The ``o_data`` words of the ring's backward GEMV, block-major: word ``b`` of core 0, of core 1, ...,
    of core ``P - 1``, then word ``b + 1`` of each.

    Parameters
    ----------
    d : array_like
        The output of :func:`ring_gemv_backward` (padded with zeros to ``cores * mb * n_r``).

    Returns
    -------
    numpy.ndarray, shape (cores * mb, n_r)
    """
    return vector_words(d, cores * mb, n_r).reshape(cores, mb, n_r).transpose(1, 0, 2).reshape(-1, n_r)


def backward_buffers(buffers, d, mb):
    """Ring buffers after the backward GEMV: core ``k``'s part of ``d`` lands in its own chunk ``k``
    (buffer words ``k * mb .. (k + 1) * mb - 1``; an all-gather with ``cw = mb`` then gives every core all of
    ``d``). Other words are unchanged.

    Parameters
    ----------
    buffers : array_like, shape (P, depth, n_r)
    d : array_like
        The output of :func:`ring_gemv_backward`, any length up to ``P * mb * n_r`` (zero-padded).
    """
    result = np.array(buffers, dtype=np.int64)
    cores, _, n_r = result.shape
    words = vector_words(d, cores * mb, n_r).reshape(cores, mb, n_r)
    for k in range(cores):
        result[k, k * mb:(k + 1) * mb] = words[k]
    return result


def backward_fetch_cycles(landings):
    """Cycles (from acceptance) in which the ring reads each backward output word from its ring buffer.

    ``landings[b, k]``: the cycle core ``k``'s word ``b`` is written into its ring buffer. The words are read
    in block-major order, one per cycle at most, each in the cycle after its landing at the earliest:
    ``F = max(landing + 1, previous F + 1)``.
    """
    fetches, previous = [], -1
    for landing in np.asarray(landings, dtype=np.int64).reshape(-1):
        previous = max(int(landing) + 1, previous + 1)
        fetches.append(previous)
    return np.asarray(fetches, dtype=np.int64)


def ring_schedule(op, *, overlap=False, mb=1, nb=1, words=1, **params):
    """Cycle schedule of one ``cp_ring`` command without stalls, as a :class:`~.core.Schedule`.

    ``issue_cycles + core.COMMAND_LATENCY`` is the spacing from the command's acceptance to the next
    command's; ``output_offsets`` are the cycles from acceptance to each ``o_data`` transfer.

    - ``RING_WRITE`` (``words`` per core): ``cores * words`` input words, one per cycle.
    - ``RING_READ``: ``cores * words`` output words (core-major), the first four cycles after acceptance
      (the first read one cycle after acceptance, ``RING_READ_LATENCY`` = 2 cycles in the buffer's read
      register and the read-out register behind it, one in the output stage).
    - ``RING_ALL_GATHER``, ``RING_REDUCE_SCATTER`` (``words`` = chunk words ``cw``):
      ``collective_command_cycles(cw, cores)`` = ``(cores - 2) * max(cw + HOP_CYCLES, 3) + cw + 2``: each step
      reads ``cw`` words in every core, each written in the neighbour ``COLLECTIVE_LANDING_LATENCY`` (2) cycles
      later (the hop, then the landing register); the next step starts ``max(cw + 1, 3)`` cycles after the
      step's first read (its first read after the first landing), and the command ends with the landing of
      the last step's last word.
    - ``RING_GEMV_FORWARD``, ``RING_GEMV_BACKWARD`` (Fig. 4 on all ``P`` cores): every core runs the core's
      GEMV (:func:`~.core.schedule`) on its row panel, core 0 from the cycle after acceptance and core ``k``
      ``k`` hops later (the command, and backward the vector ``e``, travel the ring core to core). Forward, the
      partial outputs are summed by a chain of adds: core ``k``'s word ``b`` meets the running sum of cores
      ``0 .. k-1`` (one hop from core ``k - 1``) in the cycle core ``k`` produces it, so core ``P - 1``'s sum
      enters the output stage ``(P - 1) * HOP_CYCLES`` after core 0's word. Backward, core ``k``'s word ``b``
      is written into its ring buffer (chunk ``k``, word ``k * mb + b``) as it leaves the core; the ring
      reads the words block-major (word ``b`` of cores ``0 .. P-1``, then ``b + 1``), one per cycle, each
      in the cycle after its landing at the earliest (:func:`backward_fetch_cycles`), and the read word
      enters the output stage ``RING_READ_LATENCY`` (2) cycles later (the buffer's read register, the
      read-out register).
    - ``RING_LOAD``: the core's LOAD (:func:`~.core.schedule`) on one core, plus one cycle to pass the command
      and one to see the core idle again.
    Every result word crosses the ring's output stream stage (``RING_OUTPUT_LATENCY`` cycles); the ring
    accepts the next command the cycle after its last result word has entered that stage, which is the
    cycle that word is on ``o_data``.
    """
    cores, n_r, reduction = _ring_params(params, "cores", "n_r", "reduction")
    latency = core.COMMAND_LATENCY
    if op == RING_WRITE:
        return core.Schedule(cores * words, [], 0)
    if op == RING_READ:
        offsets = latency + RING_READ_LATENCY + np.arange(cores * words) + RING_OUTPUT_LATENCY
        return core.Schedule(offsets[-1] - RING_OUTPUT_LATENCY, offsets, 0)
    if op in (RING_ALL_GATHER, RING_REDUCE_SCATTER):
        return core.Schedule(collective_command_cycles(words, cores), [], 0)
    if op == RING_LOAD:
        single = core.schedule(core.OP_LOAD, mb, nb, n_r=n_r)
        return core.Schedule(single.issue_cycles + 2, [], 0)
    if op in (RING_GEMV_FORWARD, RING_GEMV_BACKWARD):
        core_op = core.OP_GEMV_FORWARD if op == RING_GEMV_FORWARD else core.OP_GEMV_BACKWARD
        single = core.schedule(core_op, mb, nb, n_r=n_r, reduction=reduction, overlap=overlap)
        first = latency + single.output_offsets  # core 0's o_data transfers (core k's: k hops later)
        if op == RING_GEMV_FORWARD:  # the chain of adds: core P - 1's sums enter the output stage
            entries = first + (cores - 1) * HOP_CYCLES
        else:  # landed in the ring buffers, read block-major (read and read-out registers), into the output stage
            landings = first[:, None] + HOP_CYCLES * np.arange(cores)[None, :]
            entries = backward_fetch_cycles(landings) + RING_READ_LATENCY
        return core.Schedule(entries[-1], entries + RING_OUTPUT_LATENCY, cores * single.mac_cycles)
    raise ProgramError(f"unknown ring op {op!r}; allowed: {', '.join(member.name for member in RingOp)}")


def gemv_command_cycles(op, mb, nb, *, overlap=False, **params):
    """Cycles from the acceptance of a ring GEMV command (``RING_GEMV_FORWARD`` or ``RING_GEMV_BACKWARD``, row
    panels of ``mb`` blocks on each of the ``cores`` cores) to the acceptance of the next command, without
    stalls: :func:`ring_schedule`'s ``issue_cycles + COMMAND_LATENCY``. ``cores`` may exceed the generator's
    range (the system model prices the paper's 2 x 16 cores); with one core it is the core's GEMV plus the
    ring's command and output stages."""
    if op not in (RING_GEMV_FORWARD, RING_GEMV_BACKWARD):
        raise ProgramError(f"gemv_command_cycles takes RING_GEMV_FORWARD or RING_GEMV_BACKWARD, got {op!r}")
    return ring_schedule(op, overlap=overlap, mb=mb, nb=nb, **params).issue_cycles + core.COMMAND_LATENCY


def check_command(command, **params):
    """Raise :class:`~trainforge.errors.ProgramError` unless the ring executes ``command`` (a dict of its fields).

    The message names the first field out of its range
    (:func:`~trainforge.spec.caterpillar.ring_command_limits`, in the ring's order), its value and the range.
    """
    values = params_with_defaults(RING_PARAMS, params)
    violation = ring_command_violation(values, command)
    if violation is not None:
        _, name, value, low, high = violation
        op = int(command["op"])
        kind = RingOp(op).name if op in set(RingOp) else f"op {op}"
        described = ", ".join(f"{key}={values[key]}" for key in ("cores", "max_blocks", "sram_depth"))
        raise ProgramError(f"ring {kind} command field {name!r} = {value} is out of range; allowed: {low}..{high} "
                           f"({described})")


def command(op, words=1, core=0, overlap=False, mb=1, nb=1, base=0, **params):
    """A ``cp_ring`` command word (a dict of its fields), checked (:func:`check_command`); for GEMV and LOAD also
    the extent ``base + mb * nb <= sram_depth`` in the cores' memories, which the cores do not check."""
    word = {"op": int(op), "core": int(core), "overlap": int(overlap), "mb": int(mb), "nb": int(nb),
            "base": int(base), "words": int(words)}
    check_command(word, **params)
    if word["op"] in (RING_GEMV_FORWARD, RING_GEMV_BACKWARD, RING_LOAD):
        core_op = {RING_GEMV_FORWARD: _core_model.OP_GEMV_FORWARD, RING_GEMV_BACKWARD: _core_model.OP_GEMV_BACKWARD,
                   RING_LOAD: _core_model.OP_LOAD}[word["op"]]
        _core_model.command(core_op, word["mb"], word["nb"], base=word["base"],
                     **{name: value for name, value in params.items() if name != "cores"})
    return word


def command_error(command, **params):
    """The ring's response to ``command``: ``None`` if it executes it, else its ``o_error`` word
    ``{"field": code, "op": op}`` (as the core's, :func:`trainforge.golden.caterpillar.core.command_error`: the
    command is not executed, takes no ``i_data`` word, writes no buffer and reaches no core)."""
    violation = ring_command_violation(params_with_defaults(RING_PARAMS, params), command)
    if violation is None or violation[0] is None:
        return None
    return {"field": int(violation[0]), "op": int(command["op"]) & 7}


def command_schedule(command, **params):
    """Cycle schedule of one ring command word, rejected (error word ``ERROR_OFFSET`` cycles after acceptance,
    next command ``COMMAND_LATENCY + REJECT_CYCLES`` after it) or not (:func:`ring_schedule`)."""
    if command_error(command, **params) is not None:
        return core.Schedule(REJECT_CYCLES, [], 0, error_offsets=[ERROR_OFFSET])
    return ring_schedule(command["op"], overlap=bool(command["overlap"]), mb=command["mb"], nb=command["nb"],
                         words=command["words"], **params)
