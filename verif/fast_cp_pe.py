"""The fast random regression of ``cp_pe``: its scenario table flattened into per-cycle vectors (:mod:`trainforge.vector_bench`).

The PE has no streams: the core's sequencer drives ``en``, the SRAM write
port and the MAC controls every cycle. A transaction is one *enabled cycle*:
its control word in (an input beat) and the accumulator and reduction
register after it, checked (an output beat). The cycles follow the cocotb
testbench (``verif/tb_cp_pe.py``, ``drive_scenario``) exactly:

1. ``rst`` for two edges before every scenario (``run_regression``'s reset);
2. with a reset mid-stream (:func:`regression_common.reset_after`, the same
   draw as the cocotb path): that many cycles of the scenario's traffic,
   unchecked, the first idle (the cocotb harness starts its traffic one
   falling edge after the reset) and idle ones after it when it is shorter,
   then ``rst`` for two edges;
3. one cycle per memory word (``wr_en``, ``en`` low), one cycle with
   ``wr_en`` low;
4. each control word driven until the scenario's ``en`` pattern (repeated,
   counted from the first control cycle) enables a cycle; ``acc`` and
   ``red`` after that cycle are compared with the table's reference (its
   ``expected``, as ``scenario_table`` compares them);
5. one cycle with ``en`` low.

Unlike the cocotb drivers, the vectors hold every other input at 0 while
``rst`` is high; the PE's registers do not look at them then, and the SRAM is
rewritten (step 3) before any checked read.
"""
from regression_common import reset_after
from trainforge.emit import emit_cached
from trainforge.errors import ParameterError
from trainforge import vector_bench

__all__ = ["BLOCK", "CHECKED", "scenario_vectors", "plan_batches"]

#: The block this planner plays.
BLOCK = "cp_pe"
#: The registered outputs compared after every enabled cycle.
CHECKED = ("acc", "red")
#: Edges with ``rst`` high, before a scenario and at a reset mid-stream (``tbutil.Bench.reset``).
RESET_CYCLES = 2


class _Vectors:
    """Packs vectors of one batch: every input and flag 0 unless given."""

    def __init__(self, layout):
        self.layout = layout
        self.zero = dict.fromkeys(layout.offsets, 0)
        self.masks = {name: (1 << width) - 1 for name, (_, width) in layout.offsets.items()}

    def pack(self, **values):
        fields = dict(self.zero)
        for name, value in values.items():
            fields[name] = int(value) & self.masks[name]
        return self.layout.pack(**fields)


def _traffic(vectors, params, scenario, checked, control_names):
    """The vectors of steps 3 to 5 and, per enabled cycle, its flags: ``transaction``/``check`` or ``before_reset``."""
    width, acc_width = params["width"], params["acc_width"]
    flags = {"transaction": 1, "check": 1} if checked else {"before_reset": 1}
    words = [vectors.pack(wr_en=1, wr_addr=address, wr_data=word & ((1 << width) - 1))
             for address, word in enumerate(scenario.stimulus["memory"])]
    words.append(vectors.pack())
    pattern = scenario.valid.get("en", (1,))
    cycle = 0
    for control in scenario.stimulus["controls"]:
        bits = {name: int(control[name]) & ((1 << acc_width) - 1) for name in control_names}
        while not pattern[cycle % len(pattern)]:
            words.append(vectors.pack(**bits))
            cycle += 1
        words.append(vectors.pack(en=1, **bits, **flags))
        cycle += 1
    words.append(vectors.pack())
    return words


def scenario_vectors(vectors, params, scenario, cycles_before_reset, control_names):
    """Every vector of one scenario (steps 1 to 5), the first marked ``start``; ``control_names`` are the inputs a
    control word sets (``scenarios.cp_pe.CONTROL_NAMES``)."""
    words = [vectors.pack(rst=1, start=1)] + [vectors.pack(rst=1)] * (RESET_CYCLES - 1)
    if cycles_before_reset:
        traffic = _traffic(vectors, params, scenario, False, control_names)
        interrupted = [vectors.pack()] + traffic[:cycles_before_reset - 1]
        interrupted += [vectors.pack()] * (cycles_before_reset - len(interrupted))
        words += interrupted + [vectors.pack(rst=1, reset=1)] + [vectors.pack(rst=1)] * (RESET_CYCLES - 1)
    return words + _traffic(vectors, params, scenario, True, control_names)


def _expected(outputs, scenario):
    """The expected entries of a scenario: the checked outputs after each enabled cycle, packed as the bench reads them."""
    layout = vector_bench.expected_layout(outputs)
    masks = {name: (1 << width) - 1 for name, width in outputs}
    return [layout.pack(**{name: value & masks[name] for name, value in zip(masks, values)})
            for values in zip(*(scenario.expected[name] for name in masks))]


def plan_batches(params, bench, seed, target, replay=None, alter_expected=None, passes=None, table=None):
    """Batches of the PE's table passes until ``target`` transactions are planned; yields ``(plan, vectors, expected)``.

    As :func:`fast_regression.plan_batches`: ``passes`` is :func:`fast_regression._passes` (passed in to keep
    one copy), ``table`` the scenario module (``scenarios.cp_pe``), ``alter_expected(name, entries)`` for the
    tests only (a deliberately wrong expectation; ``name`` is the checked stream's, ``{acc, red}``). A transaction
    is an enabled cycle's control word or its checked outputs (two per enabled cycle).
    """
    vectors = _Vectors(bench.header)
    widths = {port["name"]: port["width"] for port in emit_cached(BLOCK, **params).ports}
    outputs = [(name, widths[name]) for name in CHECKED]
    checked = bench.checked[0]
    planned = 0
    plan, words, expected = [], [], []
    for pass_seed, iteration, index, scenario in passes(table, params, seed, replay):
        if replay is None and planned >= target:
            break
        cycles = reset_after(scenario, pass_seed, index)
        scenario_words = scenario_vectors(vectors, params, scenario, cycles, table.CONTROL_NAMES)
        entries = _expected(outputs, scenario)
        if alter_expected is not None:
            entries = alter_expected(checked, entries)
        if max(len(scenario_words), len(entries)) > bench.depth:
            raise ParameterError(
                f"{BLOCK} scenario {scenario.name!r} (scenario seed {pass_seed}) has {len(scenario_words)} vectors; "
                f"allowed: at most the vector testbench's {bench.depth}")
        if len(words) + len(scenario_words) > bench.depth or len(expected) + len(entries) > bench.depth:
            yield plan, words, expected
            plan, words, expected = [], [], []
        plan.append({"scenario_seed": pass_seed, "pass": iteration, "index": index, "scenario": scenario.name,
                     "reset_after": cycles})
        words += scenario_words
        expected += entries
        planned += 2 * len(scenario.expected[CHECKED[0]])
    if plan:
        yield plan, words, expected
