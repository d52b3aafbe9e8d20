"""Integration test of ``nt_system``: compiled layers on the vaults, their PMAGs, the bus and the PEs.

For every layer the host writes the compiled vault images (the common vault and each PE's
vault), sets the system's ``config``, and queues the compiled programs: per vault its read
and write PMAG programs, per PE its pass words. After the last write the host reads every
vault back. Each vault must equal the golden model's final image
(``golden/neurotrainer/integration.py``: the compiler's streams, the PE golden model, the PE
state carried from layer to layer, so SR-LO's LFSR too), and the output tensor must equal
numpy (integer layers; SR layers: the golden model only).

Integer layers with ``frac_bits = F > 0``: one operand holds integer values in Q.F
(``v << F``), the other plain integers, so every 32-bit MAC is exact and the raw result is
numpy's integer result; 16-bit layers use ``frac_bits16 = 0``.
"""
import cocotb
import numpy as np
from cocotb.triggers import ReadOnly, RisingEdge

from trainforge.sim.neurotrainer.integration_layers import (compile_for_system, layer_config, run_layers,
                                                           vault_programs)
from trainforge.sim.neurotrainer import executor
from trainforge.sim.neurotrainer.program import ProgramError, pmag_rtl_payload

from trainforge.cocotb_streams import StreamSink, StreamSource, pack
from tbutil import start

KINDS = ("conv_ff", "conv_bp", "conv_up", "fc_ff", "fc_bp", "fc_up", "maxpool")


class Harness:
    def __init__(self, bench):
        dut, cycle, rng = bench.dut, bench.cycle, bench.rng
        self.bench = bench
        self.component = component = bench.component
        vaults = component.pes + 1
        self.host = [StreamSource(dut, f"i_host__{v}", cycle, rng) for v in range(vaults)]
        self.host_data = [StreamSink(dut, f"o_host_data__{v}", cycle, rng) for v in range(vaults)]
        self.read_program = [StreamSource(dut, f"i_read_program__{v}", cycle, rng) for v in range(vaults)]
        self.write_program = [StreamSource(dut, f"i_write_program__{v}", cycle, rng) for v in range(vaults)]
        self.pe_program = [StreamSource(dut, f"i_pe_program__{pe}", cycle, rng) for pe in range(component.pes)]
        self.history = []                    # (layer, inputs) run since the last reset
        dut.config.value = 0

    def sources(self):
        return (*self.host, *self.read_program, *self.write_program, *self.pe_program)

    def pending(self):
        """Names of the sources with words still queued (for timeout messages)."""
        names = [f"host {v}" for v in range(len(self.host))] + [f"read programs {v}" for v in range(len(self.host))] \
            + [f"write programs {v}" for v in range(len(self.host))] + [f"PE {pe} passes" for pe in
                                                                       range(len(self.pe_program))]
        return ", ".join(f"{name} ({len(source.queue) + (source._offered is not None)})"
                         for name, source in zip(names, self.sources()) if not source.idle)

    def backpressure(self, valid_probability, ready_probability):
        for source in self.sources():
            source.valid_probability = valid_probability
        for sink in self.host_data:
            sink.ready_probability = ready_probability

    def drop(self):
        for source in self.sources():
            source.drop()
        self.history = []


async def host_write(harness, images, label):
    layout = harness.component.host_layout
    for vault, words in images.items():
        harness.host[vault].send([pack(layout, {"address": address, "write": 1, "data": int(word) & 0xFFFFFFFF})
                                  for address, word in enumerate(words)])
    longest = max(len(words) for words in images.values())
    await harness.bench.wait_until(lambda: all(source.idle for source in harness.host), 20 * longest + 100,
                                   f"host writes ({label})")


async def host_read(harness, sizes, label):
    layout = harness.component.host_layout
    before = {vault: len(harness.host_data[vault].received) for vault in sizes}
    for vault, count in sizes.items():
        harness.host[vault].send([pack(layout, {"address": address, "write": 0, "data": 0})
                                  for address in range(count)])
    await harness.bench.wait_until(
        lambda: all(len(harness.host_data[vault].received) >= before[vault] + count for vault, count in sizes.items()),
        30 * max(sizes.values()) + 200, f"host read-back ({label})")
    return {vault: np.array([payload for _, payload in harness.host_data[vault].received[before[vault]:
                                                                                      before[vault] + count]],
                            dtype=np.int64) for vault, count in sizes.items()}


