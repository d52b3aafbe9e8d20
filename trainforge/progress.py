"""Progress bars on stderr for work that takes more than a few seconds.

:func:`progress` wraps an iterable in a ``tqdm`` bar on stderr. It stays
silent when stderr is not a terminal (CI, a pipe, a log file) or when the
command line was given ``--quiet`` (:func:`set_quiet`), so reports and
piped output never carry progress text. Every layer may use it.
"""
import sys

__all__ = ["progress", "set_quiet", "enabled"]

_quiet = False


def set_quiet(quiet=True):
    """Silence (or allow again) every progress bar of this process."""
    global _quiet
    _quiet = bool(quiet)


def enabled():
    """Whether bars are drawn: stderr is a terminal and ``--quiet`` was not given."""
    stream = sys.stderr
    return not _quiet and hasattr(stream, "isatty") and stream.isatty()


def progress(iterable, description, total=None, unit="item"):
    """``iterable`` with a progress bar labelled ``description`` (a plain iterator when bars are off)."""
    if not enabled():
        return iterable
    from tqdm import tqdm

    return tqdm(iterable, desc=description, total=total, unit=unit, file=sys.stderr, leave=False,
                dynamic_ncols=True)
