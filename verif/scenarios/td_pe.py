"""Scenario table of ``td_pe`` (and, through :func:`make_scenarios`, of ``td_tile``).

Stimulus: streams of rows (``a``, ``b``, ``clear``, ``read``) in groups of
``depth`` rows, the last group padded with zero rows without flags; dot
products of random lengths at sparsities from dense to all-zero.

Reference for the values: numpy's own ``dot`` of each row pair, summed in
plain Python integers from the ``clear`` row to the ``read`` row and wrapped
to ``acc_width`` bits. Reference for the cycles: the golden cycle model
(:func:`~trainforge.golden.tensordash.pe.td_pe_cycles`), at full rate only:
each result leaves :func:`~trainforge.spec.tensordash.result_cycle` of the
scheduling cycle of its read row, counted from the first group's transfer.
"""
import numpy as np

from trainforge.golden.tensordash.pe import td_pe, td_pe_cycles, td_tile, td_tile_cycles
from trainforge.spec import tensordash as spec

from scenario import Scenario, Transactions, random_pattern, rng_for

#: Adversarial B masks: ``mask(t, lane, depth)`` is true where B operand ``lane`` of row ``t`` is non-zero.
ADVERSARIAL = {
    "one dense lane": lambda t, lane, depth: lane == 0,
    "alternating dense and zero rows": lambda t, lane, depth: t % 2 == 0,
    "zero runs longer than D": lambda t, lane, depth: t % (depth + 2) == 0,
    "diagonal": lambda t, lane, depth: lane == t % 4,
}

#: Flag patterns: ``"paired"`` dot products (clear on the first row, read on the last), or ``clear`` and
#: ``read`` independent of each other: partial sums read in the middle of a dot product (no clear after the
#: read), and sums cleared without a read (discarded).
FLAG_PATTERNS = ("paired", "partial reads", "clears without reads")

#: (name, rows, B density or adversarial mask name, A density, longest dot product, valid, ready probability[,
#: flag pattern]).
STREAMS = (
    ("dense, full rate", 24, 1.0, 1.0, 9, 1.0, 1.0),
    ("30% sparse, full rate", 40, 0.7, 0.8, 12, 1.0, 1.0),
    ("90% sparse, full rate", 48, 0.1, 0.8, 20, 1.0, 1.0),
    ("all zero B, full rate", 24, 0.0, 1.0, 10, 1.0, 1.0),
    ("one long dot product, 60% sparse", 40, 0.4, 0.6, 40, 1.0, 1.0),
    ("single-row dot products, 50% sparse", 16, 0.5, 0.5, 1, 1.0, 1.0),
    ("producer gaps, consumer stalls", 48, 0.4, 0.7, 6, 0.6, 0.4),
    ("dense, slow consumer", 32, 1.0, 1.0, 3, 1.0, 0.3),
    ("partial-sum reads, 50% sparse, full rate", 48, 0.5, 0.7, 12, 1.0, 1.0, "partial reads"),
    ("partial-sum reads, stalls", 40, 0.5, 0.7, 12, 0.7, 0.5, "partial reads"),
    ("sums cleared without a read, full rate", 48, 0.4, 0.8, 10, 1.0, 1.0, "clears without reads"),
) + tuple((f"{name}, full rate", 40, name, 1.0, 16, 1.0, 1.0) for name in ADVERSARIAL)


def _operand_range(params):
    if params["signed"]:
        return -(1 << (params["width"] - 1)), (1 << (params["width"] - 1)) - 1
    return 0, (1 << params["width"]) - 1


def _wrap(value, params):
    value %= 1 << params["acc_width"]
    if params["signed"] and value >> (params["acc_width"] - 1):
        value -= 1 << params["acc_width"]
    return value


