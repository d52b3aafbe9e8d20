"""Scenario table of ``nt_pe``: random MAC/MAX programs, corners (saturation, W^T, accumulate, MAX ties), backpressure.

A scenario's stimulus is the PE's three input streams: ``i_program`` (decoded program words,
``spec/neurotrainer/pe_program.py``), ``i_in1`` (BUF Input 1 words ``{"data", "last"}``, ``last``
closing a block) and ``i_in2`` (BUF Input 2 rows ``{"data": [lanes words], "last"}``); the
expected items are the ``o_result`` rows ``{"y": [lanes words], "last"}``.

Reference (independent of the golden model, which works on whole passes with numpy): the
pass rules of ``hw/neurotrainer/docs/pe.md`` as plain Python loops, one
step at a time. The fill streams' blocks are taken in order, block ``b`` into half ``b % 2``;
a pass reads the next block of each buffer it uses, ``hold1``/``hold2`` keep it for the next
pass. Step ``s`` of a pass reads BUF1 word ``s`` (or, transposed, ``(s % O) * I + s // O``)
and BUF2 row ``s % C``; output row ``s // C``. A MAC pass turns every output row into MAC
rows of ``scenarios/nt_mac.py``'s reference (its integer arithmetic and random generators,
which run over every MAC row of the scenario, preloads included): a preload row ``a = 1.0,
x = BUF Output[row]`` when ``accumulate``, then one row per step; BUF Output row ``n mod
out_depth`` takes the result. A MAX pass gives, per lane, the largest signed low half-word of
the window and its first position (mod ``2**index_bits``), as ``value | position << 16``.

Every scenario starts from reset. BUF Output is a memory that reset does not clear, so a pass
accumulates only onto rows an earlier MAC pass of the same scenario wrote. Result cycles and
program acceptance cycles without backpressure are the golden cycle model's
(``golden(...).cycles``), which the testbench compares with the RTL.
"""
from trainforge.golden.neurotrainer.pe import nt_pe
from trainforge.spec.neurotrainer.pe_program import OP_MAC, OP_MAX, PE_PROGRAM_LAYOUT

from scenario import Scenario, Transactions, random_pattern, rng_for
from scenarios import nt_mac

_MASK32 = (1 << 32) - 1


def _program_word(fields):
    return PE_PROGRAM_LAYOUT.const(fields).as_value().value


def _blocks(items):
    """The blocks of a fill stream (lists of data), split at ``last``."""
    blocks, block = [], []
    for item in items:
        block.append(item["data"])
        if item["last"]:
            blocks.append(block)
            block = []
    assert not block, "a fill stream ends inside a block"
    return blocks


def _signed16(word):
    word &= 0xFFFF
    return word - 0x10000 if word & 0x8000 else word