def queue_layer(harness, layer):
    """Set ``config`` and queue every PMAG program and PE pass word of a compiled layer."""
    component = harness.component
    harness.bench.dut.config.value = pack(component.config_layout, layer_config(layer))
    reads, writes = vault_programs(layer, component.pes)
    layout = component.pmag_program_layout
    for vault in reads:
        harness.read_program[vault].send([pmag_rtl_payload(program, layout) for program in reads[vault]])
        harness.write_program[vault].send([pmag_rtl_payload(program, layout) for program in writes[vault]])
    for job in layer.pe_jobs:
        harness.pe_program[job.pe].send([int(word) for word in job.passes])


async def run_layer(harness, layer, inputs, label, reference=None, check=None):
    """Run one layer; compare every vault word with the golden model and the output with ``reference``.

    Returns the golden model's result of this layer (``output``, ``vaults``, ``final``).
    """
    bench = harness.bench
    harness.history.append((layer, inputs))
    expected = run_layers([h[0] for h in harness.history], [h[1] for h in harness.history], **bench.params)[-1]
    for vault, words in expected["vaults"].items():
        limit = bench.params["vault_depth"] if vault == 0 else bench.params["pe_vault_depth"]
        assert words.size <= limit, f"{label}: vault {vault} needs {words.size} words {bench.where()}"
    await host_write(harness, expected["vaults"], label)
    queue_layer(harness, layer)
    work = sum(len(job.passes) * 300 for job in layer.pe_jobs) + 20 * sum(layer.vault_words.values()) + 2000
    for _ in range(work):
        if all(source.idle for source in harness.sources()):
            break
        await RisingEdge(bench.dut.clk)
    assert all(source.idle for source in harness.sources()), \
        f"{label} {layer.dims}: timed out after {work} cycles; not taken yet: {harness.pending()} {bench.where()}"
    for _ in range(2):
        await RisingEdge(bench.dut.clk)
    await bench.wait_until(lambda: bench.dut.idle.value == 1, work, f"the last write ({label})")
    final = await host_read(harness, {vault: words.size for vault, words in expected["vaults"].items()}, label)
    for vault, words in final.items():
        want = expected["final"][vault]
        bad = np.flatnonzero(words != want)
        assert bad.size == 0, (f"{label}: vault {vault} word {bad[0]} expected {int(want[bad[0]]):#x}, got "
                               f"{int(words[bad[0]]):#x} ({bad.size} mismatches) {bench.where()}")
    got = executor.unload(layer, {vault - 1: words for vault, words in final.items()})
    if reference is not None:
        bad = np.argwhere(got != reference)
        assert bad.size == 0, (f"{label}: output {tuple(bad[0])} expected {reference[tuple(bad[0])]}, got "
                               f"{got[tuple(bad[0])]} ({len(bad)} mismatches) {bench.where()}")
    if check is not None:
        check(got)
    bench.dut._log.info("%s: %s %s on %d PEs x %d lanes (%d merged result blocks per PE): every vault word and "
                        "the output as expected", label, layer.kind, layer.dims, bench.component.pes,
                        bench.component.lanes, result_blocks(layer))
    return expected


# ----------------------------------------------------------------------------------------------
# Layers, their inputs and numpy references

def _conv(x, w):
    """Valid correlation: y[n, o] = sum_d sum_ij x[n, d, i.., j..] w[o, d, i, j]."""
    _, _, hk, wk = w.shape
    out_h, out_w = x.shape[2] - hk + 1, x.shape[3] - wk + 1
    y = np.zeros((x.shape[0], w.shape[0], out_h, out_w), dtype=np.int64)
    for i in range(hk):
        for j in range(wk):
            y += np.einsum("ndhw,od->nohw", x[:, :, i:i + out_h, j:j + out_w], w[:, :, i, j])
    return y


