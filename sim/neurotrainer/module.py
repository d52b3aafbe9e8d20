"""Analytic throughput model of one NeuroTrainer module (paper Secs. 3 to 5, Figs. 3 and 5 to 9).

Superseded for the family's figures: ``trainforge neurotrainer alexnet`` and ``scaling`` time the
compiled programs (``sim/neurotrainer/program_time.py``, checked against the ``nt_system`` RTL;
``sim/neurotrainer/module_from_programs.py``). This analytic dataflow, which is not the one the
compiler and the RTL implement, stays only because HyPar's node model
(``sim/hypar/nodes.py``) calls :func:`layer_pass_time`; :class:`ModuleConfig` is shared by both.

The module: ``pes`` PEs, each on its own (*dedicated*) vault, plus one *common* vault that
reaches every PE through the 32-bit broadcast/merge bus. A PE has ``k = macs_per_pe`` MAC
lanes; each cycle BUF Input 1 pushes one 32-bit word ``a`` to all lanes and BUF Input 2
pushes ``k`` words ``x`` (one per lane), so a PE does ``k`` 32-bit MACs, or ``2k`` 16-bit
MACs, per cycle. Every figure below comes from that datapath, the vault and bus word rates,
the buffer sizes and the mapping of each pass the paper describes; nothing is fitted.

Mapping rules (``hw/neurotrainer/README.md``, section "System model", has the full list):

- **Lanes.** For FF and BP the ``k`` lanes are ``k`` samples of the minibatch ("NMAC inputs
  are processed in parallel"); in 16-bit mode one word carries two consecutive reduction
  elements (the two half-products accumulate separately and are added on write-back).
  For the outer product (FC UP) and the lowered convolution UP the lanes are ``k`` columns
  of dW, and the samples are a reduction loop ("Ni samples cannot be unlooped in SIMD").
- **Blocks.** The output buffer holds, in one half (double buffering), ``P`` output rows of
  ``k`` lanes; a *step* is one such block of outputs: it reads its operands through the two
  input buffers, computes, and its results are written back during the next step.
- **FC FF/BP** (Fig. 7, "large common data"): the weight matrix (W, or W^T by sweeping the
  counters) is split row-wise over the PEs' dedicated vaults; X (or dY) is broadcast from the
  common vault for every band of ``P`` rows (again per band unless it fits in half of BUF
  Input 2); the outputs are merged into the common vault, all PEs through the one bus.
- **FC UP** (Fig. 8): dY is split row-wise over the dedicated vaults, X is broadcast, and
  each ``P x k`` block of dW accumulates over the samples, then is written to the dedicated
  vault. One dW word is produced per ``batch`` MACs: there is no other reuse.
- **Conv FF/BP** (Fig. 5, "small common data"): output pixels are split over the PEs
  (inputs with their halo in the dedicated vaults), kernels are broadcast from the common
  vault; a step is ``P`` output channels x ``Q`` adjacent output pixels x ``k`` samples
  (``P * Q <= P_max``), so an input word is reused by ``P`` channels and by the window
  overlap of the ``Q`` pixels. BP is the convolution of dY with W^T; a stride ``s > 1`` is
  decomposed into ``s^2`` stride phases of ``ceil(K/s)^2`` taps (the longest phase sets
  the work of all).
- **Conv UP** (Fig. 6): lowered to a matrix multiplication over positions and samples; the
  rows (lowered-X columns or output channels, whichever is faster) are split over the PEs,
  the other operand is broadcast, and dW is merged into the common vault.
- **Timing.** A step lasts the longest of its compute cycles, its dedicated-vault words
  (its inputs plus the previous step's write-back) over the vault word rate, and its
  common-path words (broadcast plus the previous step's merge) over the common word rate
  (the slower of the common vault and the bus). Before the first step the pipeline fills
  (vault latency, PMAG latency, bus stages, the first half-buffer of each input); after the
  last one its write-back drains.
"""
import math
from dataclasses import dataclass, field, replace

from trainforge.golden.neurotrainer.pmag import LATENCY as PMAG_LATENCY
from trainforge.checks import is_int, is_real
from trainforge.errors import ParameterError

