"""The random regression's per-block summary: ``build/reports/regress/summary.json`` and ``table.md``.

Each run of ``verif/test_regress.py`` writes its counts to
``build/reports/regress/runs/``: on the cocotb path one file per block and
simulator, ``<block>-<simulator>.json`` (written by the cocotb test,
:mod:`verif.regression`, with the pytest base seed and the replay command
added); on the fast path (:mod:`verif.fast_regression`) one file per shard,
``<block>-<simulator>-fast-<shard>.json``. :func:`write_summary` gathers them
into one table of transactions and mismatches per block, simulator and path
(the shards of the latest fast session of a block summed), each mismatch with
the seeds that replay it; ``trainforge report`` inlines the Markdown table.
"""
import json
import pathlib

#: The environment of a testbench's ``random_regression`` test (``verif/regression_common.py``), set by
#: ``make regress`` (``verif/test_regress.py``) and ``trainforge mutate --subset``: the checked transactions to
#: reach (the test is skipped without it), a scenario seed to replay alone, and where the JSON counts go.
TRANSACTIONS_ENV = "TRAINFORGE_TRANSACTIONS"
REPLAY_ENV = "TRAINFORGE_REGRESS_REPLAY"
REPORT_ENV = "TRAINFORGE_REGRESS_REPORT"

__all__ = ["REPORTS", "RUNS", "load_runs", "merge_shards", "summary", "table", "write_summary"]

ROOT = pathlib.Path(__file__).resolve().parent.parent
#: Folder of the regression's reports.
REPORTS = ROOT / "build" / "reports" / "regress"
#: One JSON file per (block, simulator) run.
RUNS = REPORTS / "runs"


def load_runs(runs=RUNS, since=None):
    """Every run record under ``runs`` (written at or after ``since``, a POSIX time, when given), sorted by block."""
    records = []
    for path in sorted(pathlib.Path(runs).glob("*.json")):
        if since is not None and path.stat().st_mtime < since:
            continue
        record = json.loads(path.read_text())
        record["_mtime"] = path.stat().st_mtime
        records.append(record)
    return sorted(records, key=lambda r: (r["block"], r.get("simulator", ""), r.get("path", "cocotb")))


def _session(record):
    return (record.get("base_seed"), record.get("requested", record["target"]), record.get("shards", 1))


def merge_shards(records):
    """One record per (block, simulator, path): the shards of the latest session summed (counts, seconds, details).

    A session is a base seed, a requested transaction count and a number of shards; shards of older sessions
    (files left from an earlier, longer run) are left out.
    """
    groups = {}
    for r in records:
        groups.setdefault((r["block"], r.get("simulator"), r.get("path", "cocotb")), []).append(r)
    merged = []
    for (block, simulator, path), group in groups.items():
        latest = _session(max(group, key=lambda r: r["_mtime"]))
        group = sorted((r for r in group if _session(r) == latest), key=lambda r: r.get("shard", 0))
        first = group[0]
        total = dict(first, path=path, shards=len(group), target=sum(r["target"] for r in group),
                     mismatch_details=[d for r in group for d in r["mismatch_details"]])
        for key in ("transactions", "resets_mid_stream", "beats_before_reset", "scenarios", "cycles",
                    "wall_seconds", "mismatches"):
            total[key] = sum(r[key] for r in group)
        if all("cpu_seconds" in r for r in group):
            total["cpu_seconds"] = round(sum(r["cpu_seconds"] for r in group), 3)
        for key in ("input_beats", "output_beats"):
            total[key] = {port: sum(r[key][port] for r in group) for port in first[key]}
        total["shard_seeds"] = [r["cocotb_seed"] for r in group]
        merged.append(total)
    return merged


def summary(records):
    """The summary dict: one row per block, simulator and path (shards summed), and the totals."""
    rows = []
    for r in merge_shards(records):
        rows.append({
            "block": r["block"], "simulator": r.get("simulator"), "path": r["path"], "shards": r["shards"],
            "param_overrides": r.get("param_overrides") or {}, "form": r.get("form", "emitted"),
            "transactions": r["transactions"],
            "input_beats": sum(r["input_beats"].values()), "output_beats": sum(r["output_beats"].values()),
            "target": r["target"], "resets_mid_stream": r["resets_mid_stream"],
            "beats_before_reset": r["beats_before_reset"], "scenarios": r["scenarios"], "cycles": r["cycles"],
            "wall_seconds": r["wall_seconds"],
            "transactions_per_second": round(r["transactions"] / r["wall_seconds"], 1) if r["wall_seconds"] else None,
            "cpu_seconds": r.get("cpu_seconds"),
            "transactions_per_cpu_second": (round(r["transactions"] / r["cpu_seconds"], 1)
                                            if r.get("cpu_seconds") else None),
            "mismatches": r["mismatches"], "base_seed": r.get("base_seed"), "cocotb_seed": r["cocotb_seed"],
            "shard_seeds": r["shard_seeds"],
            "mismatch_seeds": sorted({d["scenario_seed"] for d in r["mismatch_details"]}),
            "mismatch_details": r["mismatch_details"], "replay": r.get("replay_command"),
        })
    return {"kind": "regress", "rows": rows,
            "total_transactions": sum(row["transactions"] for row in rows),
            "total_mismatches": sum(row["mismatches"] for row in rows),
            "blocks_below_target": sorted({row["block"] for row in rows if row["transactions"] < row["target"]})}


def table(summary_dict):
    """The summary as a Markdown table (also what ``make regress`` prints at its end)."""
    lines = ["| block | simulator | path | target | transactions (in + out) | resets mid-stream | mismatches "
             "| tx/s per core | tx per CPU-second | seeds to replay |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for row in summary_dict["rows"]:
        seeds = ", ".join(str(s) for s in row["mismatch_seeds"])
        replay = (f"`--seed {row['base_seed']}`, scenario seeds {seeds}" if row["mismatches"] else "")
        path = row["path"] + ("" if row.get("form", "emitted") == "emitted" else f", {row['form']}")
        path = path if row["shards"] == 1 else f"{path} ({row['shards']} shards)"
        overrides = row.get("param_overrides") or {}
        block = row["block"] + (f" ({', '.join(f'{k}={v}' for k, v in overrides.items())})" if overrides else "")
        lines.append(f"| {block} | {row['simulator']} | {path} | {row['target']:,} | {row['transactions']:,} "
                     f"({row['input_beats']:,} + {row['output_beats']:,}) | {row['resets_mid_stream']} | "
                     f"{row['mismatches']} | {row['transactions_per_second']} | {row['transactions_per_cpu_second'] or ''} | {replay} |")
    lines.append(f"| total | | | | {summary_dict['total_transactions']:,} | | {summary_dict['total_mismatches']} | | | |")
    return "\n".join(lines) + "\n"


def write_summary(since=None):
    """Write ``summary.json`` and ``table.md`` from the runs (those since ``since``); return the summary, or None."""
    records = load_runs(since=since)
    if not records:
        return None
    result = summary(records)
    REPORTS.mkdir(parents=True, exist_ok=True)
    (REPORTS / "summary.json").write_text(json.dumps(result, indent=1) + "\n")
    (REPORTS / "table.md").write_text(
        "Random regression (`make regress TRANSACTIONS=N`): checked transactions and mismatching scenarios "
        "per block, simulator and path (cocotb: payloads and cycles; fast: payloads and order, shards summed; "
        "tx/s per core: transactions over the summed run seconds; tx per CPU-second: over the summed user and system "
        "time, fast path only).\n\n" + table(result))
    return result
