"""Scenario table of ``cp_pe``: a hand-worked sequence, random controls, zeros and the most negative operands.

The PE has no streams (the core's sequencer drives its controls every cycle),
so a scenario's stimulus is the local memory image (``"memory"``, written
before the sequence) and the controls of each *enabled* cycle
(``"controls"``: dicts of ``rd_addr``, ``mac_op``, ``mac_clear``, ``handoff``,
``red_add``, ``row_bus``, ``col_bus``, ``red_in``); ``valid["en"]`` is the
per-cycle pattern of ``en`` (a low cycle changes nothing). The expected
transactions are the accumulator (``"acc"``) and the reduction register
(``"red"``) after each enabled cycle.

Reference (independent of the vectorised golden model): the PE written out
cycle by cycle on Python ints. The execute stage of enabled cycle ``t`` uses
the word read at ``rd_addr`` of enabled cycle ``t - 1`` (zero at ``t = 0``);
a bus operand is the bus's low ``width`` bits, sign-extended; a MAC adds the
product to the accumulator (or to zero with ``mac_clear``), wrapping to
``acc_width`` bits; ``handoff`` copies the new sum into ``red``, otherwise
``red_add`` adds ``red_in`` to ``red`` (wrapping).
"""
from trainforge.golden.caterpillar.pe import cp_pe
from trainforge.spec.caterpillar import MacOp

from scenario import Scenario, Transactions, random_pattern, rng_for

CONTROL_NAMES = ("rd_addr", "mac_op", "mac_clear", "handoff", "red_add", "row_bus", "col_bus", "red_in")


def _signed(value, bits):
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def reference(memory, controls, *, width, acc_width, **_):
    """``(acc, red)`` after each enabled cycle, computed one cycle at a time."""
    acc = red = 0
    read = 0
    accs, reds = [], []
    for control in controls:
        op = control["mac_op"]
        row, col = _signed(control["row_bus"], width), _signed(control["col_bus"], width)
        first = row if op in (MacOp.ROW_MEM, MacOp.ROW_COL) else col
        second = col if op == MacOp.ROW_COL else read
        result = _signed((0 if control["mac_clear"] else acc) + first * second, acc_width)
        if op != MacOp.NONE:
            acc = result
        if control["handoff"]:
            red = result
        elif control["red_add"]:
            red = _signed(red + control["red_in"], acc_width)
        read = memory[control["rd_addr"]]
        accs.append(acc)
        reds.append(red)
    return accs, reds


def _control(rd_addr=0, mac_op=MacOp.NONE, mac_clear=0, handoff=0, red_add=0, row_bus=0, col_bus=0, red_in=0):
    return {"rd_addr": rd_addr, "mac_op": int(mac_op), "mac_clear": mac_clear, "handoff": handoff,
            "red_add": red_add, "row_bus": row_bus, "col_bus": col_bus, "red_in": red_in}


def _random_controls(rng, params, depth, cycles, bus=None):
    """Random controls as the core issues them: no MAC in the first cycle, a handoff only with a MAC."""
    half = 1 << (params["acc_width"] - 1)
    controls = []
    for index in range(cycles):
        op = MacOp.NONE if index == 0 else rng.randrange(4)
        controls.append(_control(
            rd_addr=rng.randrange(depth), mac_op=op, mac_clear=int(rng.random() < 0.2),
            handoff=int(op != MacOp.NONE and rng.random() < 0.15), red_add=int(rng.random() < 0.4),
            row_bus=rng.randrange(-half, half) if bus is None else bus,
            col_bus=rng.randrange(-half, half) if bus is None else bus,
            red_in=rng.randrange(-half, half) if bus is None else bus))
    return controls


def _scenario(name, params, memory, controls, en=(1,)):
    accs, reds = reference(memory, controls, **params)
    return Scenario(name, {"memory": list(memory), "controls": controls}, {"acc": accs, "red": reds},
                    valid={"en": tuple(en)})


def scenarios(params, seed):
    width = params["width"]
    depth = min(params["sram_depth"], 64)
    half = 1 << (width - 1)
    table = []
    # Hand-worked: memory [3, -2, 5, 7]; acc 0, 3*4, 12 + (-2)(-5), 22 + 5*2 (handed off), 6*(-3) after a
    # clear (red 32 + 100), then red 132 - 32.
    memory = [3, -2, 5, 7]  # needs sram_depth >= 4
    controls = [
        _control(rd_addr=0),
        _control(rd_addr=1, mac_op=MacOp.ROW_MEM, mac_clear=1, row_bus=4),
        _control(rd_addr=2, mac_op=MacOp.ROW_MEM, row_bus=-5),
        _control(rd_addr=3, mac_op=MacOp.COL_MEM, col_bus=2, handoff=1),
        _control(rd_addr=0, mac_op=MacOp.ROW_COL, mac_clear=1, row_bus=6, col_bus=-3, red_add=1, red_in=100),
        _control(red_add=1, red_in=-32),
    ]
    worked = Scenario("hand-worked sequence", {"memory": memory, "controls": controls},
                      {"acc": [0, 12, 22, 32, -18, -18], "red": [0, 0, 0, 32, 132, 100]}, valid={"en": (1, 1, 0)})
    if width >= 4 and params["acc_width"] >= 9 and params["sram_depth"] >= 4:  # its operands and sums fit
        table.append(worked)
    rng = rng_for(seed, "cp_pe", "random")
    memory = [rng.randrange(-half, half) for _ in range(depth)]
    table.append(_scenario("random controls, en low a third of the time", params, memory,
                           _random_controls(rng, params, depth, 300), random_pattern(rng, 0.67)))
    rng = rng_for(seed, "cp_pe", "zeros")
    small = min(16, params["sram_depth"])
    table.append(_scenario("all-zero operands", params, [0] * small,
                           _random_controls(rng, params, small, 80, bus=0)))
    rng = rng_for(seed, "cp_pe", "most negative")
    controls = _random_controls(rng, params, small, 150)
    for control in controls:
        control.update(mac_clear=0, row_bus=-half, col_bus=-half, red_in=-(1 << (params["acc_width"] - 1)))
    table.append(_scenario("most negative operands (products and sums wrap)", params, [-half] * small, controls,
                           random_pattern(rng, 0.9)))
    return table


def golden(params, scenario):
    controls = scenario.stimulus["controls"]
    columns = {name: [control[name] for control in controls] for name in CONTROL_NAMES}
    acc, red, _ = cp_pe(scenario.stimulus["memory"], **columns, **params)
    return Transactions({"acc": [int(value) for value in acc], "red": [int(value) for value in red]})