__all__ = ["ModuleConfig", "PassTime", "layer_pass_time", "paper_precision", "KINDS", "PASSES",
           "CONV_DIMS", "FC_DIMS", "WORD_BYTES"]

#: Layer kinds and pass names ``layer_pass_time`` accepts.
KINDS = ("conv", "fc")
PASSES = ("ff", "bp", "up")
#: Required keys of ``dims`` per kind (``groups``, default 1, is optional for conv).
CONV_DIMS = ("in_channels", "out_channels", "kernel", "in_h", "in_w", "out_h", "out_w", "stride", "batch")
FC_DIMS = ("inputs", "outputs", "batch")
#: Bytes of one MAC word (one 32-bit operand, or two 16-bit operands).
WORD_BYTES = 4


def _require(ok, name, value, allowed):
    if not ok:
        raise ParameterError(f"parameter '{name}' = {value!r} is invalid; allowed: {allowed}")


@dataclass(frozen=True)
class ModuleConfig:
    """Parameters of one NeuroTrainer module.

    Parameters
    ----------
    pes : int
        PEs, one per dedicated vault (1..1024). Paper: 15 (HMC 1.0: 16 vaults, one common).
    macs_per_pe : int
        MAC lanes k per PE (1..1024). Paper: 32.
    clock_hz : float
        Clock of the PEs, bus and PMAGs, > 0 and <= 1e11. Paper: 2.5 GHz.
    wide : bool
        MAC mode for every pass: False = 16-bit (two 16-bit pairs per MAC per cycle),
        True = 32-bit (one pair). :func:`paper_precision` gives the paper's choice per pass.
    vault_bytes_per_s : float
        Bandwidth of one dedicated vault, > 0. Paper: 10 GB/s.
    common_vault_bytes_per_s : float
        Bandwidth of the common vault, > 0. Paper: 10 GB/s.
    vault_latency_s : float
        Access latency of a vault, >= 0 and < 1e-3 (our assumption: 40 ns, a DRAM row cycle;
        the paper gives none; real DRAM timing is out of scope).
    bus_bits : int
        Width of the broadcast/merge bus (8..1024, a multiple of 8). Paper: 32 bits, i.e.
        10 GB/s at 2.5 GHz, "the same as a single vault".
    bus_stages : int
        Pipeline stages of the bus (0..64). Paper: 4.
    input1_buffer_bytes, input2_buffer_bytes, output_buffer_bytes : int
        BUF Input 1, BUF Input 2 and BUF Output (partial sums) per PE, each two halves
        (double buffering); a multiple of ``2 * WORD_BYTES * macs_per_pe``, 64 B .. 64 MiB.
        The paper gives no sizes; our default, 8 KiB each, is what fits in the PE area of
        Table 5 (0.0696 mm^2) beside 32 Table 1 SR-LO MACs (32 x 1578.71 um^2), about
        19,000 um^2 of SRAM at about 0.1 um^2 per bit (README, "System model").
    """

    pes: int = 15
    macs_per_pe: int = 32
    clock_hz: float = 2.5e9
    wide: bool = False
    vault_bytes_per_s: float = 10e9
    common_vault_bytes_per_s: float = 10e9
    vault_latency_s: float = 40e-9
    bus_bits: int = 32
    bus_stages: int = 4
    input1_buffer_bytes: int = 8192
    input2_buffer_bytes: int = 8192
    output_buffer_bytes: int = 8192

    def __post_init__(self):
        _require(is_int(self.pes) and 1 <= self.pes <= 1024, "pes", self.pes, "an integer in 1..1024")
        _require(is_int(self.macs_per_pe) and 1 <= self.macs_per_pe <= 1024, "macs_per_pe", self.macs_per_pe,
                 "an integer in 1..1024")
        _require(is_real(self.clock_hz) and 0 < self.clock_hz <= 1e11, "clock_hz", self.clock_hz,
                 "a number in (0, 1e11]")
        _require(isinstance(self.wide, bool), "wide", self.wide, "true or false")
        for name in ("vault_bytes_per_s", "common_vault_bytes_per_s"):
            value = getattr(self, name)
            _require(is_real(value) and 0 < value <= 1e15, name, value, "a number in (0, 1e15]")
        _require(is_real(self.vault_latency_s) and 0 <= self.vault_latency_s < 1e-3, "vault_latency_s",
                 self.vault_latency_s, "a number in [0, 1e-3)")
        _require(is_int(self.bus_bits) and 8 <= self.bus_bits <= 1024 and self.bus_bits % 8 == 0, "bus_bits",
                 self.bus_bits, "a multiple of 8 in 8..1024")
        _require(is_int(self.bus_stages) and 0 <= self.bus_stages <= 64, "bus_stages", self.bus_stages,
                 "an integer in 0..64")
        unit = 2 * WORD_BYTES * self.macs_per_pe
        for name in ("input1_buffer_bytes", "input2_buffer_bytes", "output_buffer_bytes"):
            value = getattr(self, name)
            _require(is_int(value) and 64 <= value <= 1 << 26 and value % unit == 0, name, value,
                     f"a multiple of {unit} (2 halves x {self.macs_per_pe} lanes x {WORD_BYTES} B) in 64..67108864")

    @property
    def elements_per_word(self):
        """16-bit elements per MAC word and per lane per cycle: 2 in 16-bit mode, 1 in 32-bit mode."""
        return 1 if self.wide else 2

    @property
    def peak_macs_per_cycle(self):
        """pes x macs_per_pe x elements_per_word."""
        return self.pes * self.macs_per_pe * self.elements_per_word

    @property
    def peak_ops(self):
        """Peak operations per second: 2 (multiply, add) x MACs per cycle x clock."""
        return 2 * self.peak_macs_per_cycle * self.clock_hz

    @property
    def dedicated_words_per_cycle(self):
        """32-bit words per cycle one dedicated vault delivers."""
        return self.vault_bytes_per_s / (WORD_BYTES * self.clock_hz)

    @property
    def common_words_per_cycle(self):
        """32-bit words per cycle on the common path: the slower of the common vault and the bus."""
        return min(self.common_vault_bytes_per_s, self.bus_bits / 8 * self.clock_hz) / (WORD_BYTES * self.clock_hz)

    @property
    def psum_rows(self):
        """Output rows of k partial sums in one half of BUF Output (``P_max``)."""
        return self.output_buffer_bytes // (2 * WORD_BYTES * self.macs_per_pe)

    @property
    def input1_half_words(self):
        return self.input1_buffer_bytes // (2 * WORD_BYTES)

    @property
    def input2_half_words(self):
        return self.input2_buffer_bytes // (2 * WORD_BYTES)


