"""Progress bars: on a terminal's stderr, never when stderr is not a terminal or with --quiet."""
import io
import sys

from trainforge import progress


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_bar_on_a_terminal(monkeypatch):
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    progress.set_quiet(False)
    assert list(progress.progress(range(3), "counting", unit="step")) == [0, 1, 2]
    assert "counting:" in terminal.getvalue() and "/3 [" in terminal.getvalue()


def test_quiet_and_not_a_terminal(monkeypatch):
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    progress.set_quiet(True)
    try:
        assert list(progress.progress(range(3), "counting")) == [0, 1, 2]
    finally:
        progress.set_quiet(False)
    assert terminal.getvalue() == ""
    plain = io.StringIO()
    monkeypatch.setattr(sys, "stderr", plain)
    assert list(progress.progress(range(3), "counting")) == [0, 1, 2]
    assert plain.getvalue() == ""
