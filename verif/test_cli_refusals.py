"""Ignored or conflicting options are refused with one line and exit 2, before any work."""
import time

import pytest

from trainforge.cli import main


def _refused(argv, capsys, needle):
    started = time.monotonic()
    assert main(argv) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0], lines
    return time.monotonic() - started


@pytest.mark.parametrize("argv,needle", [
    (["dsm", "sweep", "layers", "--executor", "bogus"], "'sweep layers' is one exploration"),
    (["dsm", "sweep", "layers", "--executor", "local"], "'sweep layers' is one exploration"),
    (["dsm", "sweep", "training", "--executor", "bogus"], "--executor 'bogus' is not one of"),
    (["dsm", "sweep", "scaling", "--executor", "dask://"], "--executor 'dask://' is not one of"),
    (["caterpillar", "study", "--name", "sub/x"], "--name 'sub/x' is not a report name"),
    (["caterpillar", "study", "--name", ".hidden"], "--name '.hidden' is not a report name"),
])
def test_refused_before_the_work(argv, needle, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _refused(argv, capsys, needle) < 30, "the refusal came after the work"
    assert not any(tmp_path.iterdir()), "a refused command wrote something"


def test_unreachable_dask_scheduler_is_one_line(capsys, tmp_path, monkeypatch):
    pytest.importorskip("distributed")
    from trainforge.sim.dsm import executor

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(executor, "CONNECT_TIMEOUT_S", 1)
    _refused(["dsm", "sweep", "training", "--values", "256", "--executor", "dask://127.0.0.1:9"], capsys,
             "no Dask scheduler answered at tcp://127.0.0.1:9")