def make_inputs(kind, dims, generator, frac_bits, values=None):
    """Integer inputs of a layer and the numpy reference of its output (None for SR layers' reference)."""
    def draw(shape, low, high):
        return generator.integers(low, high, size=shape) if values is None else np.full(shape, values, dtype=np.int64)

    if kind == "conv_ff":
        n, d, h, w, o, hk, wk = (dims[k] for k in ("n", "d", "h", "w", "o", "hk", "wk"))
        x, kernel = draw((n, d, h, w), -30, 30), draw((o, d, hk, wk), -30, 30)
        return {"x": x, "w": kernel}, _conv(x, kernel)
    if kind == "conv_bp":
        n, d, h, w, o, hk, wk = (dims[k] for k in ("n", "d", "h", "w", "o", "hk", "wk"))
        dy, kernel = draw((n, o, h - hk + 1, w - wk + 1), -1000, 1000), draw((o, d, hk, wk), -1000, 1000)
        dx = np.zeros((n, d, h, w), dtype=np.int64)
        for i in range(hk):
            for j in range(wk):
                dx[:, :, i:i + dy.shape[2], j:j + dy.shape[3]] += np.einsum("nohw,od->ndhw", dy, kernel[:, :, i, j])
        padded = np.pad(dy, ((0, 0), (0, 0), (hk - 1, hk - 1), (wk - 1, wk - 1)))
        return {"dy_padded": padded << frac_bits, "w": kernel}, dx
    if kind == "conv_up":
        n, d, h, w, o, hk, wk = (dims[k] for k in ("n", "d", "h", "w", "o", "hk", "wk"))
        x, dy = draw((n, d, h, w), -1000, 1000), draw((n, o, h - hk + 1, w - wk + 1), -1000, 1000)
        return {"x": x << frac_bits, "dy": dy}, _conv(x.transpose(1, 0, 2, 3), dy.transpose(1, 0, 2, 3)).transpose(1, 0, 2, 3)
    if kind == "fc_ff":
        # 16-bit: |sum| <= 48 * 25 * 25 = 30000 does not saturate.
        weights, x = draw((dims["h"], dims["k"]), -25, 26), draw((dims["k"], dims["n"]), -25, 26)
        return {"w": weights, "x": x}, weights @ x
    if kind == "fc_bp":
        weights, dy = draw((dims["h"], dims["k"]), -1000, 1000), draw((dims["h"], dims["n"]), -1000, 1000)
        return {"w": weights, "dy": dy << frac_bits}, weights.T @ dy
    if kind == "fc_up":
        dy, x = draw((dims["h"], dims["n"]), -1000, 1000), draw((dims["k"], dims["n"]), -1000, 1000)
        return {"dy": dy, "x": x << frac_bits}, dy @ x.T
    n, c, h, w, r = (dims[k] for k in ("n", "c", "h", "w", "r"))
    x = draw((n, c, h, w), -4, 4) if values is None else np.full((n, c, h, w), values, dtype=np.int64)
    return {"x": x}, None


