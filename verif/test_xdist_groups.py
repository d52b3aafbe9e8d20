"""``make test``'s ``--dist loadgroup`` keeps the tests of one ``xdist_group`` on one worker.

The suite relies on it for the session fixtures of grouped modules (``test_report_schemas``'s reports,
about 30 s to make): with pytest 9 and pytest-xdist 3.8 the marks were silently ignored and the fixture
was made on both workers.
"""
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("xdist")


def test_grouped_tests_run_on_one_worker(tmp_path):
    (tmp_path / "test_grouped.py").write_text(textwrap.dedent("""
        import os
        import pytest

        pytestmark = pytest.mark.xdist_group("one_worker")

        @pytest.mark.parametrize("index", range(8))
        def test_where(index):
            with open("workers.txt", "a") as workers:
                workers.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")

        @pytest.mark.parametrize("index", range(8))
        def test_slow_neighbour(index):
            pass
    """))
    result = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-q", "-p",
                             "no:cacheprovider", "test_grouped.py"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    workers = (tmp_path / "workers.txt").read_text().split()
    assert len(workers) == 8 and len(set(workers)) == 1, workers
