"""Scenario table of ``cp_pe``: a hand-worked sequence, random controls, zeros and the most negative operands.

The PE has no streams (the core's sequencer drives its controls every cycle),
so a scenario's stimulus is the local memory image (``"memory"``, written
before the sequence) and the controls of each *enabled* cycle
(``"controls"``: dicts of ``rd_en``, ``rd_addr``, ``mac_op``, ``mac_clear``, ``handoff``,
``red_add``, ``row_bus``, ``col_bus``, ``red_in``); ``valid["en"]`` is the
per-cycle pattern of ``en`` (a low cycle changes nothing). The expected
transactions are the accumulator (``"acc"``) and the reduction register
(``"red"``) after each enabled cycle.

Reference (independent of the vectorised golden model): the PE written out
cycle by cycle on Python ints, its pipeline registers named. In enabled cycle
``t`` with ``rd_en`` the SRAM reads ``rd_addr`` (without it the read port keeps its last word); the
word enters the SRAM output register in ``t + 1`` and is ``mem_data`` in ``t + 2`` (zero before, the register's reset
value; no MAC takes ``mem_data`` in the first two cycles). The operand stage
of cycle ``t`` takes its bus operands (the bus's low ``width`` bits,
sign-extended) and ``mem_data`` into the multiplier's input registers with
``mac_clear`` and ``handoff``; the product is registered in ``t + 1``; in
``t + 2`` the MAC adds it to the accumulator (or to zero with ``mac_clear``),
wrapping to ``acc_width`` bits, and ``handoff`` copies that sum into ``red``;
``red_add`` of cycle ``t`` adds ``red_in`` to ``red`` (wrapping) unless a
handoff lands in ``t``.
"""
from trainforge.golden.caterpillar.pe import cp_pe
from trainforge.spec.caterpillar import MacOp

from scenario import Scenario, Transactions, random_pattern, rng_for

CONTROL_NAMES = ("rd_en", "rd_addr", "mac_op", "mac_clear", "handoff", "red_add", "row_bus", "col_bus", "red_in")


def _signed(value, bits):
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def reference(memory, controls, *, width, acc_width, **_):
    """``(acc, red)`` after each enabled cycle, computed one cycle at a time."""
    acc = red = 0
    read = output_register = 0  # the SRAM read port's word and the SRAM output register
    operands = None  # (MAC?, clear, handoff, multiplicand, multiplier): the multiplier's input registers
    multiplied = None  # (MAC?, clear, handoff, product): its output register
    accs, reds = [], []
    for control in controls:
        # accumulate stage
        landing = False
        new_acc, new_red = acc, red
        if multiplied is not None:
            mac, clear, landing, product = multiplied
            total = _signed((0 if clear else acc) + product, acc_width)
            if mac:
                new_acc = total
            if landing:
                new_red = total
        if not landing and control["red_add"]:
            new_red = _signed(red + control["red_in"], acc_width)
        # multiply stage
        if operands is not None:
            mac, clear, handoff, first, second = operands
            multiplied = (mac, clear, handoff, first * second)
        # operand stage
        op = control["mac_op"]
        row, col = _signed(control["row_bus"], width), _signed(control["col_bus"], width)
        first = row if op in (MacOp.ROW_MEM, MacOp.ROW_COL) else col
        second = col if op == MacOp.ROW_COL else output_register
        operands = (op != MacOp.NONE, control["mac_clear"], control["handoff"], first, second)
        # SRAM output register and read
        output_register, read = read, memory[control["rd_addr"]] if control["rd_en"] else read
        acc, red = new_acc, new_red
        accs.append(acc)
        reds.append(red)
    return accs, reds


def _control(rd_addr=0, mac_op=MacOp.NONE, mac_clear=0, handoff=0, red_add=0, row_bus=0, col_bus=0, red_in=0,
             rd_en=1):
    return {"rd_en": rd_en, "rd_addr": rd_addr, "mac_op": int(mac_op), "mac_clear": mac_clear, "handoff": handoff,
            "red_add": red_add, "row_bus": row_bus, "col_bus": col_bus, "red_in": red_in}


def _random_controls(rng, params, depth, cycles, bus=None):
    """Random controls as the core issues them: no MAC in the first two cycles (no word read yet), a handoff only
    with a MAC; the read skipped a quarter of the time (the MAC then takes the last word read)."""
    half = 1 << (params["acc_width"] - 1)
    controls = []
    for index in range(cycles):
        op = MacOp.NONE if index < 2 else rng.randrange(4)
        controls.append(_control(
            rd_en=int(index < 2 or rng.random() < 0.75), rd_addr=rng.randrange(depth), mac_op=op,
            mac_clear=int(rng.random() < 0.2),
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
    # Hand-worked: memory [3, -2, 5, 7]; the MAC of cycle t lands in cycle t + 2 and takes the word read in
    # t - 2. acc: 3*4 = 12 (cycle 4), 12 + (-5)(-2) = 22, 22 + 2*5 = 32 (handed off in cycle 6, which beats
    # that cycle's red_add), 6*(-3) = -18 after a clear. red: 100 (red_add, cycle 5), 32 (handoff), 32 + 100,
    # 132 - 32.
    memory = [3, -2, 5, 7]  # needs sram_depth >= 4
    controls = [
        _control(rd_addr=0),
        _control(rd_addr=1),
        _control(rd_addr=2, mac_op=MacOp.ROW_MEM, mac_clear=1, row_bus=4),
        _control(rd_addr=3, mac_op=MacOp.ROW_MEM, row_bus=-5),
        _control(rd_addr=0, mac_op=MacOp.COL_MEM, col_bus=2, handoff=1),
        _control(mac_op=MacOp.ROW_COL, mac_clear=1, row_bus=6, col_bus=-3, red_add=1, red_in=100),
        _control(red_add=1, red_in=7),
        _control(red_add=1, red_in=100),
        _control(red_add=1, red_in=-32),
    ]
    worked = Scenario("hand-worked sequence", {"memory": memory, "controls": controls},
                      {"acc": [0, 0, 0, 0, 12, 22, 32, -18, -18], "red": [0, 0, 0, 0, 0, 100, 32, 132, 100]},
                      valid={"en": (1, 1, 0)})
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
