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


@pytest.mark.parametrize("argv,needle", [
    (["neurotrainer", "training", "--quick", "--epochs", "3"], "--quick sets --epochs itself"),
    (["neurotrainer", "training", "--quick", "--seeds", "2", "--epochs", "3"], "--quick sets --epochs and --seeds"),
    (["neurotrainer", "compile", "--layer", "fc_ff", "--dims", "h=100000000,k=6,n=1"], "would hold 600,000,000"),
    (["neurotrainer", "compile", "--layer", "conv_ff", "--dims", "n=4,d=2,h=100000000,w=8,o=3,hk=3,wk=3"],
     "the input tensor"),
    (["neurotrainer", "compile", "--layer", "fc_ff", "--dims", "h=0,k=6,n=1"], "at least 1"),
])
def test_neurotrainer_refusals(argv, needle, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _refused(argv, capsys, needle) < 30
    assert not any(tmp_path.iterdir())


def _actions(parser, path=("trainforge",)):
    """Every (command path, option) of the parser tree."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _actions(sub, (*path, name))
        elif not isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            yield path, action


def test_every_option_has_help_text():
    from trainforge.cli import build_parser

    missing = [f"{' '.join(path)} {'/'.join(action.option_strings) or action.dest}"
               for path, action in _actions(build_parser()) if not action.help]
    assert not missing, "options without help text:\n" + "\n".join(missing)
