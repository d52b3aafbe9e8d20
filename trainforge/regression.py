"""The random regression's per-block summary: ``build/reports/regress/summary.json`` and ``table.md``.

Each run of ``verif/test_regress.py`` (one block on one simulator) writes its
counts to ``build/reports/regress/runs/<block>-<simulator>.json`` (written by
the cocotb test, :mod:`verif.regression`, with the pytest base seed and the
replay command added). :func:`write_summary` gathers them into one table of
transactions and mismatches per block and simulator, each mismatch with the
seeds that replay it; ``trainforge report`` inlines the Markdown table.
"""
import json
import pathlib

__all__ = ["REPORTS", "RUNS", "load_runs", "summary", "table", "write_summary"]

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
        records.append(json.loads(path.read_text()))
    return sorted(records, key=lambda r: (r["block"], r.get("simulator", "")))


def summary(records):
    """The summary dict: one row per run, and the totals."""
    rows = []
    for r in records:
        rows.append({
            "block": r["block"], "simulator": r.get("simulator"), "transactions": r["transactions"],
            "input_beats": sum(r["input_beats"].values()), "output_beats": sum(r["output_beats"].values()),
            "target": r["target"], "resets_mid_stream": r["resets_mid_stream"],
            "beats_before_reset": r["beats_before_reset"], "scenarios": r["scenarios"], "cycles": r["cycles"],
            "wall_seconds": r["wall_seconds"],
            "transactions_per_second": round(r["transactions"] / r["wall_seconds"], 1) if r["wall_seconds"] else None,
            "mismatches": r["mismatches"], "base_seed": r.get("base_seed"), "cocotb_seed": r["cocotb_seed"],
            "mismatch_seeds": sorted({d["scenario_seed"] for d in r["mismatch_details"]}),
            "mismatch_details": r["mismatch_details"], "replay": r.get("replay_command"),
        })
    return {"kind": "regress", "rows": rows,
            "total_transactions": sum(row["transactions"] for row in rows),
            "total_mismatches": sum(row["mismatches"] for row in rows),
            "blocks_below_target": sorted({row["block"] for row in rows if row["transactions"] < row["target"]})}


def table(summary_dict):
    """The summary as a Markdown table (also what ``make regress`` prints at its end)."""
    lines = ["| block | simulator | target | transactions (in + out) | resets mid-stream | mismatches | tx/s "
             "| seeds to replay |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for row in summary_dict["rows"]:
        seeds = ", ".join(str(s) for s in row["mismatch_seeds"])
        replay = (f"`--seed {row['base_seed']}`, scenario seeds {seeds}" if row["mismatches"] else "")
        lines.append(f"| {row['block']} | {row['simulator']} | {row['target']:,} | {row['transactions']:,} "
                     f"({row['input_beats']:,} + {row['output_beats']:,}) | {row['resets_mid_stream']} | "
                     f"{row['mismatches']} | {row['transactions_per_second']} | {replay} |")
    lines.append(f"| total | | | {summary_dict['total_transactions']:,} | | {summary_dict['total_mismatches']} | | |")
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
        "per block and simulator.\n\n" + table(result))
    return result
