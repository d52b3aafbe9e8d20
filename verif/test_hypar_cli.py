"""HyPar CLI and simulator (issue 7): exit code 2 and no files on bad input; timeline sanity."""
import argparse
import json

import numpy as np
import pytest

from trainforge.errors import TrainforgeError
from trainforge.commands.hypar import cli
from trainforge.sim.hypar.builtins import builtin_network
from trainforge.sim.hypar.config import ArrayConfig, TrainingSetup
from trainforge.sim.hypar.partition import strategy_choices
from trainforge.sim.hypar.simulator import simulate_step


def _run(argv):
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


def _main_exit_code(argv, capsys):
    try:
        from trainforge.cli import main
        return main(argv)
    except ImportError:  # the hardware flow's modules may be absent: run the handler like main() does
        try:
            return _run(argv)
        except TrainforgeError as error:
            print(error)
            return 2


@pytest.mark.parametrize("bad", [
    {"layers": [{"name": "c1", "kind": "conv", "in_channels": 1, "out_channels": 4, "kernel": 3, "in_height": 8,
                 "in_width": 8, "out_height": 6, "out_width": 6},
                {"name": "f1", "kind": "fc", "in_channels": 99, "out_channels": 10}]},
    "{not json",
])
def test_bad_network_file_exits_2_and_writes_nothing(tmp_path, monkeypatch, capsys, bad):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "bad.json"
    path.write_text(bad if isinstance(bad, str) else json.dumps(bad))
    before = set(tmp_path.rglob("*"))
    assert _main_exit_code(["hypar", "partition", str(path)], capsys) == 2
    assert _main_exit_code(["hypar", "simulate", str(path), "--json"], capsys) == 2
    assert set(tmp_path.rglob("*")) == before


def test_unknown_net_and_bad_levels_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert _main_exit_code(["hypar", "partition", "VGG-Z"], capsys) == 2
    assert _main_exit_code(["hypar", "figures", "--levels", "11", "--only", "fig8"], capsys) == 2
    assert _main_exit_code(["hypar", "figures", "--only", "fig99"], capsys) == 2
    assert not (tmp_path / "build").exists()


