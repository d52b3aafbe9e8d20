"""Benchmark runner: median wall time of registered workloads, with the machine and the inputs.

Benchmarks are registered in the modules found by :func:`benchmark_modules`,
each with a dict ``BENCHMARKS`` mapping a name to either a zero-argument
callable or a ``(callable, inputs)`` pair, where ``inputs`` is a JSON-able
description of the workload. Nothing here asserts on time.
"""
import os
import platform
import statistics
import time

import numpy


def benchmark_modules():
    """Modules that define ``BENCHMARKS``: ``trainforge.golden.benchmarks``, ``trainforge.emit_benchmarks``
    and every family's ``benchmarks`` module under ``trainforge.golden``, ``trainforge.hw`` and ``trainforge.sim``."""
    from . import discover, emit_benchmarks
    from .golden import benchmarks as golden_benchmarks

    return [golden_benchmarks, emit_benchmarks,
            *(module for package in ("trainforge.golden", "trainforge.hw", "trainforge.sim")
              for module in discover.family_modules(package, "benchmarks"))]


def collect():
    """Every registered benchmark: name to ``(callable, inputs)``."""
    benchmarks = {}
    for module in benchmark_modules():
        for name, entry in module.BENCHMARKS.items():
            function, inputs = entry if isinstance(entry, tuple) else (entry, None)
            if inputs is None:
                inputs = (function.__doc__ or name).strip().splitlines()[0]
            benchmarks[name] = (function, inputs)
    return benchmarks


def machine():
    """Facts about the machine that a timing depends on."""
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as handle:
            cpu = next(line.split(":", 1)[1].strip() for line in handle if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "numpy": numpy.__version__, "system": platform.platform()}


def run_benchmarks(names=(), repeat=5):
    """Time each benchmark ``repeat`` times (after one warm-up run) and report the median."""
    from .errors import UsageError

    if repeat < 1:
        raise UsageError(f"--repeat = {repeat} is invalid; allowed: an integer >= 1")
    available = collect()
    unknown = [name for name in names if name not in available]
    if unknown:
        raise UsageError(f"unknown benchmark {unknown[0]!r}; known: {', '.join(available)}")
    from .progress import progress

    results = []
    for name in progress(list(names or available), "benchmarks", unit="benchmark"):
        function, inputs = available[name]
        function()
        seconds = []
        for _ in range(repeat):
            start = time.perf_counter()
            function()
            seconds.append(time.perf_counter() - start)
        results.append({"name": name, "inputs": inputs, "runs": repeat,
                        "median_s": statistics.median(seconds), "min_s": min(seconds),
                        "max_s": max(seconds)})
        print(f"{name:<40} median {statistics.median(seconds) * 1e3:10.2f} ms  ({inputs})")
    return {"machine": machine(), "benchmarks": results}
