"""Executors for sweeps: serial, local process pool, or a Dask cluster (optional extra)."""
from concurrent.futures import ProcessPoolExecutor
import os

from trainforge.errors import UsageError
from trainforge.progress import progress


#: Seconds to wait for a Dask scheduler before the sweep gives up with one line.
CONNECT_TIMEOUT_S = 10


def check_executor(executor):
    """Return ``executor`` if it names an executor, else raise :class:`~trainforge.errors.UsageError`.

    Checked before any work, so that a typo fails at once.
    """
    if executor in ("serial", "local"):
        return executor
    if executor.startswith(("dask://", "tcp://")) and executor.split("://", 1)[1]:
        return executor
    raise UsageError(f"--executor {executor!r} is not one of serial, local, dask://HOST:PORT")


def run_map(function, items, executor="local"):
    """Apply ``function`` to every item and return the results in order.

    Parameters
    ----------
    function : callable
        A picklable top-level function.
    items : list
    executor : str
        ``serial``, ``local`` (process pool, serial when one CPU or one item)
        or ``dask://HOST:PORT`` (needs the ``dask`` extra: ``distributed``).

    Raises
    ------
    trainforge.errors.UsageError
        An unknown executor, or ``dask://`` without Dask installed.
    """
    items = list(items)
    check_executor(executor)
    if executor == "serial" or (executor == "local" and (len(items) < 2 or (os.cpu_count() or 1) < 2)):
        return [function(item) for item in progress(items, "sweep points", unit="point")]
    if executor == "local":
        pool = ProcessPoolExecutor(max_workers=min(len(items), os.cpu_count() or 1))
        try:
            results = list(progress(pool.map(function, items), "sweep points", total=len(items), unit="point"))
        except BaseException:
            # Ctrl-C (or a failing point): drop the queued points instead of computing them all first.
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown()
        return results
    if executor.startswith("dask://") or executor.startswith("tcp://"):
        try:
            from distributed import Client
        except ImportError:
            raise UsageError(f"--executor {executor}: Dask is not installed; install the 'dask' extra "
                                "(pip install 'dask[distributed]') or use --executor local") from None
        address = "tcp://" + executor.split("://", 1)[1]
        try:
            client = Client(address, timeout=CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError) as error:
            raise UsageError(f"--executor {executor}: no Dask scheduler answered at {address} within "
                             f"{CONNECT_TIMEOUT_S} s ({type(error).__name__})") from None
        with client:
            futures = client.map(function, items, pure=False)
            return [future.result() for future in progress(futures, "sweep points (Dask)", unit="point")]
