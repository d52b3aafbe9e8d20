"""Every ``trainforge dsm sweep`` kind runs on a Dask cluster and gives the serial run's report."""
import json

import pytest

from trainforge.cli import main

#: Small instances of each sweep kind (one network, few values).
SWEEPS = {
    "training": ["--networks", "gnmt", "--values", "64"],
    "inference": ["--networks", "resnet50", "--values", "1,2"],
    "layers": ["--values", "256"],
    "scaling": ["--networks", "gnmt", "--values", "16,32"],
    "scratchpad": ["--networks", "vgg16", "--values", "1"],
}
#: Wall-clock fields and the provenance block (command line, start time), the only ones allowed to differ.
TIMING = {"seconds", "points_per_second", "provenance"}


@pytest.fixture(scope="module")
def scheduler():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp",
                                  dashboard_address=":0") as cluster:
        yield cluster


def _without_timing(value):
    if isinstance(value, dict):
        return {key: _without_timing(item) for key, item in value.items() if key not in TIMING}
    if isinstance(value, list):
        return [_without_timing(item) for item in value]
    return value


def _report(kind, executor, out):
    assert main(["dsm", "sweep", kind, *SWEEPS[kind], "--executor", executor, "--out", str(out)]) == 0
    (path,) = out.glob("*.json")
    return _without_timing(json.loads(path.read_text()))


@pytest.mark.parametrize("kind", sorted(SWEEPS))
def test_sweep_on_dask_equals_serial(kind, scheduler, tmp_path, capsys):
    serial = _report(kind, "serial", tmp_path / "serial")
    remote = _report(kind, scheduler.scheduler_address.replace("tcp://", "dask://"), tmp_path / "dask")
    # The points were computed by the cluster: its scheduler saw the point function (Dask drops the "_").
    point = {"inference": "inference_point", "layers": "layers_point"}.get(kind, "training_point")
    assert point in scheduler.scheduler.task_prefixes
    capsys.readouterr()
    assert remote == serial
    assert serial["points"] if kind != "layers" else serial["layers"]