def test_partition_json(capsys):
    assert _run(["hypar", "partition", "Lenet-c", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["strategies"]["HyPar"]["GB_per_step"] <= result["strategies"]["DP"]["GB_per_step"]


def test_figures_write_json_and_png(tmp_path, capsys):
    assert _run(["hypar", "figures", "--only", "fig8,fig12", "--out", str(tmp_path), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert set(printed) == {"fig8", "fig12"}
    for name in ("fig8", "fig12"):
        assert (tmp_path / f"{name}.png").stat().st_size > 1000
        assert json.loads((tmp_path / f"{name}.json").read_text()) == printed[name]


def test_timeline_respects_dependences_and_resources():
    network, setup = builtin_network("AlexNet"), TrainingSetup()
    step = simulate_step(network, setup, strategy_choices("HyPar", network, setup, 4))
    for resource in ("compute", "network"):
        spans = sorted((e.start, e.end) for e in step.events if e.resource == resource)
        assert all(a_end <= b_start + 1e-12 for (_, a_end), (b_start, _) in zip(spans, spans[1:])), resource
    assert max(step.compute_seconds, step.network_seconds) <= step.seconds <= (
        step.compute_seconds + step.network_seconds + 1e-9)
    end = {e.name: e.end for e in step.events}
    start = {e.name: e.start for e in step.events}
    assert start["fwd 1"] >= end["fwd 0"]
    assert start["bwd 6"] >= end["bwd 7"]


def test_torus_never_faster_than_fat_tree_for_dp():
    network, setup = builtin_network("VGG-A"), TrainingSetup()
    choices = strategy_choices("DP", network, setup, 4)
    htree = simulate_step(network, setup, choices, ArrayConfig(topology="htree")).seconds
    torus = simulate_step(network, setup, choices, ArrayConfig(topology="torus")).seconds
    assert torus >= htree


def test_single_accelerator_has_no_communication():
    network, setup = builtin_network("VGG-A"), TrainingSetup()
    step = simulate_step(network, setup, np.zeros((0, len(network)), bool), ArrayConfig(levels=0))
    assert step.network_seconds == 0 and step.communication_bytes == 0
    assert np.isclose(step.seconds, step.compute_seconds)


def test_simulate_third_type(capsys):
    """``simulate --third-type`` adds an AccPar row whose traffic is the three-type partition's, with any node."""
    from trainforge.sim.hypar import third_type
    assert _run(["hypar", "simulate", "Lenet-c", "--third-type", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    network, setup = builtin_network("Lenet-c"), TrainingSetup()
    assert result["strategies"]["AccPar"]["GB_per_step"] == pytest.approx(
        third_type.hierarchical_partition(network, setup, 4)[0] / 1e9, rel=1e-12)
    assert set(result["strategies"]) == {"HyPar", "DP", "MP", "Trick", "AccPar"}
    assert _run(["hypar", "simulate", "Lenet-c", "--third-type", "--node", "caterpillar", "--json"]) == 0
    on_caterpillar = json.loads(capsys.readouterr().out)["strategies"]
    assert on_caterpillar["AccPar"]["GB_per_step"] == result["strategies"]["AccPar"]["GB_per_step"]
    assert on_caterpillar["AccPar"]["seconds"] != result["strategies"]["AccPar"]["seconds"]


def test_concat_network_file(tmp_path, capsys):
    """A network file with concat_from partitions and simulates from the command line."""
    path = tmp_path / "concat.yaml"
    path.write_text("name: concat\nlayers:\n"
                    "  - {name: x, kind: fc, in_channels: 4, out_channels: 4}\n"
                    "  - {name: p, kind: fc, in_channels: 4, out_channels: 2}\n"
                    "  - {name: q, kind: fc, in_channels: 4, out_channels: 6, input_from: x}\n"
                    "  - {name: k, kind: fc, in_channels: 8, out_channels: 2, concat_from: [p, q]}\n")
    assert _run(["hypar", "partition", str(path), "--levels", "1", "--batch", "4", "--bytes-per-element", "1",
                 "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["layers"] == ["x", "p", "q", "k"]
    assert _run(["hypar", "simulate", str(path), "--levels", "1", "--batch", "4", "--third-type"]) == 0
    assert "AccPar" in capsys.readouterr().out


def test_third_type_figure(tmp_path, monkeypatch, capsys):
    """The ``third_type`` figure on two small networks (the full run takes seconds): JSON = what simulate gives,
    PNG written."""
    from trainforge.sim.hypar import builtins, figures
    monkeypatch.setattr(figures, "_networks", lambda: {"Lenet-c": builtin_network("Lenet-c")})
    monkeypatch.setattr(builtins, "DAG_NETWORKS", {"ResNet-18": builtins.resnet18})
    assert _run(["hypar", "figures", "--only", "third_type", "--out", str(tmp_path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)["third_type"]
    assert (tmp_path / "third_type.png").stat().st_size > 1000
    assert list(data["networks"]) == ["Lenet-c", "ResNet-18"]
    assert _run(["hypar", "simulate", "Lenet-c", "--third-type", "--json"]) == 0
    simulated = json.loads(capsys.readouterr().out)["strategies"]
    row = data["networks"]["Lenet-c"]
    for label in ("HyPar", "AccPar"):
        assert row[label]["seconds"] == simulated[label]["seconds"]
        assert row[label]["performance"] == simulated["DP"]["seconds"] / simulated[label]["seconds"]
    assert data["Gmean"]["AccPar"]["performance"] == pytest.approx(row["AccPar"]["performance"])


@pytest.mark.parametrize("levels, figure", [(0, "fig5"), (0, "fig8"), (1, "fig9"), (6, "fig9"), (0, "fig10")])
def test_figures_refuse_levels_they_cannot_draw_before_any_work(tmp_path, monkeypatch, capsys, levels, figure):
    """A figure that cannot be drawn for ``--levels`` fails at once, in one line naming the figure and the range,
    and writes nothing (the cheap figure listed first must not be computed and written either)."""
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "figures"
    assert _main_exit_code(["hypar", "figures", "--levels", str(levels), "--only", f"fig11,{figure}",
                            "--out", str(out)], capsys) == 2
    captured = capsys.readouterr()
    error = (captured.err or captured.out).strip()
    assert len(error.splitlines()) == 1 and figure in error and f"= {levels}" in error, error
    assert not out.exists()


@pytest.mark.parametrize("levels", [2, 3])
def test_figures_draw_at_other_levels(tmp_path, levels):
    """Figs. 9 and 10 at a hierarchy other than the paper's 4 levels (they used to index levels 1 and 2 and the
    paper's 4-level points, and failed with a traceback)."""
    out = tmp_path / "figures"
    assert _run(["hypar", "figures", "--levels", str(levels), "--batch", "64", "--only", "fig9,fig10",
                 "--out", str(out)]) == 0
    for name in ("fig9", "fig10"):
        data = json.loads((out / f"{name}.json").read_text())
        assert (out / f"{name}.png").stat().st_size > 0
        assert len(data["ours"]["hypar"]["levels" if name == "fig9" else "fc1"]) == levels
