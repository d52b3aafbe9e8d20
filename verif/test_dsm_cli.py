"""The ``trainforge dsm`` command line: exit codes, no partial output, executors."""
import json

import pytest

from trainforge.cli import main
from trainforge.sim.dsm.executor import run_map
from trainforge.sim.dsm.figures import _training_point


def test_bad_workload_exits_2_and_writes_nothing(tmp_path, capsys):
    bad = tmp_path / "net.json"
    bad.write_text(json.dumps({"layers": [{"name": "convX", "kind": "conv", "n_in": 3, "n_out": -1}]}))
    assert main(["dsm", "explore", str(bad)]) == 2
    assert "convX" in capsys.readouterr().err


def test_bad_config_exits_2(tmp_path, capsys):
    config = tmp_path / "arch.json"
    config.write_text(json.dumps({"core": {"scratchpad_bw": -5}}))
    assert main(["dsm", "explore", "vgg16", "--config", str(config)]) == 2
    assert "scratchpad_bw" in capsys.readouterr().err


def test_yaml_without_pyyaml_is_a_usage_error(tmp_path, capsys):
    pytest.importorskip("json")
    try:
        import yaml  # noqa: F401
        pytest.skip("PyYAML installed")
    except ImportError:
        pass
    path = tmp_path / "net.yaml"
    path.write_text("layers: []\n")
    assert main(["dsm", "explore", str(path)]) == 2
    assert "PyYAML" in capsys.readouterr().err


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
                                   dashboard_address=None) as cluster:
        remote = run_map(_training_point, items, cluster.scheduler_address.replace("tcp://", "dask://"))
    assert [p["cycles"] for p in remote] == [p["cycles"] for p in local]
