"""Where the work runs: a ``LocalCluster`` of worker processes on the loopback interface
(``--cluster local[:N]``), or a running scheduler (``--scheduler tcp://HOST:PORT`` or a
scheduler file written by ``dask scheduler --scheduler-file``).

A local cluster listens on 127.0.0.1 only, never on another interface; its dashboard is on
127.0.0.1 too, on a free port (its pages need bokeh).
Every failure to start or reach the cluster is one ``KKMeansError`` (exit 1) raised before any
output file is written.
"""
import contextlib
import json
import os
import re

from ..errors import KKMeansError, UsageError
from . import require_dask

#: Seconds to wait for a scheduler to answer and for its first worker (the environment
#: variable ``KKMEANS_CONNECT_TIMEOUT`` overrides it).
CONNECT_TIMEOUT = 10.0
LOOPBACK = "127.0.0.1"


class ClusterError(KKMeansError):
    """The cluster cannot be started or reached (exit 1)."""


def parse_local(spec):
    """``local`` or ``local:N`` → N worker processes (``local``: one per core, at most 4)."""
    m = re.fullmatch(r"local(?::(\d+))?", str(spec).strip())
    if not m:
        raise UsageError(f"--cluster {spec!r}: expected local or local:N (N worker "
                         f"processes on this machine); for a running cluster use --scheduler")
    if m.group(1) is None:
        return max(1, min(4, os.cpu_count() or 1))
    n = int(m.group(1))
    if n < 1:
        raise UsageError(f"--cluster {spec!r}: needs at least one worker")
    return n


def _scheduler_address(scheduler):
    """The address of ``scheduler``: ``tcp://HOST:PORT`` as given, or read from a scheduler
    file (JSON with an ``address``)."""
    if re.match(r"^[a-z0-9+]+://", scheduler):
        return scheduler, None
    if os.path.isfile(scheduler):
        try:
            with open(scheduler, encoding="utf-8") as f:
                address = json.load(f)["address"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ClusterError(f"--scheduler {scheduler}: not a Dask scheduler file "
                               f"({type(exc).__name__}: {exc})") from None
        return address, scheduler
    raise UsageError(f"--scheduler {scheduler!r}: expected tcp://HOST:PORT or a scheduler "
                     f"file (no such file)")


@contextlib.contextmanager
def open_client(cluster=None, scheduler=None, *, worker_memory=None, timeout=None,
                report=None):
    """A ``distributed.Client`` for the run; closes what it started.

    Parameters
    ----------
    cluster : str, Client or None
        ``local[:N]``; or a ``Client`` to use as it is (not closed here).
    scheduler : str or None
        ``tcp://HOST:PORT`` or a scheduler file.
    worker_memory : int or None
        Bytes per worker of a local cluster (Dask's ``memory_limit``; None: RAM / N).
    report : callable, optional
        Called with one line for people (the dashboard address).
    """
    require_dask()
    from distributed import Client

    if timeout is None:
        timeout = _timeout()

    if isinstance(cluster, Client):
        yield cluster
        return
    if cluster is not None and scheduler is not None:
        raise UsageError("give --cluster local[:N] or --scheduler ADDRESS, not both")
    if scheduler is not None:
        client = _connect(scheduler, timeout)
        try:
            _report_dashboard(client, report)
            yield client
        finally:
            client.close()
        return
    n = parse_local(cluster)
    local = _start_local(n, worker_memory)
    try:
        client = Client(local, set_as_default=False)
    except Exception as exc:  # noqa: BLE001
        local.close()
        raise ClusterError(f"cannot connect to the local Dask cluster: {exc}") from None
    try:
        _report_dashboard(client, report)
        yield client
    finally:
        client.close()
        local.close()


def _timeout():
    text = os.environ.get("KKMEANS_CONNECT_TIMEOUT", "")
    try:
        value = float(text) if text else CONNECT_TIMEOUT
    except ValueError:
        raise UsageError(f"KKMEANS_CONNECT_TIMEOUT={text!r} is not a number of seconds") \
            from None
    return value if value > 0 else CONNECT_TIMEOUT


def _start_local(n_workers, worker_memory):
    import logging

    from distributed import LocalCluster

    # The dashboard always listens (it asks for bokeh when that is missing): loopback, on a
    # free port (8787 may be taken by another cluster on this machine).
    dashboard = f"{LOOPBACK}:0"
    logging.getLogger("distributed").setLevel(logging.ERROR)
    try:
        return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                            host=LOOPBACK, dashboard_address=dashboard,
                            memory_limit=worker_memory if worker_memory else "auto",
                            silence_logs=logging.ERROR)
    except Exception as exc:  # noqa: BLE001 -- any start failure is one line
        raise ClusterError(f"cannot start a local Dask cluster of {n_workers} workers on "
                           f"{LOOPBACK}: {type(exc).__name__}: {exc}") from None


def _connect(scheduler, timeout):
    from distributed import Client

    address, path = _scheduler_address(scheduler)
    where = f"{address}" + (f" (from {path})" if path else "")
    try:
        client = Client(address, timeout=timeout, set_as_default=False)
    except Exception as exc:  # noqa: BLE001 -- OSError, TimeoutError, CommClosedError...
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise ClusterError(f"cannot reach the Dask scheduler at {where} within "
                           f"{timeout:g} s: {reason}") from None
    try:
        client.wait_for_workers(1, timeout=timeout)
    except Exception:  # noqa: BLE001
        client.close()
        raise ClusterError(f"the Dask scheduler at {where} has no worker (none joined within "
                           f"{timeout:g} s)") from None
    return client


def dashboard_link(client):
    """The dashboard address of the client's cluster, or None when it has none."""
    try:
        if "dashboard" not in client.scheduler_info().get("services", {}):
            return None
        return client.dashboard_link
    except Exception:  # noqa: BLE001
        return None


def _report_dashboard(client, report):
    if report is None:
        return
    link = dashboard_link(client)
    n = len(client.scheduler_info().get("workers", {}))
    report(f"Dask cluster {client.scheduler.address}: {n} worker(s)"
           + (f", dashboard {link}" if link else ", no dashboard"))


def worker_memory_total(client):
    """Σ of the workers' memory limits in bytes (0 when unknown)."""
    workers = client.scheduler_info().get("workers", {})
    return int(sum(w.get("memory_limit", 0) or 0 for w in workers.values()))
