"""cocotb 1.9 warns that its Python runners are experimental when ``cocotb.runner`` is first imported.

``trainforge.simulation`` imports it under a filter, so that every run's output is free of that warning.
"""

import subprocess
import sys


def test_getting_a_runner_raises_no_experimental_warning():
    # A fresh interpreter, so that cocotb.runner is imported for the first time by the code under test;
    # -W error turns the warning into an exception, which the import outside the filter raised (tried).
    script = "from trainforge.simulation import _runner; print(type(_runner('icarus')).__name__)"
    run = subprocess.run([sys.executable, "-W", "error::UserWarning", "-c", script],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "Icarus"
