"""NeuroTrainer host compiler: lowers a layer to PMAG programs, PE pass words, tensor placements and an iBuffer image.

A compiled layer (:class:`CompiledLayer`) is a plain Python object a testbench can drive:

- ``tensors``: where every input/output tensor lives: per vault a base slot and an index map
  (element slot ``base + i`` holds element ``index[i]`` of the flattened tensor, -1 = a zero
  padding slot). A slot is a word in 32-bit layers and half a word in 16-bit layers (slot
  ``s`` = half ``s mod 2`` of word ``s div 2``, ``spec/neurotrainer/packing.py``). Vault ``-1``
  is the common data vault, vault ``i`` the independent vault of PE ``i``.
- ``pe_jobs``: per PE the 32-bit pass words (one per PE pass, see ``spec/neurotrainer/pe_program.py``),
  the PMAG stream that fills BUF Input 1 (and its block sizes in words), the one that fills
  BUF Input 2 (block sizes in rows of ``lanes`` words; ``lanes`` consecutive stream words make
  one row) and the write stream that stores the PE's result words (rows of ``lanes`` words,
  in order) in a vault. A BUF1 stream marked ``broadcast`` is the common vault's one stream,
  sent to every PE over the bus.
- ``copy_jobs``: data preparation (merge, partition, add pad, remove pad): a read stream whose
  words go, in order, to the non-pad requests of a write stream (pad requests write 0).

Every stream is a list of golden-model PMAG program dicts
(:func:`~trainforge.golden.neurotrainer.pmag.nt_pmag`), counter_bits = 16, addressing 32-bit
words. In 16-bit layers (``wide = 0``) each PE stream's request moves a word of two 16-bit
elements (the element-level programs are built first, then halved by :func:`_pack_program`);
the data-preparation copies stay element-level (run by the host, one element per request). See ``hw/neurotrainer/README.md`` ("Host compiler") for the lowering of every
layer kind and our reading of the paper's Tables 2 to 4.
"""
import functools
from dataclasses import dataclass, field

import numpy as np

from ...golden.neurotrainer.pmag import LEVELS, SOURCE_NAMES, WINDOW_MODES, default_program, nt_pmag
from ...hw.neurotrainer.pe import NTPE
from ...spec.neurotrainer.pe_program import OP_MAC, OP_MAX, RANGE_LIMIT, ROUTE_LOAD_STEPS
from ...spec.neurotrainer.integration import PARAMS as SYSTEM_PARAMS, lut_alias, lut_functions
from ...spec.neurotrainer.packing import elements_per_word, words_for
from .program import (COUNTER_BITS, BOUND_BITS, IBUFFER_BYTES, ProgramError, check_range, encode_pe, encode_pmag,
                      ibuffer_image)

__all__ = ["COMMON", "LAYERS", "CONV_OPTIONS", "TABLE4_BITS", "Stream", "PeJob", "CopyJob", "Placement", "CompiledLayer", "pmag_program",
           "compile_layer"]

#: Vault number of the common data vault (vault ``i >= 0`` is PE ``i``'s independent vault).
COMMON = -1

_MASK32 = (1 << 32) - 1


