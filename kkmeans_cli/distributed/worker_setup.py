"""Run in each worker process of a ``--cluster local[:N]`` when it starts (a Dask preload, also
after a restart): the worker ignores Ctrl-C, Ctrl-\\ and a terminal's hang-up, which the
kkmeans process that owns it handles (it stops the cluster), and logs nothing (kkmeans reports
a failed task in one line); ``KKMEANS_DEBUG=1`` keeps its logs."""
import logging
import os
import signal


def _setup():
    for name in ("SIGINT", "SIGHUP", "SIGQUIT"):
        signum = getattr(signal, name, None)
        if signum is None:
            continue
        try:
            signal.signal(signum, signal.SIG_IGN)
        except ValueError:  # not the main thread of the worker process
            pass
    if os.environ.get("KKMEANS_DEBUG", "") in ("", "0"):
        logging.disable(logging.CRITICAL)


_setup()


def dask_setup(worker):
    """Dask's preload hook (the work is done on import)."""
