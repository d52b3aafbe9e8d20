"""The command line's one error path: one line and exit 2 for every user error, quiet on a closed pipe,
exit 130 on Ctrl-C, ``--out`` checked before the work, and outputs written atomically."""
import os
import signal
import subprocess
import sys
import time

import pytest

from trainforge import outputs
from trainforge.cli import main
from trainforge.errors import (ConfigError, ParameterError, ParameterTypeError, ProgramError, TrainforgeError,
                               UsageError)


def trainforge(*args, cwd, **options):
    return subprocess.run([sys.executable, "-m", "trainforge.cli", *args], cwd=cwd,
                          capture_output=True, text=True, **options)


def _one_line(stderr):
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in stderr, f"expected one line on stderr, got:\n{stderr}"
    return lines[0]


def test_every_error_class_has_the_one_base():
    for error in (ParameterError, ParameterTypeError, ConfigError, ProgramError, UsageError):
        assert issubclass(error, TrainforgeError)
    assert issubclass(ParameterError, ValueError) and issubclass(ParameterTypeError, TypeError)


@pytest.mark.parametrize("out,needle", [
    ("FILE/report.json", "is not a folder"),
    ("FOLDER", "it is a folder"),
    ("/proc/x/report.json", "report.json"),
    ("/proc/x", "cannot write /proc/x"),
    ("/etc/passwd", "will not replace /etc/passwd: it exists and is not a JSON report"),
    ("FILE", "will not replace FILE: it exists and is not a JSON report"),
])
def test_unwritable_out_is_one_line_exit_2_before_any_work(tmp_path, out, needle):
    (tmp_path / "FILE").write_text("a file, not a folder\n")
    (tmp_path / "FOLDER").mkdir()
    started = time.monotonic()
    result = trainforge("bench", "--repeat", "50", "--out", out, cwd=tmp_path)
    assert result.returncode == 2
    assert needle in _one_line(result.stderr)
    assert time.monotonic() - started < 60, "the benchmarks ran before the output path was checked"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["FILE", "FOLDER"]


@pytest.mark.parametrize("manifest,needle", [
    ("not json at all", "is not a trainforge manifest"),
    ('{"blocks": 3}', "is not a trainforge manifest"),
    ('{"blocks": [{"file": "x.v"}]}', "is not a trainforge manifest"),
    ("[1, 2]", "is not a trainforge manifest"),
    (None, "manifest.json"),
])
def test_bad_manifest_is_one_line_and_nothing_written(tmp_path, manifest, needle):
    out = tmp_path / "verilog"
    out.mkdir()
    if manifest is None:
        (out / "manifest.json").mkdir()
    else:
        (out / "manifest.json").write_text(manifest)
    before = sorted(path.name for path in out.iterdir())
    result = trainforge("verilog", "dense_pe", "--out", str(out), cwd=tmp_path)
    assert result.returncode == 2
    assert needle in _one_line(result.stderr)
    assert sorted(path.name for path in out.iterdir()) == before, "a file was written beside a bad manifest"


def test_verilog_out_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "taken").write_text("x\n")
    result = trainforge("verilog", "dense_pe", "--out", "taken", cwd=tmp_path)
    assert result.returncode == 2
    assert "is not a folder" in _one_line(result.stderr)


def test_an_os_error_during_the_work_is_one_line(tmp_path, capsys, monkeypatch):
    def fail(args):
        raise PermissionError(13, "Permission denied", str(tmp_path / "x.json"))

    import trainforge.hwflow as hwflow
    monkeypatch.setattr(hwflow, "cmd_list", fail)
    assert main(["list"]) == 2
    assert _one_line(capsys.readouterr().err) == f"trainforge list: {tmp_path / 'x.json'}: Permission denied"


def test_closed_pipe_exits_quietly(tmp_path):
    result = subprocess.run(f"'{sys.executable}' -m trainforge.cli list --json | head -c 1", shell=True,
                            cwd=tmp_path, capture_output=True, text=True, executable="/bin/bash")
    assert result.stdout == "{"
    assert result.stderr == "", result.stderr


def _default_sigint():
    """In the child: SIGINT's default action, as under a terminal. A shell starts background jobs with SIGINT
    ignored, and Python then installs no handler of its own, so a suite run with ``make test &`` would see the
    interrupt lost."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("argv", [
    ["bench", "--repeat", "1000"],                                                # DSM sweeps in a process pool
    ["hypar", "figures"],                                                         # numpy, in this process
])
def test_ctrl_c_is_one_line_and_exit_130(tmp_path, argv):
    """Ctrl-C as a terminal sends it: SIGINT to the whole process group, workers included."""
    process = subprocess.Popen([sys.executable, "-m", "trainforge.cli", *argv, "--out", str(tmp_path / "out.json")
                                if argv[0] == "bench" else str(tmp_path / "out")],
                               cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True, preexec_fn=_default_sigint)
    time.sleep(4)
    assert process.poll() is None, "the command ended before it could be interrupted"
    os.killpg(process.pid, signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert _one_line(stderr) == f"trainforge {argv[0]}: interrupted"
    written = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert not written, f"an interrupted command left {written}"


def test_write_is_atomic(tmp_path):
    target = tmp_path / "report.json"
    outputs.write_json(target, {"a": 1})
    assert target.read_text() == '{\n  "a": 1\n}\n'

    class Unserialisable:
        pass

    with pytest.raises(TypeError):
        outputs.write_json(target, {"a": Unserialisable()})
    assert target.read_text() == '{\n  "a": 1\n}\n', "a failed write changed the old file"
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    with pytest.raises(OSError):
        outputs.write_text(blocked, "x")
    assert sorted(os.listdir(tmp_path)) == ["blocked", "report.json"], "a temporary file was left behind"


def test_staged_writes_are_all_or_nothing(tmp_path):
    with outputs.staged():
        outputs.write_text(tmp_path / "a.txt", "a")
        outputs.write_json(tmp_path / "b.json", {"b": 1})
        assert not any(tmp_path.iterdir()), "a staged write reached the disk before the block ended"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.txt", "b.json"]
    with pytest.raises(KeyboardInterrupt):
        with outputs.staged():
            outputs.write_text(tmp_path / "c.txt", "c")
            raise KeyboardInterrupt
    assert not (tmp_path / "c.txt").exists(), "an interrupted block wrote its files"