def paper_precision(config, pass_name):
    """``config`` in the paper's MAC mode for ``pass_name``: 16-bit for FF, 32-bit (SR) for BP and UP."""
    _check_choice("pass_name", pass_name, PASSES)
    return replace(config, wide=pass_name != "ff")


@dataclass(frozen=True)
class PassTime:
    """Time of one pass of one layer on one module, for the whole minibatch.

    Attributes
    ----------
    seconds : float
        Latency of the pass for the minibatch.
    cycles : float
        The same in clock cycles.
    macs : int
        Useful multiply-accumulates (the layer's, not the padded ones the hardware executes).
    ops : int
        ``2 * macs``.
    tops : float
        ``ops / seconds / 1e12``.
    compute_seconds : float
        MAC time of the busiest PE, padded lanes and taps included (no stalls).
    peak_tops : float
        The module's peak in the pass's MAC mode.
    bound : str
        What limits the steady state most: ``compute``, ``dedicated vault`` or ``common path``.
    losses : dict
        Seconds per named component; they sum to ``seconds``. ``compute at peak`` is the
        useful work at the peak rate, every other entry is time lost to the named cause.
    traffic : dict
        32-bit words moved: ``dedicated_read``, ``dedicated_write`` (per PE, the busiest one),
        ``broadcast``, ``merge`` (common path, all PEs).
    mapping : dict
        The block shape chosen (``P`` rows, ``Q`` pixels, steps, orientation, ...).
    """

    kind: str
    pass_name: str
    wide: bool
    seconds: float
    cycles: float
    macs: int
    ops: int
    tops: float
    compute_seconds: float
    peak_tops: float
    bound: str
    losses: dict = field(default_factory=dict)
    traffic: dict = field(default_factory=dict)
    mapping: dict = field(default_factory=dict)

    @property
    def utilization(self):
        """Fraction of the peak: ``tops / peak_tops``."""
        return self.tops / self.peak_tops