def _ceil(a, b):
    return -(-a // b)


def pmag_program(label, loops, terms, *, base=0, write=False, p=None, q=None, window=None):
    """A golden-model PMAG program from named loops and address terms.

    Parameters
    ----------
    label : str
        Names the program in errors.
    loops : sequence of (str, int)
        ``(name, count)`` from the outermost (``r1``) inwards; at most 7; counters left over
        stay at 0 (range 1).
    terms : sequence of (str, int)
        Up to four ``(source, stride)`` of ``f(a, b, c, d)``: a loop name, ``"p"`` or ``"q"``.
        Negative strides are taken modulo 2**32 (the address wraps).
    base : int
        Base word address.
    write : bool
    p, q : (str, str), optional
        The loops summed into ``p = s + t`` and ``q = u + v``.
    window : (str, str, (int, int), str, (int, int)), optional
        ``(mode, h_source, (h_lo, h_hi), k_source, (k_lo, k_hi))``, mode ``"skip"`` or ``"pad"``.

    Raises
    ------
    ProgramError
        A loop count beyond the 16-bit counters, or a window bound beyond 17 bits.
    """
    if len(loops) > LEVELS or len(terms) > 4:
        raise ValueError(f"{label}: {len(loops)} loops / {len(terms)} terms; the PMAG has 7 counters and 4 terms")
    program = default_program()
    codes = {}
    for level, (name, count) in enumerate(loops):
        if count < 1:
            raise ProgramError(f"{label}: loop '{name}' count", count, 1, "a loop needs at least one iteration")
        program["max"][level] = check_range(f"{label}: loop '{name}' (PMAG R{level + 1}, count - 1)",
                                            count - 1, (1 << COUNTER_BITS) - 1)
        codes[name] = SOURCE_NAMES[f"r{level + 1}"]
    codes["p"], codes["q"] = SOURCE_NAMES["p"], SOURCE_NAMES["q"]
    for pair, (first, second) in (("p", ("s", "t")), ("q", ("u", "v"))):
        chosen = p if pair == "p" else q
        if chosen is not None:
            program[first], program[second] = codes[chosen[0]], codes[chosen[1]]
    for slot, (source, stride) in zip("abcd", terms):
        program[slot] = codes[source]
        program["stride"][list("abcd").index(slot)] = int(stride) & _MASK32
    program["base"] = check_range(f"{label}: base address", base, _MASK32)
    program["write"] = int(bool(write))
    if window is not None:
        mode, h_source, (h_lo, h_hi), k_source, (k_lo, k_hi) = window
        program["window"] = WINDOW_MODES[mode]
        program["h"], program["k"] = codes[h_source], codes[k_source]
        for name, value in (("h_lo", h_lo), ("h_hi", h_hi), ("k_lo", k_lo), ("k_hi", k_hi)):
            program[name] = check_range(f"{label}: window bound {name}", value, (1 << BOUND_BITS) - 1)
    return program


@dataclass
class Stream:
    """A vault's request stream: PMAG programs run back to back on one vault's PMAG.

    Attributes
    ----------
    vault : int
        :data:`COMMON` or a PE's vault number.
    programs : list of dict
        Golden-model program dicts, in issue order.
    broadcast : bool
        The common vault's stream sent to every PE (one stream, shared by the PE jobs).
    lut : str or None
        A read stream's data words pass the vault controller's LUT: ``"f"`` (the activation
        f(x)) or ``"df"`` (its derivative f'(x)); pad and END-MARK words do not. Its programs'
        bases carry the selection in address bits 31 .. 30
        (:func:`~trainforge.spec.neurotrainer.integration.lut_alias`).
    """
    vault: int
    programs: list
    broadcast: bool = False
    lut: str = None

    def golden(self):
        """``nt_pmag`` of every program (address, write, pad, end; each closed by its END-MARK)."""
        return [nt_pmag(program, counter_bits=COUNTER_BITS) for program in self.programs]

    def requests(self):
        """``(address, pad)`` of all data requests in order, the END-MARKs removed (int64, bool)."""
        streams = self.golden()
        if not streams:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
        address = np.concatenate([s["address"][:-1] for s in streams]).astype(np.int64)
        pad = np.concatenate([s["pad"][:-1] for s in streams])
        return address, pad


@dataclass
class PeJob:
    """One PE's work: its pass words, its two fill streams and its result write stream.

    Attributes
    ----------
    pe : int
    passes : list of int
        32-bit PE program words, one per pass.
    in1 : Stream or None
        Fills BUF Input 1 (None: no MAC pass, e.g. max pooling).
    in1_blocks : list of int
        Words per BUF Input 1 block, in order.
    in2 : Stream
        Fills BUF Input 2, ``lanes`` words per row.
    in2_blocks : list of int
        Rows per BUF Input 2 block, in order.
    out : Stream
        Write stream of the result words (``lanes`` per result row, rows in order).
    """
    pe: int
    passes: list
    in1: Stream
    in1_blocks: list
    in2: Stream
    in2_blocks: list
    out: Stream


@dataclass
class CopyJob:
    """Data preparation: ``source`` words go in order to the non-pad requests of ``dest``."""
    source: Stream
    dest: Stream


@dataclass
class Placement:
    """Part of a tensor in one vault: word ``base + i`` holds flat element ``index[i]`` (-1: zero padding)."""
    vault: int
    base: int
    index: np.ndarray


@dataclass
class CompiledLayer:
    """A compiled layer (see the module docstring).

    Attributes
    ----------
    kind : str
    dims : dict
    pe : dict
        The NTPE parameters the programs were compiled for (``lanes``, buffer depths, MAC format).
    pes : int
    tensors : dict of str to (tuple, list of Placement)
        Per tensor its logical shape and placements.
    inputs : tuple of str
    output : str
    vault_words : dict of int to int
        Words used in every vault.
    bits : int
        Element width: 32, or 16 (every stream ``wide = 0``; two 16-bit elements per vault word,
        per request and per PE buffer word, the first in the low half:
        ``spec/neurotrainer/packing.py``).
    pe_jobs : list of PeJob
    copy_jobs : list of CopyJob
    ibuffer : bytes
        The iBuffer image (:func:`~trainforge.sim.neurotrainer.program.ibuffer_image`).
    lut : dict
        The LUTs' ``nt_lut`` parameters by ``"f"`` / ``"df"`` when a read stream has ``lut``, else empty.
    """
    kind: str
    dims: dict
    pe: dict
    pes: int
    tensors: dict
    inputs: tuple
    output: str
    vault_words: dict
    bits: int = 32
    pe_jobs: list = field(default_factory=list)
    copy_jobs: list = field(default_factory=list)
    ibuffer: bytes = b""
    lut: dict = field(default_factory=dict)

    def streams(self):
        """Every distinct stream with its role: ``(role, pe or None, Stream)``; a broadcast stream once."""
        seen, result = set(), []
        for job in self.pe_jobs:
            for role, stream in (("in1", job.in1), ("in2", job.in2), ("out", job.out)):
                if stream is None or id(stream) in seen:
                    continue
                seen.add(id(stream))
                result.append((role, None if stream.broadcast else job.pe, stream))
        for index, job in enumerate(self.copy_jobs):
            result += [("copy_source", index, job.source), ("copy_dest", index, job.dest)]
        return result

    def merged_writes(self):
        """The common vault's merged write programs in the bus's merge order, as ``(pe, program)``.

        A PE whose results go to the common vault has one write program per result block, in the
        order it produces the blocks. The bus merges in a pre-determined order, PE 0, 1, ...,
        ``pes - 1``, one result block (one write program, closed by its END-MARK) per turn, so the
        common write PMAG runs block 0 of PE 0, 1, ..., then block 1 of PE 0, 1, ..., and so on
        (block-major, PE-minor; a PE with fewer blocks than another drops out of the later rounds).
        """
        merged = [job for job in self.pe_jobs if job.out.vault == COMMON]
        rounds = max((len(job.out.programs) for job in merged), default=0)
        return [(job.pe, job.out.programs[block]) for block in range(rounds) for job in merged
                if block < len(job.out.programs)]

    def pmag_programs(self):
        """``(unit, program)`` of every PMAG program in issue order per unit: unit 0 = common vault PMAG, ``1 + i`` =
        vault ``i``; the merged write programs last, in the bus's merge order (:meth:`merged_writes`)."""
        programs = [(stream.vault + 1, program) for role, _, stream in self.streams()
                    if not (role == "out" and stream.vault == COMMON) for program in stream.programs]
        return programs + [(COMMON + 1, program) for _, program in self.merged_writes()]

    def summary(self):
        """A JSON-ready description: sizes, program words (hex), per-PE pass counts."""
        pmag = []
        for role, owner, stream in self.streams():
            for program in stream.programs:
                word, descriptor = encode_pmag(program)
                pmag.append({"role": role, "owner": owner, "vault": "common" if stream.vault == COMMON
                             else stream.vault, "word": word.hex(), "descriptor": descriptor.hex(),
                             "ranges": [m + 1 for m in program["max"]]})
        pe = []
        for job in self.pe_jobs:
            distinct = list(dict.fromkeys(job.passes))
            pe.append({"pe": job.pe, "passes": len(job.passes),
                       "words": [int(w).to_bytes(4, "little").hex() for w in distinct],
                       "in1_words": int(sum(job.in1_blocks)), "in2_rows": int(sum(job.in2_blocks))})
        return {"kind": self.kind, "dims": self.dims, "pes": self.pes, "bits": self.bits, "pe_params": self.pe,
                "pmag_programs": len(pmag), "merged_writes": len(self.merged_writes()), "pmag_bytes": len(pmag) * 18, "pe_words": sum(p["passes"] for p in pe),
                "ibuffer_bytes": len(self.ibuffer), "vault_words": {str(k): v for k, v in self.vault_words.items()},
                "pmag": pmag, "pe": pe}


class _Builder:
    """Vault allocation and tensor placements of one layer, in element slots.

    In a 32-bit layer a slot is a word; in a 16-bit layer slot ``s`` is half ``s mod 2`` of word
    ``s div 2`` (``spec/neurotrainer/packing.py``) and every allocation starts at an even slot,
    so that a packed stream's requests are whole words.
    """

    def __init__(self, pes, bits=32):
        self.pes = pes
        self.bits = bits
        self.align = elements_per_word(bits)
        self.next = {COMMON: 0, **{pe: 0 for pe in range(pes)}}
        self.tensors = {}

    def _start(self, slot):
        return -(-slot // self.align) * self.align

    def reserve(self, vault, slots):
        """Allocate ``slots`` slots in ``vault`` without a tensor; returns the base slot."""
        base = self._start(self.next[vault])
        self.next[vault] = base + slots
        return base

    def place(self, name, shape, vault, index):
        """Allocate ``index.size`` slots in ``vault`` for (part of) tensor ``name``; returns the base slot."""
        index = np.asarray(index, dtype=np.int64).reshape(-1)
        base = self._start(self.next[vault])
        self.next[vault] = base + index.size
        check_range(f"vault {vault} size (words)", words_for(self.next[vault], self.bits), _MASK32 + 1)
        self.tensors.setdefault(name, (tuple(shape), []))[1].append(Placement(vault, base, index))
        return base

    def words(self):
        """Words used in every vault."""
        return {vault: words_for(slot, self.bits) for vault, slot in self.next.items()}

    def place_all(self, name, shape, index_of_pe):
        """The same-sized part in every PE vault at one common base; returns the base."""
        base = self._start(max(self.next[pe] for pe in range(self.pes)))
        for pe in range(self.pes):
            self.next[pe] = base
            self.place(name, shape, pe, index_of_pe(pe))
        return base


def _padded_index(shape, padded):
    """Row-major index map of ``shape`` stored in a zero-padded ``padded`` array."""
    grid = np.indices(padded)
    inside = np.all([grid[i] < shape[i] for i in range(len(shape))], axis=0)
    flat = np.ravel_multi_index([np.minimum(grid[i], shape[i] - 1) for i in range(len(shape))], shape)
    return np.where(inside, flat, -1)


def _batch_lane_index(shape, rounds, pes, lanes, pe):
    """PE ``pe``'s part of an (N, C, H, W) tensor, stored [round][C][H][W][lane], sample (round*pes + pe)*lanes + lane."""
    n_total, channels, height, width = shape
    g, c, h, w, lane = np.indices((rounds, channels, height, width, lanes))
    n = (g * pes + pe) * lanes + lane
    flat = ((np.minimum(n, n_total - 1) * channels + c) * height + h) * width + w
    return np.where(n < n_total, flat, -1)


def _element_lanes(pe, bits):
    """Elements per BUF2 row: ``lanes`` 32-bit words, two 16-bit elements each in 16-bit mode."""
    return pe["lanes"] * (2 if bits == 16 else 1)


def _pe_word(**fields):
    return _pe_word_of(tuple(sorted(fields.items())))


@functools.lru_cache(maxsize=1024)
def _pe_word_of(items):
    """The pass word of sorted ``(field, value)`` pairs (cached: a layer repeats a few words millions of times)."""
    return int.from_bytes(encode_pe(dict(items)), "little")


def _check_buffers(pe, label, *, in1_words=0, in2_rows=0, outputs=0, accumulate=False):
    check_range(f"{label}: BUF Input 1 block (words)", in1_words, pe["in1_depth"] // 2, "half of in1_depth")
    check_range(f"{label}: BUF Input 2 block (rows)", in2_rows, pe["in2_depth"] // 2, "half of in2_depth")
    if accumulate:
        check_range(f"{label}: output rows of an accumulating pass", outputs, pe["out_depth"], "out_depth")


def _check_output_size(out_h, out_w):
    if out_h < 1 or out_w < 1:
        raise ValueError(f"the kernel is larger than the input: output size {out_h} x {out_w}")


# ----------------------------------------------------------------------------------------------
# Convolution feedforward / backpropagation: one pass per output position, the kernel held.

def _conv_window(kind, dims, pes, pe, sr, bits):
    n, d, h, w, o, hk, wk = (dims[key] for key in ("n", "d", "h", "w", "o", "hk", "wk"))
    lanes = _element_lanes(pe, bits)
    rounds = _ceil(n, lanes * pes)
    kernel = d * hk * wk
    builder = _Builder(pes, bits)
    if kind == "conv_ff":
        out_h, out_w = h - hk + 1, w - wk + 1
        _check_output_size(out_h, out_w)
        in_name, in_shape = "x", (n, d, h, w)
        out_name, out_shape, out_channels = "y", (n, o, out_h, out_w), o
        window_rows, positions = kernel, (out_h, out_w)
        word = dict(op=OP_MAC, wide=int(bits == 32), sr=int(sr and bits == 32), transpose=0, cnt2_outer=o - 1,
                    cnt2_inner=kernel - 1, cnt1=kernel - 1)
    else:
        # dX = full correlation: dY with a (hk-1, wk-1) zero border (the add-pad program), W flipped by the
        # BUF1 read stream and transposed by the CNT2 sweep.
        in_name, in_shape = "dy_padded", (n, o, h + hk - 1, w + wk - 1)
        out_name, out_shape, out_channels = "dx", (n, d, h, w), d
        window_rows, positions = hk * wk * o, (h, w)
        word = dict(op=OP_MAC, wide=int(bits == 32), sr=int(sr and bits == 32), transpose=1, cnt2_outer=o - 1,
                    cnt2_inner=kernel - 1, cnt1=hk * wk * o - 1)
    _check_buffers(pe, kind, in1_words=o * kernel, in2_rows=window_rows)
    _, in_c, in_h, in_w = in_shape
    x_base = builder.place_all(in_name, in_shape, lambda p: _batch_lane_index(in_shape, rounds, pes, lanes, p))
    kernel_base = builder.place("w", (o, d, hk, wk), COMMON, np.arange(o * kernel))
    y_base = builder.place_all(out_name, out_shape, lambda p: _batch_lane_index(out_shape, rounds, pes, lanes, p))
    s_w, s_h, s_c = lanes, in_w * lanes, in_h * in_w * lanes
    s_g = in_c * s_h * in_h
    _, _, out_h, out_w = out_shape
    t_w, t_h, t_c = lanes, out_w * lanes, out_h * out_w * lanes
    t_g = out_channels * t_c

    if kind == "conv_ff":
        # The kernel is stored [o][d][hk][wk] and read in that order: one linear loop (a 16-bit stream
        # packs consecutive elements, so its innermost loop must cover the whole block).
        in1 = Stream(COMMON, [pmag_program(f"{kind} kernel", [("i", o * kernel)], [("i", 1)], base=kernel_base)],
                     broadcast=True)
    else:
        in1 = Stream(COMMON, [pmag_program(f"{kind} flipped kernel",
                                           [("o", o), ("d", d), ("hk", hk), ("wk", wk)],
                                           [("o", kernel), ("d", hk * wk), ("hk", -wk), ("wk", -1)],
                                           base=kernel_base + (hk - 1) * wk + wk - 1)], broadcast=True)
    pos_h, pos_w = positions
    passes_per_pe = rounds * pos_h * pos_w
    passes = [_pe_word(**word, emit=1, hold1=int(index < passes_per_pe - 1)) for index in range(passes_per_pe)]
    jobs = []
    for p in range(pes):
        in2_programs, out_programs = [], []
        for g in range(rounds):
            if kind == "conv_ff":
                loops = [("ph", pos_h), ("pw", pos_w), ("c", d), ("hk", hk), ("wk", wk), ("lane", lanes)]
            else:
                loops = [("ph", pos_h), ("pw", pos_w), ("hk", hk), ("wk", wk), ("c", o), ("lane", lanes)]
            in2_programs.append(pmag_program(f"{kind} window", loops,
                                             [("lane", 1), ("c", s_c), ("p", s_h), ("q", s_w)],
                                             base=x_base + g * s_g, p=("ph", "hk"), q=("pw", "wk")))
            out_programs.append(pmag_program(f"{kind} result", [("ph", out_h), ("pw", out_w), ("c", out_channels),
                                                                ("lane", lanes)],
                                             [("lane", 1), ("c", t_c), ("ph", t_h), ("pw", t_w)],
                                             base=y_base + g * t_g, write=True))
        jobs.append(PeJob(p, passes, in1, [o * kernel], Stream(p, in2_programs), [window_rows] * passes_per_pe,
                          Stream(p, out_programs)))
    return builder, jobs, (in_name, "w"), out_name


# ----------------------------------------------------------------------------------------------
# Convolution weight update lowered to dW^T = XM^T (im2col, read by the PMAG) x dY^T.

def _conv_up(dims, pes, pe, sr):
    n, d, h, w, o, hk, wk = (dims[key] for key in ("n", "d", "h", "w", "o", "hk", "wk"))
    lanes = pe["lanes"]
    out_h, out_w = h - hk + 1, w - wk + 1
    _check_output_size(out_h, out_w)
    groups = _ceil(o, lanes)
    o_pad = groups * lanes
    d_per_pe = _ceil(d, pes)
    d_pad = d_per_pe * pes
    taps = hk * wk
    blocks = n * out_h
    _check_buffers(pe, "conv_up", in1_words=taps * out_w, in2_rows=out_w, outputs=taps, accumulate=blocks > 1)
    builder = _Builder(pes)

    def x_part(p):
        nn, j, hh, ww = np.indices((n, d_per_pe, h, w))
        channel = j * pes + p
        flat = ((nn * d + np.minimum(channel, d - 1)) * h + hh) * w + ww
        return np.where(channel < d, flat, -1)

    x_base = builder.place_all("x", (n, d, h, w), x_part)
    dy_base = builder.place("dy", (n, o, out_h, out_w), COMMON,
                            _padded_index((n, o, out_h, out_w), (n, o_pad, out_h, out_w)))
    dw_base = builder.place("dw", (o, d, hk, wk), COMMON, _padded_index((o, d, hk, wk), (o_pad, d_pad, hk, wk)))
    sx_n, sx_d = d_per_pe * h * w, h * w
    sy_o, sy_n = out_h * out_w, o_pad * out_h * out_w
    sw_d, sw_o = taps, d_pad * taps
    in2 = Stream(COMMON, [pmag_program("conv_up dY^T rows", [("j", d_per_pe), ("n", n), ("ho", out_h),
                                                             ("wo", out_w), ("lane", lanes)],
                                       [("n", sy_n), ("ho", out_w), ("wo", 1), ("lane", sy_o)],
                                       base=dy_base + g * lanes * sy_o) for g in range(groups)], broadcast=True)
    passes = []
    for _ in range(groups * d_per_pe):
        for block in range(blocks):
            passes.append(_pe_word(op=OP_MAC, wide=1, sr=int(sr), transpose=0, accumulate=int(block > 0),
                                   emit=int(block == blocks - 1), cnt2_outer=taps - 1, cnt2_inner=out_w - 1,
                                   cnt1=out_w - 1))
    jobs = []
    for p in range(pes):
        in1 = Stream(p, [pmag_program("conv_up im2col XM^T", [("g", groups), ("j", d_per_pe), ("n", n),
                                                              ("ho", out_h), ("hk", hk), ("wk", wk), ("wo", out_w)],
                                      [("j", sx_d), ("n", sx_n), ("p", w), ("q", 1)], base=x_base,
                                      p=("ho", "hk"), q=("wo", "wk"))])
        # One merged write program per result block (g, j): the common PMAG runs them in the bus's order.
        out = Stream(COMMON, [pmag_program("conv_up dW block write", [("tap", taps), ("lane", lanes)],
                                           [("lane", sw_o), ("tap", 1)],
                                           base=dw_base + p * sw_d + g * lanes * sw_o + j * pes * sw_d, write=True)
                              for g in range(groups) for j in range(d_per_pe)])
        jobs.append(PeJob(p, passes, in1, [taps * out_w] * len(passes), in2, [out_w] * len(passes), out))
    return builder, jobs, ("x", "dy"), "dw"


# ----------------------------------------------------------------------------------------------
# Fully connected FF / BP: matrix-matrix multiplication, P x L blocks (Fig. 7).

def _matmul_blocking(pe, pes, lanes, reduce_dim, out_rows, cols, label, bits=32):
    """The P x L blocking of a product ``(out_rows x reduce_dim) x (reduce_dim x cols)`` over ``pes`` PEs.

    Returns ``(L, reduce_pad, share, P, share_pad, groups, cols_pad, row_blocks, reduce_blocks)``:
    the reduction block ``L`` (input-channel tiling), the output rows per PE ``share`` in blocks of ``P``
    rows (output-channel tiling), the lane groups of the columns; the buffers are checked for ``label``.
    """
    half1, half2 = pe["in1_depth"] // 2, pe["in2_depth"] // 2
    length = min(reduce_dim, 256, half2, half1)
    if bits == 16 and length % 2:
        # A packed BUF1 stream reads two consecutive weights of a row per word: an even block length
        # (the reduction is zero padded to a multiple of it).
        length = length + 1 if length + 1 <= min(256, half2, half1) else length - 1
        if length < 2:
            raise ProgramError(f"{label}: 16-bit reduction block (elements)", length, 2,
                               "an even block of at least 2 (in1_depth and in2_depth >= 4)")
    reduce_pad = _ceil(reduce_dim, length) * length
    share = _ceil(out_rows, pes)
    block_rows = max(1, min(share, 256, pe["out_depth"], half1 // length))
    share_pad = _ceil(share, block_rows) * block_rows
    groups = _ceil(cols, lanes)
    row_blocks, reduce_blocks = share_pad // block_rows, reduce_pad // length
    _check_buffers(pe, label, in1_words=block_rows * length, in2_rows=length, outputs=block_rows,
                   accumulate=reduce_blocks > 1)
    return (length, reduce_pad, share, block_rows, share_pad, groups, groups * lanes, row_blocks,
            reduce_blocks)


def _fc_matmul(kind, dims, pes, pe, sr, bits):
    """FF: y (H x N) = W (H x K) x (K x N), W rows over the PEs. BP: dx (K x N) = W^T dy, W columns over the PEs."""
    rows, cols, n = dims["h"], dims["k"], dims["n"]
    lanes = _element_lanes(pe, bits)
    reduce_dim, out_dim = (cols, rows) if kind == "fc_ff" else (rows, cols)
    (length, reduce_pad, share, block_rows, share_pad, groups, n_pad, row_blocks,
     reduce_blocks) = _matmul_blocking(pe, pes, lanes, reduce_dim, out_dim, n, kind, bits)
    builder = _Builder(pes, bits)
    in_name, out_name = ("x", "y") if kind == "fc_ff" else ("dy", "dx")

    def w_part(p):
        if kind == "fc_ff":                    # [local row][column], rows p*share ..
            r, c = np.indices((share_pad, reduce_pad))
            global_row = p * share + r
            valid = (r < share) & (global_row < rows) & (c < cols)
            return np.where(valid, np.minimum(global_row, rows - 1) * cols + np.minimum(c, cols - 1), -1)
        r, c = np.indices((reduce_pad, share_pad))  # [row h][local column], columns p*share ..
        global_col = p * share + c
        valid = (c < share) & (global_col < cols) & (r < rows)
        return np.where(valid, np.minimum(r, rows - 1) * cols + np.minimum(global_col, cols - 1), -1)

    w_base = builder.place_all("w", (rows, cols), w_part)
    x_base = builder.place(in_name, (reduce_dim, n), COMMON, _padded_index((reduce_dim, n), (reduce_pad, n_pad)))
    r, c = np.indices((pes * share_pad, n_pad))
    pe_of, local = r // share_pad, r % share_pad
    global_row = pe_of * share + local
    y_index = np.where((local < share) & (global_row < out_dim) & (c < n),
                       np.minimum(global_row, out_dim - 1) * n + np.minimum(c, n - 1), -1)
    y_base = builder.place(out_name, (out_dim, n), COMMON, y_index)

    in2 = Stream(COMMON, [pmag_program(f"{kind} broadcast X rows", [("g", groups), ("rb", row_blocks),
                                                                     ("kb", reduce_blocks), ("l", length),
                                                                     ("lane", lanes)],
                                       [("g", lanes), ("kb", length * n_pad), ("l", n_pad), ("lane", 1)],
                                       base=x_base)], broadcast=True)
    passes = []
    for _ in range(groups * row_blocks):
        for kb in range(reduce_blocks):
            if kind == "fc_ff":
                shape = dict(transpose=0, cnt2_outer=block_rows - 1, cnt2_inner=length - 1)
            else:
                shape = dict(transpose=1, cnt2_outer=length - 1, cnt2_inner=block_rows - 1)
            passes.append(_pe_word(op=OP_MAC, wide=int(bits == 32), sr=int(sr and bits == 32), accumulate=int(kb > 0),
                                   emit=int(kb == reduce_blocks - 1), cnt1=length - 1, **shape))
    jobs = []
    for p in range(pes):
        if kind == "fc_ff":
            in1_terms = [("rb", block_rows * reduce_pad), ("kb", length), ("pr", reduce_pad), ("l", 1)]
            in1_loops = [("g", groups), ("rb", row_blocks), ("kb", reduce_blocks), ("pr", block_rows), ("l", length)]
        else:
            in1_terms = [("rb", block_rows), ("kb", length * share_pad), ("l", share_pad), ("pr", 1)]
            in1_loops = [("g", groups), ("rb", row_blocks), ("kb", reduce_blocks), ("l", length), ("pr", block_rows)]
        in1 = Stream(p, [pmag_program(f"{kind} partial matrix", in1_loops, in1_terms, base=w_base)])
        # One merged write program per result block (g, rb): the common PMAG runs them in the bus's order.
        out = Stream(COMMON, [pmag_program(f"{kind} merged result block", [("pr", block_rows), ("lane", lanes)],
                                           [("pr", n_pad), ("lane", 1)],
                                           base=y_base + p * share_pad * n_pad + g * lanes + rb * block_rows * n_pad,
                                           write=True)
                              for g in range(groups) for rb in range(row_blocks)])
        jobs.append(PeJob(p, passes, in1, [block_rows * length] * len(passes), in2, [length] * len(passes), out))
    return builder, jobs, ("w", in_name), out_name


# ----------------------------------------------------------------------------------------------
# Fully connected weight update: vector outer products dW = sum_n dy[:, n] x[:, n]^T (Fig. 8).

def _fc_up(dims, pes, pe, sr):
    """FC UP, ``dW (h x k) = dY (h x n) . X^T (n x k)``, as a matmul whose reduction is the samples.

    A pass is ``(P, L) / L`` (Table 4's FC form): output row ``i`` (a row of dW, ``k`` columns
    in the lanes) sums ``L`` samples in the MAC accumulator, so no pass needs the preload row of
    an accumulating pass unless the samples span more than one BUF2 block (``n > L``). dY rows
    are spread over the PEs (their own vaults, ``[row][sample]``), X is broadcast from the
    common vault (stored transposed, ``[column][sample]``), dW stays in each PE's vault. With one
    sample block the dY block is held (``hold1``) for all the column groups of its row band.
    """
    rows, cols, n = dims["h"], dims["k"], dims["n"]
    lanes = pe["lanes"]
    share = _ceil(rows, pes)
    length = max(1, min(n, 256, pe["in2_depth"] // 2, pe["in1_depth"] // 2))            # L: samples per pass
    piece = max(1, min(share, 256, pe["out_depth"], (pe["in1_depth"] // 2) // length))   # P: dW rows per pass
    sample_blocks = _ceil(n, length)
    n_pad = sample_blocks * length
    share_pad = _ceil(share, piece) * piece
    groups = _ceil(cols, lanes)
    cols_pad = groups * lanes
    pieces = share_pad // piece
    _check_buffers(pe, "fc_up", in1_words=piece * length, in2_rows=length, outputs=piece,
                   accumulate=sample_blocks > 1)
    builder = _Builder(pes)

    def rows_part(p, width, width_pad):
        r, c = np.indices((share_pad, width_pad))
        global_row = p * share + r
        valid = (r < share) & (global_row < rows) & (c < width)
        return np.where(valid, np.minimum(global_row, rows - 1) * width + np.minimum(c, width - 1), -1)

    a_base = builder.place_all("dy", (rows, n), lambda p: rows_part(p, n, n_pad))
    b_base = builder.place("x", (cols, n), COMMON, _padded_index((cols, n), (cols_pad, n_pad)))
    dw_base = builder.place_all("dw", (rows, cols), lambda p: rows_part(p, cols, cols_pad))
    in2 = Stream(COMMON, [pmag_program("fc_up broadcast x", [("hb", pieces), ("g", groups), ("nb", sample_blocks),
                                                             ("l", length), ("lane", lanes)],
                                       [("g", lanes * n_pad), ("nb", length), ("l", 1), ("lane", n_pad)],
                                       base=b_base)], broadcast=True)
    hold = sample_blocks == 1
    passes = [_pe_word(op=OP_MAC, wide=1, sr=int(sr), accumulate=int(nb > 0), emit=int(nb == sample_blocks - 1),
                       hold1=int(hold and g < groups - 1), cnt2_outer=piece - 1, cnt2_inner=length - 1,
                       cnt1=length - 1)
              for _ in range(pieces) for g in range(groups) for nb in range(sample_blocks)]
    a_loops = [("hb", pieces)] + ([] if hold else [("g", groups)]) + [("nb", sample_blocks), ("i", piece),
                                                                      ("l", length)]
    a_blocks = pieces * (1 if hold else groups) * sample_blocks
    jobs = []
    for p in range(pes):
        in1 = Stream(p, [pmag_program("fc_up dY block", a_loops,
                                      [("hb", piece * n_pad), ("nb", length), ("i", n_pad), ("l", 1)], base=a_base)])
        out = Stream(p, [pmag_program("fc_up dW write", [("hb", pieces), ("g", groups), ("i", piece), ("lane", lanes)],
                                      [("hb", piece * cols_pad), ("g", lanes), ("i", cols_pad), ("lane", 1)],
                                      base=dw_base, write=True)])
        jobs.append(PeJob(p, passes, in1, [piece * length] * a_blocks, in2, [length] * len(passes), out))
    return builder, jobs, ("dy", "x"), "dw"


# ----------------------------------------------------------------------------------------------
# Tiled convolution (any stride, padding, channel count): an im2col copy and the FC FF matmul.

def _matmul_rows(label, rows, reduce_dim, cols, pes, pe, sr, bits, builder, a_tensor, a_index, out_tensor, out_index):
    """Jobs of ``C (rows x cols) = A (rows x reduce_dim) x B (reduce_dim x cols)`` lowered like FC FF (Fig. 7).

    ``A``'s rows are spread over the PEs (each PE vault holds its rows, zero padded to blocks of
    ``P x L``); ``B`` is a zero-initialised common-vault region of ``reduce_pad x cols_pad`` words
    (row-major) that a copy job fills before the PE passes; ``C`` is merged into the common vault.
    ``a_index(r, k)`` / ``out_index(r, j)`` map valid matrix positions (int64 arrays) to flat
    indices of the tensors ``a_tensor`` / ``out_tensor`` (``(name, shape)``).

    Returns
    -------
    (list of PeJob, int, int)
        The jobs, ``B``'s base word and its row stride ``cols_pad``.
    """
    lanes = _element_lanes(pe, bits)
    (length, reduce_pad, share, block_rows, share_pad, groups, cols_pad, row_blocks,
     reduce_blocks) = _matmul_blocking(pe, pes, lanes, reduce_dim, rows, cols, label, bits)

    def a_part(p):
        r, k = np.indices((share_pad, reduce_pad))
        global_row = p * share + r
        valid = (r < share) & (global_row < rows) & (k < reduce_dim)
        return np.where(valid, a_index(np.minimum(global_row, rows - 1), np.minimum(k, reduce_dim - 1)), -1)

    a_base = builder.place_all(*a_tensor, a_part)
    b_base = builder.reserve(COMMON, reduce_pad * cols_pad)
    r, j = np.indices((pes * share_pad, cols_pad))
    pe_of, local = r // share_pad, r % share_pad
    global_row = pe_of * share + local
    c_index = np.where((local < share) & (global_row < rows) & (j < cols),
                       out_index(np.minimum(global_row, rows - 1), np.minimum(j, cols - 1)), -1)
    c_base = builder.place(*out_tensor, COMMON, c_index)
    in2 = Stream(COMMON, [pmag_program(f"{label} broadcast B rows", [("g", groups), ("rb", row_blocks),
                                                                      ("kb", reduce_blocks), ("l", length),
                                                                      ("lane", lanes)],
                                       [("g", lanes), ("kb", length * cols_pad), ("l", cols_pad), ("lane", 1)],
                                       base=b_base)], broadcast=True)
    passes = [_pe_word(op=OP_MAC, wide=int(bits == 32), sr=int(sr and bits == 32), accumulate=int(kb > 0),
                       emit=int(kb == reduce_blocks - 1), cnt1=length - 1, transpose=0, cnt2_outer=block_rows - 1,
                       cnt2_inner=length - 1)
              for _ in range(groups * row_blocks) for kb in range(reduce_blocks)]
    jobs = []
    for p in range(pes):
        in1 = Stream(p, [pmag_program(f"{label} A block", [("g", groups), ("rb", row_blocks), ("kb", reduce_blocks),
                                                           ("pr", block_rows), ("l", length)],
                                      [("rb", block_rows * reduce_pad), ("kb", length), ("pr", reduce_pad), ("l", 1)],
                                      base=a_base)])
        out = Stream(COMMON, [pmag_program(f"{label} merged result block", [("pr", block_rows), ("lane", lanes)],
                                           [("pr", cols_pad), ("lane", 1)],
                                           base=c_base + p * share_pad * cols_pad + g * lanes
                                           + rb * block_rows * cols_pad, write=True)
                              for g in range(groups) for rb in range(row_blocks)])
        jobs.append(PeJob(p, passes, in1, [block_rows * length] * len(passes), in2, [length] * len(passes), out))
    return jobs, b_base, cols_pad


def _conv_geometry(dims):
    """``(out_h, out_w)`` of a convolution with stride ``s`` and zero padding ``p``."""
    s, pad = dims["s"], dims["p"]
    out_h = (dims["h"] + 2 * pad - dims["hk"]) // s + 1
    out_w = (dims["w"] + 2 * pad - dims["wk"]) // s + 1
    _check_output_size(out_h, out_w)
    return out_h, out_w


def _conv_tiled(kind, dims, pes, pe, sr, bits):
    """Any convolution as an im2col copy (the PMAG gathers strided windows) plus the tiled matmul.

    - FF: ``Y (o x N) = W (o x K) . Xcol (K x N)``, ``K = d hk wk``, ``N = n out_h out_w``;
    - BP: ``dX (d x n h w) = W' (d x K') . dYcol (K' x n h w)``, ``K' = o hk wk``, ``W'`` the kernel
      flipped and transposed by its placement, ``dYcol`` gathered from ``dY`` stored dilated by the
      stride and bordered (the placement puts zeros between and around the rows);
    - UP: ``dW (o x K) = dY (o x N) . Xcol^T (N x K)``.

    The input ``x`` is stored zero padded by ``p`` (its placement); the copy job reads one window
    tap (one row of ``Xcol``) per program.
    """
    n, d, h, w, o, hk, wk, s, pad = (dims[key] for key in ("n", "d", "h", "w", "o", "hk", "wk", "s", "p"))
    out_h, out_w = _conv_geometry(dims)
    positions = out_h * out_w
    builder = _Builder(pes, bits)
    hp, wp = h + 2 * pad, w + 2 * pad
    taps = hk * wk

    def place_padded_x():
        nn, c, y, x = np.indices((n, d, hp, wp))
        inside = (y >= pad) & (y < pad + h) & (x >= pad) & (x < pad + w)
        flat = ((nn * d + c) * h + np.clip(y - pad, 0, h - 1)) * w + np.clip(x - pad, 0, w - 1)
        return builder.place("x", (n, d, h, w), COMMON, np.where(inside, flat, -1))

    def gather(label, source_base, source_strides, rows, tap_base, write_terms, b_base, row_offset):
        """One read and one write program per B row ``k = (channel, kh, kw)``."""
        reads, writes = [], []
        loops = [("n", n), ("y", rows[0]), ("x", rows[1])]
        for k in range(rows[2] * taps):
            channel, tap = divmod(k, taps)
            kh, kw = divmod(tap, wk)
            reads.append(pmag_program(f"{label} im2col read", loops, source_strides,
                                      base=source_base + tap_base(channel, kh, kw)))
            writes.append(pmag_program(f"{label} im2col write", loops, write_terms, base=b_base + row_offset(k),
                                       write=True))
        return CopyJob(Stream(COMMON, reads), Stream(COMMON, writes))

    if kind == "conv_ff":
        x_base = place_padded_x()
        jobs, b_base, cols_pad = _matmul_rows(
            kind, o, d * taps, n * positions, pes, pe, sr, bits, builder, ("w", (o, d, hk, wk)),
            lambda r, k: r * d * taps + k, ("y", (n, o, out_h, out_w)),
            lambda r, j: ((j // positions) * o + r) * positions + j % positions)
        copy = gather(kind, x_base, [("n", d * hp * wp), ("y", s * wp), ("x", s)], (out_h, out_w, d),
                      lambda c, kh, kw: c * hp * wp + kh * wp + kw,
                      [("n", positions), ("y", out_w), ("x", 1)], b_base, lambda k: k * cols_pad)
        return builder, jobs, [copy], ("x", "w"), "y"
    if kind == "conv_up":
        x_base = place_padded_x()
        jobs, b_base, cols_pad = _matmul_rows(
            kind, o, n * positions, d * taps, pes, pe, sr, bits, builder, ("dy", (n, o, out_h, out_w)),
            lambda r, j: ((j // positions) * o + r) * positions + j % positions, ("dw", (o, d, hk, wk)),
            lambda r, k: r * d * taps + k)
        copy = gather(kind, x_base, [("n", d * hp * wp), ("y", s * wp), ("x", s)], (out_h, out_w, d),
                      lambda c, kh, kw: c * hp * wp + kh * wp + kw,
                      [("n", positions * cols_pad), ("y", out_w * cols_pad), ("x", cols_pad)], b_base, lambda k: k)
        return builder, jobs, [copy], ("x", "dy"), "dw"
    # BP: dyd[u][v] = dY[(u + p - hk + 1) / s][(v + p - wk + 1) / s] where that is an integer position, else 0.
    hd, wd = h + hk - 1, w + wk - 1
    nn, c, u, v = np.indices((n, o, hd, wd))
    y_num, x_num = u + pad - hk + 1, v + pad - wk + 1
    valid = (y_num >= 0) & (x_num >= 0) & (y_num % s == 0) & (x_num % s == 0) \
        & (y_num // s < out_h) & (x_num // s < out_w)
    flat = ((nn * o + c) * out_h + np.clip(y_num // s, 0, out_h - 1)) * out_w + np.clip(x_num // s, 0, out_w - 1)
    dy_base = builder.place("dy", (n, o, out_h, out_w), COMMON, np.where(valid, flat, -1))
    del nn, c, u, v, y_num, x_num, valid, flat

    def flipped(r, k):                         # W'[c][(o, a, b)] = W[o][c][hk-1-a][wk-1-b]
        channel, tap = k // taps, k % taps
        return ((channel * d + r) * hk + hk - 1 - tap // wk) * wk + wk - 1 - tap % wk

    jobs, b_base, cols_pad = _matmul_rows(
        kind, d, o * taps, n * h * w, pes, pe, sr, bits, builder, ("w", (o, d, hk, wk)), flipped,
        ("dx", (n, d, h, w)), lambda r, j: ((j // (h * w)) * d + r) * h * w + j % (h * w))
    copy = gather(kind, dy_base, [("n", o * hd * wd), ("y", wd), ("x", 1)], (h, w, o),
                  lambda c, kh, kw: c * hd * wd + kh * wd + kw,
                  [("n", h * w), ("y", w), ("x", 1)], b_base, lambda k: k * cols_pad)
    return builder, jobs, [copy], ("dy", "w"), "dx"


# ----------------------------------------------------------------------------------------------
# Max pooling (r x r windows, stride r) with argmax, the comparators in MAX mode.

def _maxpool(dims, pes, pe):
    n, c, h, w, radius = (dims[key] for key in ("n", "c", "h", "w", "r"))
    lanes = pe["lanes"]
    check_range("maxpool h mod r", h % radius, 0, "the window must tile the height")
    check_range("maxpool w mod r", w % radius, 0, "the window must tile the width")
    check_range("maxpool window r*r - 1 (argmax index)", radius * radius - 1, (1 << pe["index_bits"]) - 1,
                "2**index_bits - 1")
    out_h, out_w = h // radius, w // radius
    window = radius * radius
    _check_buffers(pe, "maxpool", in2_rows=window)
    rounds = _ceil(n, lanes * pes)
    builder = _Builder(pes)
    x_base = builder.place_all("x", (n, c, h, w), lambda p: _batch_lane_index((n, c, h, w), rounds, pes, lanes, p))
    y_base = builder.place_all("y", (n, c, out_h, out_w),
                               lambda p: _batch_lane_index((n, c, out_h, out_w), rounds, pes, lanes, p))
    # CNT1 addresses BUF2, so every window (output row) is one pass over its own block of r*r rows.
    passes_per_pe = rounds * c * out_h * out_w
    word = _pe_word(op=OP_MAX, wide=0, emit=1, cnt2_outer=radius - 1, cnt2_inner=radius - 1, cnt1=window - 1)
    jobs = []
    for p in range(pes):
        in2 = Stream(p, [pmag_program("maxpool windows", [("cho", c * out_h), ("wo", out_w), ("hk", radius),
                                                          ("wkl", radius * lanes)],
                                      [("cho", radius * w * lanes), ("wo", radius * lanes), ("hk", w * lanes),
                                       ("wkl", 1)], base=x_base + g * c * h * w * lanes) for g in range(rounds)])
        out = Stream(p, [pmag_program("maxpool result", [("cho", rounds * c * out_h), ("wo", out_w), ("lane", lanes)],
                                      [("cho", out_w * lanes), ("wo", lanes), ("lane", 1)], base=y_base, write=True)])
        jobs.append(PeJob(p, [word] * passes_per_pe, None, [], in2, [window] * passes_per_pe, out))
    return builder, jobs, ("x",), "y"


def _maxpool_bp(dims, pes, pe):
    """Max-pooling backward: dX of every window is dY at the forward pass's argmax, 0 elsewhere.

    Inputs ``pooled`` (the forward pass's result words ``max | argmax << 16``, as it stored them) and
    ``dy`` (same shape and layout); output ``dx`` (the layout of the forward pass's ``x``). One route
    pass per window group (one window per lane): its BUF2 block is the group's ``pooled`` row and
    ``dy`` row; its ``r * r`` result rows are written back by the forward pass's window program
    (the same addresses, as writes), so every position of every window gets its word.
    """
    n, c, h, w, radius = (dims[key] for key in ("n", "c", "h", "w", "r"))
    lanes = pe["lanes"]
    check_range("maxpool_bp h mod r", h % radius, 0, "the window must tile the height")
    check_range("maxpool_bp w mod r", w % radius, 0, "the window must tile the width")
    check_range("maxpool_bp window r*r - 1 (argmax index)", radius * radius - 1, (1 << pe["index_bits"]) - 1,
                "2**index_bits - 1")
    out_h, out_w = h // radius, w // radius
    window = radius * radius
    check_range("maxpool_bp route steps r*r + 2 - 1 (PE CNT2)", window + ROUTE_LOAD_STEPS - 1, RANGE_LIMIT - 1)
    _check_buffers(pe, "maxpool_bp", in2_rows=ROUTE_LOAD_STEPS)
    rounds = _ceil(n, lanes * pes)
    builder = _Builder(pes)
    pooled_shape = (n, c, out_h, out_w)
    pooled_base = builder.place_all("pooled", pooled_shape,
                                    lambda p: _batch_lane_index(pooled_shape, rounds, pes, lanes, p))
    dy_base = builder.place_all("dy", pooled_shape, lambda p: _batch_lane_index(pooled_shape, rounds, pes, lanes, p))
    dx_base = builder.place_all("dx", (n, c, h, w), lambda p: _batch_lane_index((n, c, h, w), rounds, pes, lanes, p))
    passes_per_pe = rounds * c * out_h * out_w
    word = _pe_word(op=OP_MAX, transpose=1, wide=1, emit=1, cnt2_outer=0,
                    cnt2_inner=window + ROUTE_LOAD_STEPS - 1, cnt1=ROUTE_LOAD_STEPS - 1)
    jobs = []
    for p in range(pes):
        in2 = Stream(p, [pmag_program("maxpool_bp argmax and dy rows", [("group", passes_per_pe), ("tensor", 2),
                                                                        ("lane", lanes)],
                                      [("group", lanes), ("tensor", dy_base - pooled_base), ("lane", 1)],
                                      base=pooled_base)])
        out = Stream(p, [pmag_program("maxpool_bp windows", [("cho", c * out_h), ("wo", out_w), ("hk", radius),
                                                             ("wkl", radius * lanes)],
                                      [("cho", radius * w * lanes), ("wo", radius * lanes), ("hk", w * lanes),
                                       ("wkl", 1)], base=dx_base + g * c * h * w * lanes, write=True)
                         for g in range(rounds)])
        jobs.append(PeJob(p, [word] * passes_per_pe, None, [], in2, [ROUTE_LOAD_STEPS] * passes_per_pe, out))
    return builder, jobs, ("pooled", "dy"), "dx"


def _act_bp(dims, pes, pe, sr):
    """The activation's backward step, element-wise: ``dz = f'(z) * dx`` of two ``(h, n)`` tensors.

    ``z`` (the pre-activation the forward pass stored) and ``dx`` (the gradient the next layer's
    backward pass gave) are stored alike in the PE vaults, rows of ``lanes`` elements, each PE a
    contiguous share of the rows. Each PE's BUF2 stream reads the rows in pairs, a ``z`` row
    through f'(x) (its addresses carry the LUT select, ``lut_alias("df")``) then the ``dx`` row;
    product passes (MAX with ``accumulate``, ``hw/neurotrainer/docs/pe.md``) multiply them lane by
    lane on the MAC array (32-bit, SR by ``sr``); ``dz`` is written row by row like ``z``.
    """
    h, n = dims["h"], dims["n"]
    lanes = pe["lanes"]
    rows = _ceil(h * n, lanes)
    per_pe = _ceil(rows, pes)
    pairs = min(per_pe, (pe["in2_depth"] // 2) // 2, RANGE_LIMIT // 2)
    check_range("act_bp BUF2 half (rows, a pair per output row)", 2, pe["in2_depth"] // 2)
    per_pe = _ceil(per_pe, pairs) * pairs             # whole blocks: every pass reads 2 * pairs rows
    builder = _Builder(pes)

    def share(p):
        flat = (p * per_pe + np.arange(per_pe))[:, None] * lanes + np.arange(lanes)
        return np.where(flat < h * n, flat, -1)

    z_base = builder.place_all("z", (h, n), share)
    dx_base = builder.place_all("dx", (h, n), share)
    dz_base = builder.place_all("dz", (h, n), share)
    passes = per_pe // pairs
    word = _pe_word(op=OP_MAX, accumulate=1, wide=1, sr=int(sr), emit=1, cnt2_outer=0,
                    cnt2_inner=2 * pairs - 1, cnt1=2 * pairs - 1)
    jobs = []
    z_read = z_base + lut_alias("df")
    for p in range(pes):
        in2 = Stream(p, [pmag_program("act_bp z (through f') and dx rows", [("row", per_pe), ("tensor", 2),
                                                                            ("lane", lanes)],
                                      [("row", lanes), ("tensor", (dx_base - z_read) & _MASK32), ("lane", 1)],
                                      base=z_read)])
        out = Stream(p, [pmag_program("act_bp dz", [("row", per_pe), ("lane", lanes)], [("row", lanes), ("lane", 1)],
                                      base=dz_base, write=True)])
        jobs.append(PeJob(p, [word] * passes, None, [], in2, [2 * pairs] * passes, out))
    return builder, jobs, ("z", "dx"), "dz"


# ----------------------------------------------------------------------------------------------
# Data preparation (Table 3): add pad, remove pad, partition, merge. No PE involved.

def _linear(label, base, d, h, w, write=False):
    return pmag_program(label, [("d", d), ("h", h), ("w", w)], [("w", 1), ("h", w), ("d", h * w)],
                        base=base, write=write)


def _data_prep(kind, dims, pes):
    d, h, w = dims["d"], dims["h"], dims["w"]
    builder = _Builder(pes)
    jobs = []
    if kind in ("add_pad", "remove_pad"):
        radius = dims["r"]
        hp, wp = h + 2 * radius, w + 2 * radius
        small, big = (d, h, w), (d, hp, wp)
        inside = ("wp", (radius, radius + w), "hp", (radius, radius + h))
        padded_loops = [("d", d), ("hp", hp), ("wp", wp)]
        padded_terms = [("wp", 1), ("hp", wp), ("d", hp * wp)]
        if kind == "add_pad":
            x_base = builder.place("x", small, COMMON, np.arange(d * h * w))
            y_base = builder.place("y", big, COMMON, np.arange(d * hp * wp))
            source = Stream(COMMON, [_linear("add_pad read", x_base, d, h, w)])
            dest = Stream(COMMON, [pmag_program("add_pad write", padded_loops, padded_terms, base=y_base, write=True,
                                                window=("pad", *inside))])
        else:
            x_base = builder.place("x", big, COMMON, np.arange(d * hp * wp))
            y_base = builder.place("y", small, COMMON, np.arange(d * h * w))
            source = Stream(COMMON, [pmag_program("remove_pad read", padded_loops, padded_terms, base=x_base,
                                                  window=("skip", *inside))])
            dest = Stream(COMMON, [_linear("remove_pad write", y_base, d, h, w, write=True)])
        jobs.append(CopyJob(source, dest))
        return builder, jobs, ("x",), "y"
    tiles_h, tiles_w = dims["th"], dims["tw"]
    check_range("tile grid th * tw (PEs)", tiles_h * tiles_w, pes, "one tile per PE")
    check_range("h mod th", h % tiles_h, 0, "tiles must divide the height")
    check_range("w mod tw", w % tiles_w, 0, "tiles must divide the width")
    tile_h, tile_w = h // tiles_h, w // tiles_w

    def tile(p):
        dd, hh, ww = np.indices((d, tile_h, tile_w))
        y0, x0 = (p // tiles_w) * tile_h, (p % tiles_w) * tile_w
        return (dd * h + hh + y0) * w + ww + x0

    whole = (d, h, w)
    used = tiles_h * tiles_w
    if kind == "partition":
        common_base = builder.place("x", whole, COMMON, np.arange(d * h * w))
        tile_base = builder.place_all("y", whole, lambda p: tile(p) if p < used else np.zeros(0, dtype=np.int64))
    else:
        tile_base = builder.place_all("x", whole, lambda p: tile(p) if p < used else np.zeros(0, dtype=np.int64))
        common_base = builder.place("y", whole, COMMON, np.arange(d * h * w))
    for p in range(used):
        y0, x0 = (p // tiles_w) * tile_h, (p % tiles_w) * tile_w
        local = _linear(f"{kind} PE {p} tile", tile_base, d, tile_h, tile_w, write=kind == "partition")
        if kind == "partition":
            source = pmag_program(f"partition read for PE {p}", [("d", d), ("h", h), ("w", w)],
                                  [("w", 1), ("h", w), ("d", h * w)], base=common_base,
                                  window=("skip", "h", (y0, y0 + tile_h), "w", (x0, x0 + tile_w)))
            jobs.append(CopyJob(Stream(COMMON, [source]), Stream(p, [local])))
        else:
            dest = pmag_program(f"merge write from PE {p}", [("d", d), ("h", tile_h), ("w", tile_w)],
                                [("w", 1), ("h", w), ("d", h * w)], base=common_base + y0 * w + x0, write=True)
            jobs.append(CopyJob(Stream(p, [local]), Stream(COMMON, [dest])))
    return builder, jobs, ("x",), "y"


# ----------------------------------------------------------------------------------------------
# 16-bit layers: the PE streams request words of two elements (spec/neurotrainer/packing.py).

def _signed32(value):
    value = int(value) & _MASK32
    return value - (1 << 32) if value >> 31 else value


def _pack_program(program, label, whole_block):
    """The word-level program of an element-level program of a 16-bit stream.

    The element program's innermost loop must step by one element (its term's stride 1), every
    other stride and the base must be even slots: then each pair of consecutive innermost elements
    is one word, and the word program is the element program with that loop's count halved and
    the base and other strides halved. An odd innermost count is taken only for a program that is
    one run of its innermost loop and one BUF1 block (``whole_block``): its last word's high half
    is padding, which the BUF1 packer drops at the block's end.
    """
    if program["window"] != 0:
        raise ProgramError(f"{label}: a 16-bit stream with a window", program["window"], 0, "not packed")
    active = [level for level in range(LEVELS) if program["max"][level] > 0]
    packed = {**program, "max": list(program["max"]), "stride": list(program["stride"])}
    if not active:
        return packed                   # one request: its low half
    inner = active[-1]
    code = SOURCE_NAMES[f"r{inner + 1}"]
    count = program["max"][inner] + 1
    if code in (program["s"], program["t"], program["u"], program["v"]):
        raise ProgramError(f"{label}: the innermost loop of a 16-bit stream in p or q", inner + 1, 0, "not packed")
    inner_terms = [slot for slot in range(4) if program["abcd"[slot]] == code]
    if [program["stride"][slot] for slot in inner_terms] != [1]:
        raise ProgramError(f"{label}: innermost stride of a 16-bit stream", len(inner_terms), 1,
                           "one term of stride 1 (consecutive elements)")
    if count % 2 and not (whole_block and len(active) == 1):
        raise ProgramError(f"{label}: innermost count of a 16-bit stream", count, count + 1,
                           "an even count (two elements per word)")
    if program["base"] % 2:
        raise ProgramError(f"{label}: base slot of a 16-bit stream", program["base"], program["base"] + 1,
                           "an even slot")
    packed["base"] = program["base"] // 2
    for slot in range(4):
        if slot in inner_terms or program["abcd"[slot]] == 0:
            continue
        stride = _signed32(program["stride"][slot])
        if stride % 2:
            raise ProgramError(f"{label}: stride of a 16-bit stream (term {'abcd'[slot]})", stride, stride + 1,
                               "an even number of slots")
        packed["stride"][slot] = (stride // 2) & _MASK32
    packed["max"][inner] = -(-count // 2) - 1
    return packed


def _pack_pe_streams(layer):
    """Turn every PE stream of a 16-bit layer into word requests (copy jobs stay element-level)."""
    done = set()
    for job in layer.pe_jobs:
        for role, stream in (("BUF Input 1", job.in1), ("BUF Input 2", job.in2), ("result", job.out)):
            if stream is None or id(stream) in done:
                continue
            done.add(id(stream))
            whole = role == "BUF Input 1" and len(stream.programs) == 1 and len(job.in1_blocks) == 1
            stream.programs = [_pack_program(program, f"{layer.kind} {role}", whole) for program in stream.programs]


#: Layer kinds and the dimensions each takes.
LAYERS = {
    "conv_ff": ("n", "d", "h", "w", "o", "hk", "wk"),
    "conv_bp": ("n", "d", "h", "w", "o", "hk", "wk"),
    "conv_up": ("n", "d", "h", "w", "o", "hk", "wk"),
    "fc_ff": ("h", "k", "n"),
    "fc_bp": ("h", "k", "n"),
    "fc_up": ("h", "k", "n"),
    "maxpool": ("n", "c", "h", "w", "r"),
    "maxpool_bp": ("n", "c", "h", "w", "r"),
    "act_bp": ("h", "n"),
    "add_pad": ("d", "h", "w", "r"),
    "remove_pad": ("d", "h", "w", "r"),
    "partition": ("d", "h", "w", "th", "tw"),
    "merge": ("d", "h", "w", "th", "tw"),
}


#: Optional convolution dimensions and their defaults: stride ``s`` and zero padding ``p``.
CONV_OPTIONS = {"s": 1, "p": 0}
CONV_OPTIONS_KINDS = ("conv_ff", "conv_bp", "conv_up")

#: Table 4's "Bit" column: the MAC mode of every MAC layer kind.
TABLE4_BITS = {"conv_ff": 16, "conv_bp": 32, "conv_up": 32, "fc_ff": 16, "fc_bp": 32, "fc_up": 32}


def _attach_luts(layer, lut, lut_params):
    """Read every input tensor named in ``lut`` (``{tensor: "f" | "df"}``) through its table: its read
    stream's program bases get the table's address alias (the stream reads only that tensor)."""
    for name, function in lut.items():
        if name not in layer.inputs:
            raise ValueError(f"lut: {name!r} is not an input of {layer.kind}; inputs: {', '.join(layer.inputs)}")
        if function not in lut_params:
            raise ValueError(f"lut[{name!r}] = {function!r}; allowed: {', '.join(sorted(lut_params))}")
        if layer.copy_jobs:
            raise ValueError(f"{layer.kind}: lut on {name!r} needs the direct lowering (the host gathers the "
                               "tiled lowering's operand, with its zero padding, before the read path)")
        vaults = {place.vault for place in layer.tensors[name][1]}
        others = {other for other in layer.inputs if other != name
                  and vaults & {place.vault for place in layer.tensors[other][1]}}
        if others:
            raise ValueError(f"{layer.kind}: lut on {name!r}: its vaults also hold {', '.join(sorted(others))}")
        streams = [stream for job in layer.pe_jobs for stream in (job.in1, job.in2)
                   if stream is not None and stream.vault in vaults]
        if not streams:
            raise ValueError(f"{layer.kind}: lut on {name!r}: no PE stream reads it")
        for stream in {id(stream): stream for stream in streams}.values():
            stream.lut = function
            for program in stream.programs:
                program["base"] = (program["base"] + lut_alias(function)) & _MASK32
    layer.lut = {function: dict(params) for function, params in lut_params.items()}


def compile_layer(kind, dims, *, pes=1, pe=None, sr=False, bits=None, ibuffer_limit=IBUFFER_BYTES, lut=None,
                  lut_params=None):
    """Compile one layer.

    Parameters
    ----------
    kind : str
        One of :data:`LAYERS`.
    dims : dict of str to int
        The layer's dimensions (:data:`LAYERS`): conv ``n`` samples, ``d`` input channels,
        ``h, w`` input size, ``o`` output channels, ``hk, wk`` kernel; fc ``h`` outputs, ``k``
        inputs, ``n`` samples; maxpool ``n, c, h, w`` and radius ``r``; data preparation ``d, h, w``
        and pad ``r`` or tile grid ``th x tw``.
    pes : int
        Processing elements (and independent vaults).
    pe : dict, optional
        NTPE parameters (``lanes``, ``in1_depth``, ``in2_depth``, ``out_depth``, ``frac_bits``, ...).
    sr : bool
        Stochastic rounding on in the 32-bit MAC passes.
    bits : int, optional
        MAC data width, 16 or 32 (``conv_ff`` and ``fc_ff`` only; the others are 32-bit); by
        default Table 4's (:data:`TABLE4_BITS`). In 16-bit mode every PE stream requests words
        of two 16-bit elements (``wide = 0``, the first in the low half), so a BUF2 row of
        ``lanes`` words holds ``2 * lanes`` samples, a BUF1 block of ``W`` weights is
        ``ceil(W / 2)`` words (the BUF1 row packer puts each weight in both halves of a buffer
        word) and a result row is ``lanes`` words; the reduction block of a matmul is even.
    ibuffer_limit : int
        iBuffer size in bytes.
    lut : dict of str to str, optional
        Input tensors read through the vault controllers' LUTs: ``{"x": "f"}`` gives the PEs
        f(x) of every element of ``x`` (``"df"``: f'(x)); pad words stay 0. The tensor's vaults
        must hold no other input, and the layer must take the direct lowering.
    lut_params : dict, optional
        ``{"f": nt_lut parameters, "df": nt_lut parameters}`` (needed with ``lut``; ``act_bp``
        takes the system's default tables without it;
        :func:`trainforge.spec.neurotrainer.integration.lut_functions`).

    Returns
    -------
    CompiledLayer

    Raises
    ------
    ProgramError
        The layer does not fit (a PMAG counter range beyond 16 bits, a PE range beyond 256, a
        buffer block beyond half a buffer, the iBuffer image beyond ``ibuffer_limit``).
    ValueError
        An unknown kind, missing/unknown/non-positive dimensions, an invalid PE parameter, a
        ``lut`` on a tensor that is not an input, shares its vaults with another input or is
        gathered by the host (the tiled lowering).
    """
    if kind not in LAYERS:
        raise ValueError(f"layer kind {kind!r} is unknown; allowed: {', '.join(LAYERS)}")
    expected = LAYERS[kind]
    optional = CONV_OPTIONS if kind in CONV_OPTIONS_KINDS else {}
    if not set(expected) <= set(dims) <= set(expected) | set(optional):
        allowed = ", ".join(expected) + "".join(f", {key} (default {value})" for key, value in optional.items())
        raise ValueError(f"{kind} takes dimensions {allowed}; got {', '.join(dims) or 'none'}")
    dims = {key: int(dims[key]) for key in (*expected, *optional) if key in dims}
    for key, value in dims.items():
        if value < (0 if (key == "r" and kind in ("add_pad", "remove_pad")) or key == "p" else 1):
            raise ValueError(f"{kind} dimension {key} = {value} must be positive")
    if pes < 1:
        raise ValueError(f"pes = {pes} must be >= 1")
    pe = NTPE.PARAMS.resolve(**(pe or {}))
    bits = TABLE4_BITS.get(kind, 32) if bits is None else bits
    if bits not in (16, 32) or (bits == 16 and kind not in ("conv_ff", "fc_ff")):
        raise ValueError(f"bits = {bits} is not available for {kind}; allowed: 16 or 32 for conv_ff and fc_ff, "
                         "32 for the other MAC layers")
    copies = []
    if kind in CONV_OPTIONS_KINDS:
        full = {**CONV_OPTIONS, **dims}
        direct = None
        if full["s"] == 1 and full["p"] == 0:
            try:
                direct = _conv_window(kind, full, pes, pe, sr, bits) if kind != "conv_up" \
                    else _conv_up(full, pes, pe, sr)
            except ProgramError:
                direct = None          # does not fit the direct lowering: tile it
        if direct is not None:
            builder, jobs, inputs, output = direct
        else:
            builder, jobs, copies, inputs, output = _conv_tiled(kind, full, pes, pe, sr, bits)
    elif kind in ("fc_ff", "fc_bp"):
        builder, jobs, inputs, output = _fc_matmul(kind, dims, pes, pe, sr, bits)
    elif kind == "fc_up":
        builder, jobs, inputs, output = _fc_up(dims, pes, pe, sr)
    elif kind == "maxpool":
        builder, jobs, inputs, output = _maxpool(dims, pes, pe)
    elif kind == "maxpool_bp":
        builder, jobs, inputs, output = _maxpool_bp(dims, pes, pe)
    elif kind == "act_bp":
        # z is read through f'(x): without lut_params, the system's default tables.
        lut_params = lut_params or lut_functions(SYSTEM_PARAMS.defaults)
        builder, jobs, inputs, output = _act_bp(dims, pes, pe, sr)
    else:
        builder, jobs, inputs, output = _data_prep(kind, dims, pes)
    layer = CompiledLayer(kind, dims, pe, pes, builder.tensors, inputs, output, builder.words(), bits=bits)
    if kind in ("add_pad", "remove_pad", "partition", "merge"):
        layer.copy_jobs = jobs
    else:
        layer.pe_jobs, layer.copy_jobs = jobs, copies
    if bits == 16:
        _pack_pe_streams(layer)
    for _, _, stream in layer.streams():
        for program in stream.programs:
            program["wide"] = int(bits == 32)
    if lut:
        if not lut_params:
            raise ValueError("lut needs lut_params (the LUTs' nt_lut parameters by 'f' and 'df')")
        _attach_luts(layer, lut, lut_params)
    if lut_params:
        layer.lut = {function: dict(params) for function, params in lut_params.items()}
    layer.ibuffer = ibuffer_image(layer.pmag_programs(), [job.passes for job in layer.pe_jobs], ibuffer_limit)
    return layer
