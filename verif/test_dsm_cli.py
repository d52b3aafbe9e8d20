"""The ``trainforge dsm`` command line: exit codes, no partial output, executors."""
import json

import pytest

from trainforge.cli import main
from trainforge.sim.dsm.executor import run_map
from trainforge.sim.dsm.figures import _training_point


def test_bad_workload_exits_2_and_writes_nothing(tmp_path, capsys):
    bad = tmp_path / "net.json"
    bad.write_text(json.dumps({"name": "bad", "layers": [
        {"name": "convX", "kind": "conv", "in_channels": 3, "out_channels": -1, "kernel": 3, "in_height": 8,
         "in_width": 8}]}))
    assert main(["dsm", "explore", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err == f"trainforge dsm: {bad}: layers[0].out_channels: expected an integer >= 1, got -1\n"


def test_bad_config_exits_2(tmp_path, capsys):
    config = tmp_path / "arch.json"
    config.write_text(json.dumps({"core": {"scratchpad_bw": -5}}))
    assert main(["dsm", "explore", "vgg16", "--config", str(config)]) == 2
    assert "scratchpad_bw" in capsys.readouterr().err


def test_yaml_network_file_is_explored(tmp_path, capsys):
    path = tmp_path / "net.yaml"
    path.write_text("name: two\nminibatch: 8\nlayers:\n"
                    "  - {name: c1, kind: conv, in_channels: 3, out_channels: 16, kernel: 3, in_height: 8,"
                    " in_width: 8, padding: 1}\n"
                    "  - {name: f1, kind: fc, in_channels: 1024, out_channels: 10}\n")
    assert main(["dsm", "explore", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["workload"] == "two" and report["n_mb"] == 8


def test_unknown_name_lists_the_builtins(capsys):
    assert main(["dsm", "explore", "alexnet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No such file" not in err
    assert "vgg16, resnet50, gnmt" in err and "hypar/AlexNet" in err


def test_architecture_error_names_the_file_once(tmp_path, capsys):
    config = tmp_path / "arch.json"
    config.write_text("[1")
    assert main(["dsm", "explore", "vgg16", "--config", str(config)]) == 2
    assert capsys.readouterr().err.count(str(config)) == 1


def test_bad_sweep_value_writes_no_files(tmp_path):
    out = tmp_path / "reports"
    assert main(["dsm", "sweep", "scaling", "--values", "6", "--out", str(out)]) == 2
    assert main(["dsm", "sweep", "training", "--networks", "alexnet", "--out", str(out)]) == 2
    assert not out.exists()


def test_explore_and_small_sweep(tmp_path, capsys):
    assert main(["dsm", "explore", "gnmt", "--minibatch", "64", "--all", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert 0 < report["utilization"] <= 1
    out = tmp_path / "r"
    assert main(["dsm", "sweep", "inference", "--networks", "gnmt", "--values", "1,2",
                 "--executor", "serial", "--out", str(out)]) == 0
    assert (out / "fig11_inference.json").exists() and (out / "fig11_inference.png").exists()


def test_dask_sweep_equals_local():
    distributed = pytest.importorskip("distributed")
    items = [("gnmt", 64, level, {}) for level in range(2)]
    local = run_map(_training_point, items, "serial")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp",
                                   dashboard_address=":0") as cluster:
        remote = run_map(_training_point, items, cluster.scheduler_address.replace("tcp://", "dask://"))
    assert [p["cycles"] for p in remote] == [p["cycles"] for p in local]