def _check_choice(name, value, choices):
    if value not in choices:
        raise ParameterError(f"parameter '{name}' = {value!r} is invalid; allowed: one of {', '.join(choices)}")


def _check_dims(kind, dims):
    if not isinstance(dims, dict):
        raise ParameterError(f"parameter 'dims' = {dims!r} is invalid; allowed: a dict")
    required = CONV_DIMS if kind == "conv" else FC_DIMS
    optional = ("groups",) if kind == "conv" else ()
    missing = [name for name in required if name not in dims]
    if missing:
        raise ParameterError(f"parameter 'dims' lacks {', '.join(missing)}; allowed: a dict with {', '.join(required)}")
    unknown = [name for name in dims if name not in required + optional]
    if unknown:
        raise ParameterError(f"parameter 'dims' has unknown key(s) {', '.join(unknown)}; allowed: "
                         f"{', '.join(required + optional)}")
    for name, value in dims.items():
        _require(is_int(value) and 1 <= value <= 1 << 30, f"dims.{name}", value, "an integer in 1..2**30")
    if kind == "conv":
        groups = dims.get("groups", 1)
        for name in ("in_channels", "out_channels"):
            _require(dims[name] % groups == 0, f"dims.{name}", dims[name], f"a multiple of groups = {groups}")
        for axis in ("h", "w"):
            span = (dims[f"out_{axis}"] - 1) * dims["stride"] + dims["kernel"]
            padded_limit = dims[f"in_{axis}"] + 2 * (dims["kernel"] - 1)
            _require(span <= padded_limit, f"dims.out_{axis}", dims[f"out_{axis}"],
                     f"at most (in_{axis} + 2 (kernel - 1) - kernel) / stride + 1 (kernel windows inside the "
                     f"input padded by at most kernel - 1)")


@dataclass(frozen=True)
class _Step:
    """``count`` identical steps: compute cycles and words in/out on each path."""
    count: float
    compute: float
    dedicated_in: float
    dedicated_out: float
    broadcast: float
    merge: float


# Names of the stream components in the loss breakdown, per mapping.
_NAMES = {
    "fc_mm": ("dedicated vault: weight stream", "dedicated vault: write-back",
              "bus: broadcast of the shared operand (re-sent per band of P rows)",
              "common-vault write-back (merge of all PEs over one bus)"),
    "fc_outer": ("dedicated vault: dY rows", "dedicated vault: dW write-back (no reuse in the outer product)",
                 "bus: broadcast of X (re-sent per band of P rows: no reuse across bands)",
                 "common-vault write-back"),
    "conv": ("dedicated vault: input stream (reuse limited by P channels x Q-pixel overlap)",
             "dedicated vault: output write-back", "bus: kernel broadcast", "common-vault write-back"),
    "conv_up": ("dedicated vault: lowered operand stream", "dedicated vault: write-back",
                "bus: broadcast of the shared operand (re-sent per band of P rows)",
                "common-vault write-back of dW (merge)"),
}


def _run(config, steps, repeats, names):
    """Total cycles of ``repeats`` x the step sequence ``steps``, with the stream losses by name.

    A step's write-back overlaps the next step; the first step of a repetition carries the
    previous repetition's last write-back; the very last write-back drains at the end.
    """
    ded_rate, com_rate = config.dedicated_words_per_cycle, config.common_words_per_cycle
    losses = dict.fromkeys(names, 0.0)
    total = 0.0

    def one(step, prev_out_d, prev_merge, weight):
        nonlocal total
        d_in, d_out = step.dedicated_in / ded_rate, prev_out_d / ded_rate
        c_in, c_out = step.broadcast / com_rate, prev_merge / com_rate
        time = max(step.compute, d_in + d_out, c_in + c_out)
        excess = time - step.compute
        if excess > 0:
            if d_in + d_out >= c_in + c_out:
                first = max(0.0, min(d_in, time) - step.compute)
                losses[names[0]] += weight * first
                losses[names[1]] += weight * (excess - first)
            else:
                first = max(0.0, min(c_in, time) - step.compute)
                losses[names[2]] += weight * first
                losses[names[3]] += weight * (excess - first)
        total += weight * time

    def sequence(prev_out_d, prev_merge, weight):
        for step in steps:
            if step.count <= 0:
                continue
            one(step, prev_out_d, prev_merge, weight)
            if step.count > 1:
                one(step, step.dedicated_out, step.merge, weight * (step.count - 1))
            prev_out_d, prev_merge = step.dedicated_out, step.merge
        return prev_out_d, prev_merge

    last_d, last_m = sequence(0.0, 0.0, 1.0)
    if repeats > 1:
        sequence(last_d, last_m, repeats - 1)
    return total, losses, (last_d, last_m)