def reference(params, stimulus):
    """The ``o_result`` items of a scenario's stimulus."""
    lanes = params["lanes"]
    half1, half2 = params["in1_depth"] // 2, params["in2_depth"] // 2
    blocks1, blocks2 = _blocks(stimulus["i_in1"]), _blocks(stimulus["i_in2"])
    halves1 = [[0] * half1 for _ in range(2)]
    halves2 = [[[0] * lanes for _ in range(half2)] for _ in range(2)]
    out = [[0] * lanes for _ in range(params["out_depth"])]
    mac_rows, mac_results = [], 0     # every MAC row of the scenario so far, for the MAC reference
    block1 = block2 = 0
    results = []
    for fields in stimulus["i_program"]:
        mac = fields["op"] == OP_MAC
        rows, columns, per_output = fields["cnt2_outer"] + 1, fields["cnt2_inner"] + 1, fields["cnt1"] + 1
        steps = rows * columns
        outputs = -(-steps // per_output)
        route = not mac and fields["transpose"]
        product = not mac and fields["accumulate"] and not fields["transpose"]
        if mac:
            for index, word in enumerate(blocks1[block1]):
                halves1[block1 % 2][index] = word
        for index, row in enumerate(blocks2[block2]):
            halves2[block2 % 2][index] = list(row)
        buffer1, buffer2 = halves1[block1 % 2], halves2[block2 % 2]
        windows = [[] for _ in range(outputs)]
        for step in range(steps):
            address = (step % rows) * columns + step // rows if fields["transpose"] else step
            windows[step // per_output].append((buffer1[address % half1], buffer2[(step % per_output) % half2]))
        if mac:
            one = 1 << params["frac_bits"] if fields["wide"] else (1 << params["frac_bits16"]) * 0x10001
            for number, window in enumerate(windows):
                row_list = []
                if fields["accumulate"]:
                    row_list.append((one, out[number % params["out_depth"]]))
                row_list += window
                for position, (a, x) in enumerate(row_list):
                    mac_rows.append({"a": a, "x": list(x), "wide": fields["wide"], "sr": fields["sr"],
                                     "clear": int(position == 0), "read": int(position == len(row_list) - 1)})
                # The MAC reference from reset over every row so far; this output row's result is its last.
                y = nt_mac.reference(params, mac_rows)[mac_results]
                mac_results += 1
                out[number % params["out_depth"]] = y
                if fields["emit"]:
                    results.append({"y": list(y), "last": int(number == outputs - 1)})
        elif product:
            # Product (element-wise on the MAC array): rows in pairs, the first the lanes' own a, the second x;
            # one MAC row from 0 per pair, also written to BUF Output.
            for number in range(steps // 2):
                a_row = buffer2[(2 * number % per_output) % half2]
                x_row = buffer2[((2 * number + 1) % per_output) % half2]
                mac_rows.append({"a_lanes": list(a_row), "x": list(x_row),
                                 "wide": fields["wide"], "sr": fields["sr"], "clear": 1, "read": 1})
                y = nt_mac.reference(params, mac_rows)[mac_results]
                mac_results += 1
                out[number % params["out_depth"]] = y
                if fields["emit"]:
                    results.append({"y": list(y), "last": int(number == steps // 2 - 1)})
        elif route:
            # Route (max-pooling backward): step 0's row gives the argmax, step 1's the dY; then one row per
            # window position, dY where the position is the argmax.
            index_row, value_row = buffer2[0 % per_output % half2], buffer2[1 % per_output % half2]
            outputs = max(steps - 2, 0)
            for number in range(outputs):
                y = [value_row[lane] if (index_row[lane] >> 16) % (1 << params["index_bits"])
                     == number % (1 << params["index_bits"]) else 0 for lane in range(lanes)]
                if fields["emit"]:
                    results.append({"y": y, "last": int(number == outputs - 1)})
        else:
            for number, window in enumerate(windows):
                y = []
                for lane in range(lanes):
                    values = [_signed16(x[lane]) for _, x in window]
                    best = max(values)
                    y.append((best & 0xFFFF) | (values.index(best) % (1 << params["index_bits"])) << 16)
                if fields["emit"]:
                    results.append({"y": y, "last": int(number == outputs - 1)})
        if mac and not fields["hold1"]:
            block1 += 1
        if not fields["hold2"]:
            block2 += 1
    return results


def _random_words(rng, count, full_range_probability=0.2):
    """Random 32-bit words, small (sums stay in range) or, sometimes, full range (saturation)."""
    if rng.random() < full_range_probability:
        return [rng.randrange(1 << 32) for _ in range(count)]
    scale = rng.choice([1 << 4, 1 << 12, 1 << 20])
    return [rng.randrange(-scale, scale) & _MASK32 for _ in range(count)]


def _random_rows(rng, lanes, count):
    words = _random_words(rng, count * lanes)
    return [words[row * lanes:(row + 1) * lanes] for row in range(count)]


def _fill_items(block, lanes=None):
    if lanes is None:
        return [{"data": word, "last": int(i == len(block) - 1)} for i, word in enumerate(block)]
    return [{"data": list(row), "last": int(i == len(block) - 1)} for i, row in enumerate(block)]


class _Session:
    def __init__(self, lanes):
        self.lanes = lanes
        self.stimulus = {"i_program": [], "i_in1": [], "i_in2": []}

    def add(self, fields, block1=None, block2=None):
        """Append a pass; ``block1``/``block2`` are new blocks it reads (None: it reuses a held block)."""
        full = dict(op=OP_MAC, wide=1, sr=0, transpose=0, accumulate=0, emit=1, hold1=0, hold2=0)
        full.update(fields)
        self.stimulus["i_program"].append({name: int(value) for name, value in full.items()})
        if block1 is not None:
            self.stimulus["i_in1"] += _fill_items([word & _MASK32 for word in block1])
        if block2 is not None:
            self.stimulus["i_in2"] += _fill_items([[word & _MASK32 for word in row] for row in block2], self.lanes)


def random_session(params, rng, passes, max_probability=0.25, route_probability=0.0, product_probability=0.0):
    """Random passes: MAC (16/32-bit, SR on/off, transpose, accumulate, holds), MAX windows and (with
    ``route_probability``) route passes (MAX with transpose: argmax row, dY row, then window rows) and
    (``product_probability``) product passes (MAX with accumulate: element-wise a x on the MAC array)."""
    lanes = params["lanes"]
    half1, half2 = params["in1_depth"] // 2, params["in2_depth"] // 2
    session = _Session(lanes)
    held1 = None   # (rows, columns) of a BUF1 block kept by hold1
    held2 = None   # rows of a BUF2 block kept by hold2
    written = 0    # BUF Output rows 0 .. written-1 hold results of this session
    for index in range(passes):
        op = OP_MAX if rng.random() < max_probability else OP_MAC
        route = op == OP_MAX and rng.random() < route_probability
        product = op == OP_MAX and not route and rng.random() < product_probability
        if op == OP_MAC and held1 is not None:
            rows, columns = held1
        else:
            rows = rng.randint(1, min(8, half1))
            columns = rng.randint(1, min(8, half1 // rows))
        if route and rows * columns < 3:
            rows, columns = 1, rng.randint(3, 8)     # a route pass needs a row to emit after its two loading rows
        if product and rows * columns % 2:
            rows, columns = 1, 2 * rng.randint(1, 4)  # a product pass takes its rows in pairs
        steps = rows * columns
        per_output = rng.randint(1, min(steps + 2, 255) if held2 is None else held2)
        if held2 is None:
            per_output = min(per_output, half2)
        outputs = -(-steps // per_output)
        fields = {
            "op": op, "wide": int(rng.random() < 0.6), "sr": int(rng.random() < 0.7),
            "transpose": int(route or (op == OP_MAC and rng.random() < 0.4)),
            "accumulate": int(product or (op == OP_MAC and outputs <= written and rng.random() < 0.4)),
            "emit": int(rng.random() < 0.85 or index == passes - 1),
            "hold1": int(rng.random() < 0.25), "hold2": int(rng.random() < 0.25),
            "cnt2_outer": rows - 1, "cnt2_inner": columns - 1, "cnt1": per_output - 1,
        }
        block1 = block2 = None
        if op == OP_MAC and held1 is None:
            block1 = _random_words(rng, min(steps + rng.randint(0, 2), half1))
        if held2 is None:
            length = min(min(per_output, steps) + rng.randint(0, 2), half2)
            if route:
                length = max(length, min(2, half2))
                block2 = [[(rng.randrange(-3, 3) & 0xFFFF) | rng.randrange(min(steps + 2, 1 << 16)) << 16
                           for _ in range(lanes)]] + _random_rows(rng, lanes, length - 1)
            elif op == OP_MAX and rng.random() < 0.5:
                block2 = [[rng.randrange(-3, 3) & 0xFFFF for _ in range(lanes)] for _ in range(length)]   # ties
            else:
                words = _random_words(rng, length * lanes)
                block2 = [words[row * lanes:(row + 1) * lanes] for row in range(length)]
        if op == OP_MAC:
            held1 = (rows, columns) if fields["hold1"] else None
            written = max(written, min(outputs, params["out_depth"]))
        if product:
            written = max(written, min(steps // 2, params["out_depth"]))
        if not fields["hold2"]:
            held2 = None
        elif block2 is not None:
            held2 = len(block2)
        session.add(fields, block1, block2)
    return session.stimulus


def _matrix_pass(session, matrix, vectors, transpose=False, reuse=False, **fields):
    """A MAC pass of BUF1 block ``matrix`` (rows of words), or its transpose, times BUF2 rows ``vectors``."""
    rows, columns = len(matrix), len(matrix[0])
    session.add(dict(op=OP_MAC, transpose=int(transpose), cnt2_outer=rows - 1, cnt2_inner=columns - 1,
                     cnt1=(rows if transpose else columns) - 1, **fields),
                None if reuse else [word for row in matrix for word in row], vectors)


def corner_session(params, rng):
    """All zeros, saturation in both modes, W^T accumulated across passes, MAX ties and negative windows."""
    lanes = params["lanes"]
    size = max(1, min(4, params["in1_depth"] // 8, params["in2_depth"] // 2, params["out_depth"] - 1))
    session = _Session(lanes)

    def square(value):
        return [[value] * size for _ in range(size)]

    def vectors(value):
        return [[value] * lanes for _ in range(size)]

    _matrix_pass(session, square(0), vectors(0), wide=1, sr=1)
    _matrix_pass(session, square(0), vectors(0), wide=0)
    _matrix_pass(session, square(0x7FFFFFFF), vectors(0x7FFFFFFF), wide=1, sr=1)
    _matrix_pass(session, square(0x7FFFFFFF), vectors(0x80000000), wide=1, sr=0)
    _matrix_pass(session, square(0x7FFF8000), vectors(0x7FFF7FFF), wide=0)
    matrix = [_random_words(rng, size + 1, 0) for _ in range(size)]
    _matrix_pass(session, matrix, [_random_words(rng, lanes, 0) for _ in range(size)], transpose=True, wide=1, sr=1,
                 hold1=1, emit=0)
    _matrix_pass(session, matrix, [_random_words(rng, lanes, 0) for _ in range(size)], transpose=True, reuse=True,
                 wide=1, sr=1, accumulate=1)
    extremes = [[rng.choice([0x7FFF, 0x8000, 0xFFFF, 0]) for _ in range(lanes)] for _ in range(size)]
    for window in (vectors(0x1234), vectors(0xFFFF8000), extremes):
        session.add(dict(op=OP_MAX, cnt2_outer=size - 1, cnt2_inner=0, cnt1=size - 1), None, window)
    # Route (max-pooling backward): every lane's argmax, the first and the last position, one beyond the window
    # (no position gets dY), extreme dY; then a window of 2**index_bits + 2 positions (the index wraps).
    index_mask = (1 << params["index_bits"]) - 1
    window = size * size
    for argmax in (0, window - 1, window, 0xFFFF):
        if size > 1 or argmax < 2:
            rows = [[(0x8000 | (argmax + lane) % (window + 1) << 16) & _MASK32 for lane in range(lanes)],
                    [rng.choice([0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 1]) for _ in range(lanes)]]
            session.add(dict(op=OP_MAX, transpose=1, cnt2_outer=0, cnt2_inner=window + 1, cnt1=1), None, rows)
    # Product: 32-bit saturation at both ends with SR, zero, the 16-bit halves' extremes.
    extremes32 = [0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0, 1 << params["frac_bits"]]
    pairs = []
    for a_word, x_word in ((0x7FFFFFFF, 0x7FFFFFFF), (0x80000000, 0x7FFFFFFF), (0, 0x80000000),
                           (rng.choice(extremes32), rng.choice(extremes32))):
        pairs += [[a_word ^ (lane & 1) for lane in range(lanes)], [x_word] * lanes]
    half2 = params["in2_depth"] // 2
    for rows in (pairs, [[0x7FFF8000] * lanes, [0x80007FFF] * lanes, [0x7FFF7FFF] * lanes, [0xFFFF0001] * lanes]):
        for start in range(0, len(rows), half2 - half2 % 2):
            block = rows[start:start + half2 - half2 % 2]
            session.add(dict(op=OP_MAX, accumulate=1, wide=int(rows is pairs), sr=1, cnt2_outer=0,
                             cnt2_inner=len(block) - 1, cnt1=len(block) - 1), None, block)
    wrap = min(index_mask + 4, 256)       # 2**index_bits + 1 output rows: position 2**index_bits is 0 again
    session.add(dict(op=OP_MAX, transpose=1, cnt2_outer=0, cnt2_inner=wrap - 1, cnt1=1), None,
                [[(lane % 2) << 16 for lane in range(lanes)], [lane + 1 for lane in range(lanes)]])
    return session.stimulus


def power_on_stimulus(params):
    """Two MAC passes, one per half of each buffer, that read every BUF Input 1 word and every BUF Input 2 row
    of the half, with a block of one word and one row: the other words and rows are read before any write.

    A testbench's first test only (the buffers keep their contents across resets). The reference reads them as
    0, the buffers' power-on contents (the memories' initial values in the Verilog, as ``nt_vault``'s).
    """
    lanes = params["lanes"]
    half1, half2 = params["in1_depth"] // 2, params["in2_depth"] // 2
    per_output = min(half2, 256)
    session = _Session(lanes)
    for half in range(2):
        # half1 steps (every word of the half), one output row per half2 steps (every row of the half).
        session.add(dict(op=OP_MAC, wide=1, sr=0, cnt2_outer=0, cnt2_inner=half1 - 1, cnt1=per_output - 1),
                    [(1 + half) << params["frac_bits"]], [[(lane + 3) << params["frac_bits"] for lane in range(lanes)]])
    return session.stimulus


def _scenario(params, name, stimulus, **handshake):
    return Scenario(name, stimulus, {"o_result": reference(params, stimulus)}, **handshake)


def scenarios(params, seed):
    table = []
    rng = rng_for(seed, "nt_pe", "full rate")
    table.append(_scenario(params, "random passes at full rate", random_session(params, rng, 16)))
    rng = rng_for(seed, "nt_pe", "backpressure")
    table.append(_scenario(params, "random passes with backpressure",
                           random_session(params, rng, 24, route_probability=0.4, product_probability=0.4),
                           valid={"i_program": random_pattern(rng, 0.5), "i_in1": random_pattern(rng, 0.6),
                                  "i_in2": random_pattern(rng, 0.6)},
                           ready={"o_result": random_pattern(rng, 0.5)}))
    rng = rng_for(seed, "nt_pe", "route")
    table.append(_scenario(params, "random passes with route (max-pooling backward) at full rate",
                           random_session(params, rng, 16, max_probability=0.5, route_probability=0.6)))
    rng = rng_for(seed, "nt_pe", "product")
    table.append(_scenario(params, "random passes with product (element-wise a x on the MAC array) at full rate",
                           random_session(params, rng, 16, max_probability=0.5, product_probability=0.7)))
    rng = rng_for(seed, "nt_pe", "corners")
    corners = corner_session(params, rng)
    table.append(_scenario(params, "zeros, saturation, W^T accumulated, MAX ties and negatives", corners))
    table.append(_scenario(params, "zeros, saturation, W^T accumulated, MAX ties and negatives, backpressure",
                           corners, valid={"i_program": random_pattern(rng, 0.8), "i_in1": random_pattern(rng, 0.7),
                                           "i_in2": random_pattern(rng, 0.7)},
                           ready={"o_result": random_pattern(rng, 0.6)}))
    return table


def golden(params, scenario):
    """Results, and without backpressure the result cycles and (``i_program``) the program acceptance cycles."""
    stimulus = scenario.stimulus
    result = nt_pe([_program_word(fields) for fields in stimulus["i_program"]], _blocks(stimulus["i_in1"]),
                   _blocks(stimulus["i_in2"]), **params)
    items = {"o_result": [{"y": [int(word) for word in row], "last": int(last)}
                          for row, last in zip(result["results"], result["last"])]}
    if scenario.valid or scenario.ready:
        return Transactions(items)
    return Transactions(items, {"o_result": [int(c) for c in result["cycles"]],
                                "i_program": [int(c) for c in result["accept"]]})