def maxpool_check(x, r, label, where):
    """The system's max-pooling words must hold numpy's max and first argmax of every window."""
    n, c, h, w = x.shape
    windows = x.reshape(n, c, h // r, r, w // r, r).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, h // r, w // r, r * r)

    def check(got):
        value, index = executor.maxpool_decode(got)
        assert np.array_equal(value, windows.max(-1)), \
            f"{label}: max expected {windows.max(-1).ravel()}, got {value.ravel()} {where}"
        assert np.array_equal(index, windows.argmax(-1)), \
            f"{label}: argmax expected {windows.argmax(-1).ravel()}, got {index.ravel()} {where}"
    return check


#: The layer kinds whose results the bus merges into the common vault.
MERGED = ("conv_up", "fc_ff", "fc_bp")


def result_blocks(layer):
    """Result blocks (merged write programs) per PE of a merged layer, else 0."""
    job = layer.pe_jobs[0]
    return len(job.out.programs) if job.out.vault == -1 else 0


def random_dims(kind, generator, bench, several=False):
    """Random dimensions that compile for the system and fit its vaults; with ``several``, a merged
    kind gets at least two result blocks per PE (row bands, sample groups, channel groups or channels)."""
    pes, lanes = bench.component.pes, bench.component.lanes
    for _ in range(500):
        pick = lambda low, high: int(generator.integers(low, high + 1))  # noqa: E731
        if kind in ("conv_ff", "conv_bp", "conv_up"):
            hk, wk = pick(1, 3), pick(1, 3)
            up = kind == "conv_up"
            dims = dict(n=pick(1, 2 if up else 2 * lanes * pes), d=pick(1, 2 * pes if up else 3),
                        h=hk + pick(0, 2), w=wk + pick(0, 2), o=pick(1, 2 * lanes if up else 3), hk=hk, wk=wk)
        elif kind in ("fc_ff", "fc_bp"):
            elements = lanes * (2 if kind == "fc_ff" else 1)
            dims = dict(h=pick(1, 4 * pes), k=pick(1, 4 * pes), n=pick(1, 2 * elements))
            dims["k" if kind == "fc_ff" else "h"] = pick(1, 48)
        elif kind == "fc_up":
            dims = dict(h=pick(1, 8), k=pick(1, 6), n=pick(1, 4))
        else:
            r = pick(1, 2)
            dims = dict(n=pick(1, 2 * lanes * pes), c=pick(1, 2), h=r * pick(1, 3), w=r * pick(1, 3), r=r)
        try:
            layer = compile_for_system(kind, dims, **bench.params)
            layer_config(layer)
        except (ProgramError, ValueError):
            continue
        if several and kind in MERGED and result_blocks(layer) < 2:
            continue
        if layer.vault_words[-1] <= bench.params["vault_depth"] and \
                max(layer.vault_words[pe] for pe in range(pes)) <= bench.params["pe_vault_depth"]:
            return dims
    raise AssertionError(f"no {kind} dimensions fit {bench.where()}")


async def run_kind(harness, kind, generator, label, dims=None, values=None, several=False):
    bench = harness.bench
    dims = dims or random_dims(kind, generator, bench, several)
    layer = compile_for_system(kind, dims, **bench.params)
    inputs, reference = make_inputs(kind, dims, generator, bench.params["frac_bits"], values)
    check = maxpool_check(inputs["x"], dims["r"], label, bench.where()) if kind == "maxpool" else None
    return await run_layer(harness, layer, inputs, f"{label} {kind}", reference, check)


# ----------------------------------------------------------------------------------------------
# Tests

@cocotb.test()
async def every_kind_with_backpressure(dut):
    """All seven layer kinds back to back, random dimensions and data, random valid gaps and host ready;
    the merged kinds (FC FF/BP, conv UP) with several result blocks per PE."""
    bench = await start(dut)
    harness = Harness(bench)
    harness.backpressure(valid_probability=0.6, ready_probability=0.5)
    generator = np.random.default_rng(bench.seed)
    for kind in KINDS:
        await run_kind(harness, kind, generator, "backpressure", several=True)


@cocotb.test()
async def corners_without_backpressure(dut):
    """Full rate: multi-block reductions, all zeros, extreme values, max-pooling ties and the most negative value."""
    bench = await start(dut)
    harness = Harness(bench)
    harness.backpressure(valid_probability=1.0, ready_probability=1.0)
    generator = np.random.default_rng(bench.seed + 1)
    pes, lanes = bench.component.pes, bench.component.lanes
    # FC FF/BP whose reduction spans two BUF2 blocks (accumulate passes), one result block per PE.
    await run_kind(harness, "fc_ff", generator, "two reduction blocks", dims=dict(h=pes, k=40, n=2 * lanes))
    await run_kind(harness, "fc_bp", generator, "two reduction blocks", dims=dict(h=40, k=pes, n=lanes))
    await run_kind(harness, "conv_ff", generator, "all zeros", dims=dict(n=3, d=2, h=3, w=4, o=2, hk=2, wk=3),
                   values=0)
    # 16-bit extremes: 18 products of -128 * -128 = 294912 would overflow; 2 products of 127 * 127 do not.
    await run_kind(harness, "conv_ff", generator, "16-bit extremes", dims=dict(n=4, d=1, h=2, w=3, o=1, hk=1, wk=2),
                   values=127)
    await run_kind(harness, "maxpool", generator, "all ties", dims=dict(n=lanes, c=1, h=4, w=2, r=2), values=5)
    await run_kind(harness, "maxpool", generator, "most negative", dims=dict(n=2, c=1, h=2, w=2, r=2),
                   values=-32768)
    await run_kind(harness, "conv_bp", generator, "W^T 3x3", dims=dict(n=2, d=2, h=3, w=3, o=3, hk=3, wk=3))
    await maxpool_with_pad_reads(harness, generator)


@cocotb.test()
async def several_result_blocks_per_pe(dut):
    """Merged layers with several result blocks per PE under backpressure: FC FF with sample groups x row
    bands, FC BP with row bands and a two-block reduction, conv UP with output-channel groups x input
    channels; each PE's blocks are merged in turn (PE 0, 1, ...) while the broadcast keeps flowing."""
    bench = await start(dut)
    harness = Harness(bench)
    harness.backpressure(valid_probability=0.5, ready_probability=0.5)
    generator = np.random.default_rng(bench.seed + 4)
    pes, lanes = bench.component.pes, bench.component.lanes
    for kind, dims in (("fc_ff", dict(h=4 * pes, k=24, n=2 * lanes + 1)),
                       ("fc_bp", dict(h=40, k=3 * pes, n=2 * lanes)),
                       ("conv_up", dict(n=1, d=2 * pes, h=3, w=3, o=2 * lanes, hk=2, wk=2))):
        layer = compile_for_system(kind, dims, **bench.params)
        assert result_blocks(layer) >= 4, f"{kind} {dims}: {result_blocks(layer)} result blocks per PE {bench.where()}"
        await run_kind(harness, kind, generator, "several blocks", dims=dims)


async def maxpool_with_pad_reads(harness, generator):
    """Read pad requests: the max-pooling window streams get Table 3's pad window on the window row
    (``hk``, PMAG counter r3) ``1 <= hk < 2`` inverted, so every second image row arrives as zeros."""
    bench = harness.bench
    dims = dict(n=2 * bench.component.lanes, c=2, h=4, w=4, r=2)
    layer = compile_for_system("maxpool", dims, **bench.params)
    for job in layer.pe_jobs:
        for program in job.in2.programs:
            program.update(window=2, h=3, h_lo=0, h_hi=1, k=0, k_lo=0, k_hi=1)   # outside hk < 1: pad
    inputs, _ = make_inputs("maxpool", dims, generator, bench.params["frac_bits"])
    seen = inputs["x"].copy()
    seen[:, :, 1::2, :] = 0
    await run_layer(harness, layer, inputs, "pad reads maxpool", check=maxpool_check(seen, 2, "pad reads",
                                                                                         bench.where()))


@cocotb.test()
async def stochastic_rounding(dut):
    """SR-LO layers back to back: bit-exact against the golden model with the LFSR state carried over."""
    bench = await start(dut)
    harness = Harness(bench)
    harness.backpressure(valid_probability=0.7, ready_probability=0.6)
    generator = np.random.default_rng(bench.seed + 2)
    frac = bench.params["frac_bits"]
    assert bench.params["rounding"] == "sr_lo" and frac > 0, f"SR test needs sr_lo and frac_bits > 0 {bench.where()}"
    previous = []
    for kind, dims in (("fc_ff", dict(h=bench.component.pes, k=20, n=bench.component.lanes)),
                       ("conv_up", dict(n=2, d=2 * bench.component.pes, h=4, w=4, o=bench.component.lanes, hk=2,
                                        wk=2)),
                       ("fc_up", dict(h=4, k=4, n=3))):
        layer = compile_for_system(kind, dims, sr=True, bits=32, **bench.params)
        names = layer.inputs
        inputs = {name: generator.integers(-(1 << (frac + 4)), 1 << (frac + 4), size=layer.tensors[name][0])
                  for name in names}
        expected = await run_layer(harness, layer, inputs, f"SR-LO {kind}")
        truncated = executor.execute(compile_for_system(kind, dims, sr=False, bits=32, **bench.params), inputs)
        assert not np.array_equal(expected["output"], truncated["output"]), \
            f"SR-LO {kind}: the SR result equals truncation, the test would not see SR {bench.where()}"
        if previous:
            fresh = executor.execute(layer, inputs)["output"]
            assert not np.array_equal(expected["output"], fresh), \
                f"SR-LO {kind}: the carried LFSR state makes no difference, the test would not see it {bench.where()}"
        previous.append(kind)


@cocotb.test()
async def reset_mid_layer(dut):
    """A reset in the middle of a layer; the layers after it (a fresh LFSR state) are still exact."""
    bench = await start(dut)
    harness = Harness(bench)
    harness.backpressure(valid_probability=0.7, ready_probability=0.5)
    generator = np.random.default_rng(bench.seed + 3)
    kind = KINDS[bench.rng.randrange(len(KINDS))]
    dims = random_dims(kind, generator, bench)
    layer = compile_for_system(kind, dims, **bench.params)
    inputs, _ = make_inputs(kind, dims, generator, bench.params["frac_bits"])
    expected = run_layers([layer], [inputs], **bench.params)[0]
    await host_write(harness, expected["vaults"], "before reset")
    queue_layer(harness, layer)
    for _ in range(bench.rng.randrange(10, 200)):
        await RisingEdge(dut.clk)
    harness.drop()
    await bench.reset(cycles=2)
    await RisingEdge(dut.clk)
    await ReadOnly()
    assert dut.idle.value == 1, f"system not idle after a reset in the middle of {kind} {bench.where()}"
    await RisingEdge(dut.clk)
    await run_kind(harness, "fc_bp", generator, "after reset")
    await run_kind(harness, kind, generator, "after reset")