#: Floating-point MACs: operands are small integers (exact in FP16 and bfloat16, and so are products and sums,
#: whatever the order), so the reference is exact; one more stream puts infinities and NaNs on B.
FLOAT_RANGE = (-8, 8)
FLOAT_SPECIALS = ("infinities and NaNs on B, full rate", 32, 0.5, 1.0, 8, 1.0, 1.0)


def _is_float(params):
    return params["mac"] in ("fp16", "bf16")


def _operand_bits(value, params):
    """The payload bits of one operand: the integer itself, or its FP16 / bfloat16 bit pattern (numpy's)."""
    if not _is_float(params):
        return value
    if params["mac"] == "fp16":
        return int(np.array(value, dtype=np.float16).view(np.uint16))
    return int(np.array(value, dtype=np.float32).view(np.uint32)) >> 16  # exact: no rounding needed


def _vector(rng, params, density):
    """``lanes`` operands, each non-zero with probability ``density``."""
    low, high = FLOAT_RANGE if _is_float(params) else _operand_range(params)
    out = []
    for _ in range(params["lanes"]):
        value = rng.randint(low, high) or 1 if rng.random() < density else 0
        out.append(value)
    return out


def _flags(rng, total, longest, pattern="paired"):
    """``clear`` and ``read`` per row; the last row always reads (so every stream ends on a result)."""
    clear, read, start = [0] * total, [0] * total, 0
    while start < total:
        end = min(total, start + rng.randint(1, longest))
        clear[start] = 1
        if pattern == "paired" or end == total:
            read[end - 1] = 1
        elif pattern == "partial reads":
            # Reads inside the dot product, none at its end: the next rows keep accumulating until a clear.
            for row in range(start, end - 1):
                read[row] = int(rng.random() < 0.3)
        elif pattern == "clears without reads":
            read[end - 1] = int(rng.random() < 0.5)  # half the dot products are discarded by the next clear
        start = end
    return clear, read


def _float_result(terms):
    """FP32 bits of a sum of exact products (ints) and infinities / NaNs, as IEEE arithmetic gives it.

    Any NaN, or infinities of both signs: the canonical quiet NaN; else an infinity wins; else the exact
    integer sum, which float32 holds exactly (|sum| < 2**24), with ``+0`` for zero (a sum that starts from
    ``+0`` is never ``-0``).
    """
    if any(t != t for t in terms) or (float("inf") in terms and -float("inf") in terms):
        return 0x7FC00000
    if float("inf") in terms or -float("inf") in terms:
        return int(np.array(next(t for t in terms if t in (float("inf"), -float("inf"))), np.float32).view(np.uint32))
    total = sum(int(t) for t in terms)
    assert abs(total) < 1 << 24
    return int(np.array(total, dtype=np.float32).view(np.uint32)) if total else 0


def reference(rows, params, rows_of_tile, cols_of_tile, tile):
    """Expected results: per ``read`` row, every (B stream r, A stream c) dot product (wrapped integers,
    or FP32 bits for a floating-point MAC)."""
    terms = [[[] for _ in range(cols_of_tile)] for _ in range(rows_of_tile)]
    out = []
    for row in rows:
        a = row["a"] if tile else [row["a"]]
        b = row["b"] if tile else [row["b"]]
        for r in range(rows_of_tile):
            for c in range(cols_of_tile):
                if row["clear"]:
                    terms[r][c] = []
                # Products in Python: exact integers, or IEEE infinities and NaNs from B's specials.
                terms[r][c] += [x * y for x, y in zip(a[c], b[r]) if x != 0 and y != 0]
        if row["read"]:
            if _is_float(params):
                out.append([[_float_result(terms[r][c]) for c in range(cols_of_tile)] for r in range(rows_of_tile)])
            else:
                out.append([[_wrap(sum(terms[r][c]), params) for c in range(cols_of_tile)]
                            for r in range(rows_of_tile)])
    return out


def _groups(rows, depth):
    padded = list(rows)
    while len(padded) % depth:
        padded.append(None)
    return [padded[k:k + depth] for k in range(0, len(padded), depth)]