def _fill_and_drain(config, first, last_out):
    """Pipeline fill before the first step and the write-back drain after the last one, in cycles.

    Computing starts only when both input buffers hold their first half ("half filled"): the
    first step cannot overlap the arrival of its first block with its compute. The drain is
    the last step's write-back, which no later compute hides.
    """
    latency = config.vault_latency_s * config.clock_hz + PMAG_LATENCY
    ded_rate, com_rate = config.dedicated_words_per_cycle, config.common_words_per_cycle
    ded_block = min(first.dedicated_in, config.input2_half_words) / ded_rate
    com_block = min(first.broadcast, config.input1_half_words) / com_rate
    start = max(latency + ded_block if first.dedicated_in else 0.0,
                latency + config.bus_stages + com_block if first.broadcast else 0.0)
    streams = max(first.dedicated_in / ded_rate, first.broadcast / com_rate)
    overlap_lost = max(first.compute + max(ded_block, com_block), streams) - max(first.compute, streams)
    fill = start - max(ded_block, com_block) + overlap_lost
    last_d, last_m = last_out
    drain = max(latency + last_d / ded_rate if last_d else 0.0,
                latency + config.bus_stages + last_m / com_rate if last_m else 0.0)
    return fill, drain


def _bands(rows, height):
    """(full bands, rows of the last partial band) for ``rows`` split in bands of ``height``."""
    full, rest = divmod(rows, height)
    return full, rest


def _fc_matmul(config, rows, reduction, batch):
    """FC FF/BP: weights row-split on the dedicated vaults, the batch operand broadcast, outputs merged."""
    k, m, pes = config.macs_per_pe, config.elements_per_word, config.pes
    groups = math.ceil(batch / k)
    samples = batch / groups
    rows_pe = math.ceil(rows / pes)
    height = min(config.psum_rows, rows_pe)
    words = math.ceil(reduction / m)
    operand = reduction * samples / m
    resident = operand <= config.input2_half_words
    share = rows / (pes * rows_pe)  # merge: the real rows, not the padded ones
    full, rest = _bands(rows_pe, height)

    def band(count, height_b, index):
        return _Step(count, height_b * words, height_b * words, 0.0,
                     operand if (not resident or index == 0) else 0.0, pes * height_b * samples / m * share)

    steps = [band(1, height, 0), band(full - 1, height, 1), band(1 if rest else 0, rest, 1)]
    mapping = {"P": height, "rows_per_pe": rows_pe, "bands": full + (1 if rest else 0), "lane_groups": groups,
               "operand_resident_in_input2": resident}
    return steps, groups, "fc_mm", mapping, groups * k / batch


def _fc_outer(config, outputs, inputs, batch):
    """FC UP: dY rows split on the dedicated vaults, X broadcast, dW blocks written to the dedicated vault."""
    k, m, pes = config.macs_per_pe, config.elements_per_word, config.pes
    rows_pe = math.ceil(outputs / pes)
    height = min(config.psum_rows, rows_pe)
    chunks = math.ceil(inputs / k)
    lanes = inputs / chunks
    red = math.ceil(batch / m)
    full, rest = _bands(rows_pe, height)

    def block(count, height_b):
        a_words = height_b * batch / m
        a_per_block = a_words / chunks if a_words <= config.input1_half_words else a_words
        return _Step(count * chunks, height_b * red, a_per_block, height_b * lanes / m, lanes * batch / m, 0.0)

    steps = [block(full, height), block(1 if rest else 0, rest)]
    mapping = {"P": height, "rows_per_pe": rows_pe, "column_chunks": chunks, "bands": full + (1 if rest else 0)}
    return steps, 1, "fc_outer", mapping, chunks * k / inputs


def _conv_like(config, cin, cout, groups, taps_h, taps_w, span, pixels, batch):
    """Conv FF/BP: pixels split over PEs, kernels broadcast, blocks of P channels x Q pixels x k samples."""
    k, m, pes = config.macs_per_pe, config.elements_per_word, config.pes
    lane_groups = math.ceil(batch / k)
    samples = batch / lane_groups
    pix_pe = math.ceil(pixels / pes)
    height = min(config.psum_rows, cout)
    reduction = cin * taps_h * taps_w
    words = math.ceil(reduction / m)
    full, rest = _bands(cout, height)

    def pixels_per_step(height_b):
        """Q: as many adjacent pixels as one output-buffer half (P x Q x k sums) and one BUF Input 2
        half (the input rows of the Q windows, one kernel row at a time) hold."""
        q = max(1, min(config.psum_rows // height_b, pix_pe))
        while q > 1 and taps_h * span(q) * samples / m > config.input2_half_words:
            q -= 1
        return q

    def band(count, height_b):
        q = pixels_per_step(height_b)
        iters = math.ceil(pix_pe / q)
        q_avg = pix_pe / iters
        kernel = height_b * reduction / m
        per_step = kernel / iters if kernel <= config.input1_half_words else kernel
        return _Step(count * iters, height_b * q_avg * words, cin * taps_h * span(q_avg) * samples / m,
                     height_b * q_avg * samples / m, per_step, 0.0)

    steps = [band(full, height)] + ([band(1, rest)] if rest else [])
    q = pixels_per_step(height)
    iters = math.ceil(pix_pe / q)
    mapping = {"P": height, "Q": q, "pixels_per_pe": pix_pe, "pixel_steps": iters, "lane_groups": lane_groups,
               "channel_bands": full + (1 if rest else 0)}
    return steps, lane_groups * groups, "conv", mapping, lane_groups * k / batch


def _conv_up(config, rows, lanes_total, reduction, groups):
    """Conv UP lowered to a matrix product: ``rows`` split on the PEs, the other operand broadcast, dW merged."""
    k, m, pes = config.macs_per_pe, config.elements_per_word, config.pes
    rows_pe = math.ceil(rows / pes)
    height = min(config.psum_rows, rows_pe)
    chunks = math.ceil(lanes_total / k)
    lanes = lanes_total / chunks
    red = math.ceil(reduction / m)
    share = rows / (pes * rows_pe)
    full, rest = _bands(rows_pe, height)

    def block(count, height_b):
        return _Step(count * chunks, height_b * red, height_b * reduction / m, 0.0, lanes * reduction / m,
                     pes * height_b * lanes / m * share)

    steps = [block(full, height), block(1 if rest else 0, rest)]
    mapping = {"P": height, "rows_per_pe": rows_pe, "column_chunks": chunks, "bands": full + (1 if rest else 0)}
    return steps, groups, "conv_up", mapping, chunks * k / lanes_total


def _mapping(config, kind, d, pass_name):
    """(steps, repeats, names key, mapping, lane factor, tap factor, useful MACs)."""
    if kind == "fc":
        macs = d["inputs"] * d["outputs"] * d["batch"]
        if pass_name == "ff":
            return (*_fc_matmul(config, d["outputs"], d["inputs"], d["batch"]), 1.0, macs)
        if pass_name == "bp":
            return (*_fc_matmul(config, d["inputs"], d["outputs"], d["batch"]), 1.0, macs)
        return (*_fc_outer(config, d["outputs"], d["inputs"], d["batch"]), 1.0, macs)
    groups = d.get("groups", 1)
    cin, cout, kernel, stride = d["in_channels"] // groups, d["out_channels"] // groups, d["kernel"], d["stride"]
    out_pixels, in_pixels = d["out_h"] * d["out_w"], d["in_h"] * d["in_w"]
    macs = d["out_channels"] * cin * kernel * kernel * out_pixels * d["batch"]
    if pass_name == "ff":
        steps = _conv_like(config, cin, cout, groups, kernel, kernel,
                           lambda q: min(stride * (q - 1) + kernel, q * kernel), out_pixels, d["batch"])
        return (*steps, 1.0, macs)
    if pass_name == "bp":
        taps = math.ceil(kernel / stride)  # taps of the longest stride phase
        executed = d["in_channels"] * cout * taps * taps * in_pixels * d["batch"]
        steps = _conv_like(config, cout, cin, groups, taps, taps, lambda q: q + taps - 1, in_pixels, d["batch"])
        return (*steps, executed / macs, macs)
    lowered = cin * kernel * kernel
    reduction = out_pixels * d["batch"]
    options = [_conv_up(config, lowered, cout, reduction, groups), _conv_up(config, cout, lowered, reduction, groups)]
    best = min(options, key=lambda option: _run(config, option[0], option[1], _NAMES[option[2]])[0])
    best[3]["rows"] = "lowered X columns (C_in K^2)" if best is options[0] else "output channels"
    return (*best, 1.0, macs)


def layer_pass_time(config, kind, dims, pass_name):
    """Latency, throughput and loss breakdown of one pass of one layer for the whole minibatch.

    Parameters
    ----------
    config : ModuleConfig
        The module; ``config.wide`` is the MAC mode (see :func:`paper_precision`).
    kind : str
        ``"conv"`` or ``"fc"``.
    dims : dict
        conv: ``in_channels, out_channels, kernel, in_h, in_w, out_h, out_w, stride, batch``
        (and optionally ``groups``); fc: ``inputs, outputs, batch``. ``in_h``/``in_w`` are the
        unpadded input; padding is implied by the output size.
    pass_name : str
        ``"ff"``, ``"bp"`` or ``"up"``.

    Returns
    -------
    PassTime
    """
    if not isinstance(config, ModuleConfig):
        raise ParameterError(f"parameter 'config' = {config!r} is invalid; allowed: a ModuleConfig")
    _check_choice("kind", kind, KINDS)
    _check_choice("pass_name", pass_name, PASSES)
    _check_dims(kind, dims)
    steps, repeats, names_key, mapping, lane_factor, tap_factor, macs = _mapping(config, kind, dims, pass_name)
    names = _NAMES[names_key]
    body, stream_losses, last_out = _run(config, steps, repeats, names)
    first = next(step for step in steps if step.count > 0)
    fill, drain = _fill_and_drain(config, first, last_out)
    cycles = fill + body + drain
    compute = repeats * sum(step.count * step.compute for step in steps)
    ideal = macs / config.peak_macs_per_cycle
    lane_loss = ideal * (lane_factor - 1)
    tap_loss = ideal * lane_factor * (tap_factor - 1)
    lane_name = ("lane padding (columns not a multiple of k)" if pass_name == "up"
                 else "lane padding (batch not a multiple of k)")
    losses_cycles = {"compute at peak": ideal, lane_name: lane_loss,
                     "stride-phase padding (taps of the longest phase)": tap_loss,
                     "PE load imbalance and partial blocks": compute - ideal - lane_loss - tap_loss,
                     **stream_losses, "pipeline fill": fill, "write-back tail": drain}
    to_s = 1.0 / config.clock_hz
    seconds = cycles * to_s
    ded = config.dedicated_words_per_cycle
    stream = {"dedicated vault": repeats * sum(s.count * (s.dedicated_in + s.dedicated_out) for s in steps) / ded,
              "common path": repeats * sum(s.count * (s.broadcast + s.merge) for s in steps)
              / config.common_words_per_cycle}
    bound = max(stream, key=stream.get)
    if stream[bound] <= compute:
        bound = "compute"
    traffic = {name: repeats * sum(s.count * getattr(s, attr) for s in steps)
               for name, attr in (("dedicated_read", "dedicated_in"), ("dedicated_write", "dedicated_out"),
                                  ("broadcast", "broadcast"), ("merge", "merge"))}
    return PassTime(kind=kind, pass_name=pass_name, wide=config.wide, seconds=seconds, cycles=cycles, macs=macs,
                    ops=2 * macs, tops=2 * macs / seconds / 1e12,
                    compute_seconds=compute * to_s, peak_tops=config.peak_ops / 1e12, bound=bound,
                    losses={name: value * to_s for name, value in losses_cycles.items()}, traffic=traffic,
                    mapping={**mapping, "repeats": repeats})