def make_scenarios(params, seed, block, tile_shape):
    """The table for a PE (``tile_shape`` ``None``) or a tile of ``(rows, cols)``."""
    depth = params["depth"]
    tile_rows, tile_cols = tile_shape or (1, 1)
    zero = [0] * params["lanes"]
    table = []
    streams = STREAMS + ((FLOAT_SPECIALS,) if _is_float(params) else ())
    for name, total, density_b, density_a, longest, valid, ready, *flag_pattern in streams:
        rng = rng_for(seed, block, name)
        clear, read = _flags(rng, total, longest, *flag_pattern)
        rows = []
        for t in range(total):
            a = [_vector(rng, params, density_a) for _ in range(tile_cols)]
            if isinstance(density_b, str):
                b = [[value if ADVERSARIAL[density_b](t, lane, depth) else 0
                      for lane, value in enumerate(_vector(rng, params, 1.0))] for _ in range(tile_rows)]
            else:
                b = [_vector(rng, params, density_b) for _ in range(tile_rows)]
            if (name, total) == FLOAT_SPECIALS[:2]:
                specials = (float("inf"), -float("inf"), float("nan"))
                b = [[rng.choice(specials) if value and rng.random() < 0.08 else value for value in vector]
                     for vector in b]
            rows.append({"a": a if tile_shape else a[0], "b": b if tile_shape else b[0],
                         "clear": clear[t], "read": read[t]})
        pad = {"a": [zero] * tile_cols if tile_shape else zero, "b": [zero] * tile_rows if tile_shape else zero,
               "clear": 0, "read": 0}

        def payload(row):
            encode = (lambda vector: [_operand_bits(value, params) for value in vector])
            if tile_shape:
                return {"a": [encode(v) for v in row["a"]], "b": [encode(v) for v in row["b"]],
                        "clear": row["clear"], "read": row["read"]}
            return {"a": encode(row["a"]), "b": encode(row["b"]), "clear": row["clear"], "read": row["read"]}

        groups = [[payload(row) if row is not None else pad for row in group] for group in _groups(rows, depth)]
        results = reference(rows, params, tile_rows, tile_cols, tile_shape is not None)
        expected = results if tile_shape else [result[0][0] for result in results]
        table.append(Scenario(name, {"i_group": groups}, {"o_sum": expected},
                              valid={"i_group": random_pattern(rng, valid)},
                              ready={"o_sum": random_pattern(rng, ready)}))
    return table


def _stream(scenario, tile_shape):
    rows = [row for group in scenario.stimulus["i_group"] for row in group]
    a = np.array([row["a"] for row in rows], dtype=np.int64)
    b = np.array([row["b"] for row in rows], dtype=np.int64)
    clear = np.array([row["clear"] for row in rows], dtype=bool)
    read = np.array([row["read"] for row in rows], dtype=bool)
    return a, b, clear, read


def _full_rate(scenario):
    return set(scenario.valid.get("i_group", (1,))) == {1} and set(scenario.ready.get("o_sum", (1,))) == {1}


def make_golden(params, scenario, tile_shape):
    """Values from the golden model and, at full rate, cycles from its cycle model."""
    a, b, clear, read = _stream(scenario, tile_shape)
    if tile_shape:
        items = td_tile(a, b, clear, read, **params).tolist()
    else:
        items = td_pe(a, b, clear, read, **params).tolist()
    cycles = {}
    if _full_rate(scenario):
        model = (td_tile_cycles if tile_shape else td_pe_cycles)(a, b, clear, read, record=True, **params)
        cycles["o_sum"] = [spec.result_cycle(params, int(cycle)) for cycle in model.read_cycles[0]]
    return Transactions({"o_sum": items}, cycles)


def scenarios(params, seed):
    return make_scenarios(params, seed, "td_pe", None)


def golden(params, scenario):
    return make_golden(params, scenario, None)
