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
import importlib.util
import os
import re

from ..errors import KKMeansError, UsageError
from ..memory import format_bytes
from . import require_dask

#: Seconds to wait for a scheduler to answer and for its first worker (the environment
#: variable ``KKMEANS_CONNECT_TIMEOUT`` overrides it).
CONNECT_TIMEOUT = 10.0
LOOPBACK = "127.0.0.1"


class ClusterError(KKMeansError):
    """The cluster cannot be started or reached (exit 1)."""


def parse_local(spec):
    """``local`` or ``local:N`` → N worker processes (``local``: one per core, at most 4)."""
    m = re.fullmatch(r"local(?::([0-9]+))?", str(spec).strip())
    if not m:
        raise UsageError(f"--cluster {str(spec)!r}: expected local or local:N (N worker "
                         f"processes on this machine); for a running cluster use --scheduler")
    if m.group(1) is None:
        return max(1, min(4, os.cpu_count() or 1))
    n = int(m.group(1))
    if n < 1:
        raise UsageError(f"--cluster {spec!r}: needs at least one worker")
    if n > MAX_LOCAL_WORKERS:
        raise UsageError(f"--cluster {spec!r}: at most {MAX_LOCAL_WORKERS} worker processes "
                         f"on one machine")
    return n


#: Worker processes of ``--cluster local:N`` at most.
MAX_LOCAL_WORKERS = 256
#: Schemes of a scheduler that another process can reach (``inproc://`` cannot).
SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")
_ADDRESS = re.compile(r"(?:(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://)?"
                      r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]*)"
                      r"(?::(?P<port>[^/]*))?(?P<rest>/.*)?")


def parse_scheduler(text, option="--scheduler"):
    """What ``--scheduler`` names: ``("address", "tcp://HOST:PORT")`` or ``("file", PATH)``
    (a scheduler file). A malformed address is a usage error at once, before Dask is
    imported: a missing or non-numeric port, a port out of 1..65535, no host, a scheme another
    process cannot reach (``inproc://``) or a web address (``http://``, the dashboard's)."""
    text = str(text).strip()
    if not text:
        raise UsageError(f"{option} '': empty; expected tcp://HOST:PORT or a scheduler file")
    has_scheme = "://" in text
    if not has_scheme and os.path.lexists(text):
        if os.path.isdir(text):
            raise UsageError(f"{option} {text}: is a folder, not a scheduler file (the JSON "
                             f"file 'dask scheduler --scheduler-file' writes)")
        return "file", text
    if not has_scheme and not re.fullmatch(r"[^/:]*:[^/]*", text):
        raise UsageError(f"{option} {text!r}: expected tcp://HOST:PORT or a scheduler file "
                         f"(no such file)")
    m = _ADDRESS.fullmatch(text)
    shown = f"{option} {text!r}"
    scheme = (m.group("scheme") or "tcp").lower() if m else None
    if m is None:
        raise UsageError(f"{shown}: expected tcp://HOST:PORT")
    if scheme in ("http", "https"):
        raise UsageError(f"{shown}: is a web address (the dashboard's?); the scheduler "
                         f"listens on tcp://HOST:PORT (port 8786 by default)")
    if scheme == "inproc":
        raise UsageError(f"{shown}: an inproc:// scheduler lives inside another process; "
                         f"give its tcp://HOST:PORT")
    if scheme not in SCHEMES:
        raise UsageError(f"{shown}: unknown scheme {scheme}://; expected "
                         f"{', '.join(s + '://' for s in SCHEMES)}")
    if scheme == "ucx" and importlib.util.find_spec("ucp") is None:
        raise UsageError(f"{shown}: a ucx:// scheduler needs the ucx-py package (import "
                         f"ucp), which is not installed; use its tcp:// address")
    if m.group("rest") not in (None, "", "/"):
        raise UsageError(f"{shown}: expected {scheme}://HOST:PORT, without a path")
    host = m.group("host")
    if not host:
        raise UsageError(f"{shown}: no host; expected {scheme}://HOST:PORT")
    if re.fullmatch(r"[0-9.]+", host) and not _is_ipv4(host):
        # A name of digits and dots is read as an IPv4 address: 256.1.1.1 or 1.2.3.4.5
        # would only wait for the connect timeout.
        raise UsageError(f"{shown}: host {host!r} is not an IPv4 address (four numbers "
                         f"0..255 joined by dots)")
    if scheme == "tls" and not _tls_configured():
        raise UsageError(f"{shown}: a tls:// scheduler needs a CA file and a client "
                         f"certificate, and Dask's configuration names none (set "
                         f"distributed.comm.tls.ca-file and distributed.comm.tls.client.cert, "
                         f"e.g. DASK_DISTRIBUTED__COMM__TLS__CA_FILE); or use its tcp:// "
                         f"address")
    port = m.group("port")
    if port is None or port == "":
        raise UsageError(f"{shown}: no port; expected {scheme}://{m.group('host')}:PORT "
                         f"(8786 by default)")
    if not (port.isascii() and port.isdigit()) or not 1 <= int(port) <= 65535:
        raise UsageError(f"{shown}: port {port!r} is not a number in 1..65535")
    return "address", f"{scheme}://{m.group('host')}:{int(port)}"


def _is_ipv4(host):
    """Whether ``host`` is an IPv4 address as the system's resolver reads one (``inet_aton``:
    four numbers 0..255, or the short forms such as 127.1)."""
    import socket

    try:
        socket.inet_aton(host)
    except OSError:
        return False
    return True


def _tls_configured():
    """Whether Dask's configuration (its YAML files or ``DASK_*`` variables) names the CA file
    and the client certificate a tls:// connection needs (``distributed.security.Security``
    builds no TLS context without both). Without Dask installed: True, so that the missing
    package is what is reported."""
    try:
        import dask.config
    except ImportError:
        return True
    # dask.config.get takes a key in either spelling (ca-file, or ca_file as DASK_* variables
    # give it)
    return bool(dask.config.get("distributed.comm.tls.ca-file", default=None)
                and dask.config.get("distributed.comm.tls.client.cert", default=None))


def _scheduler_address(scheduler):
    """The address of ``scheduler``: ``tcp://HOST:PORT`` as given, or read from a scheduler
    file (JSON with an ``address``, checked as an address given on the command line)."""
    kind, value = parse_scheduler(scheduler)
    if kind == "address":
        return value, None
    try:
        with open(value, encoding="utf-8") as f:
            address = json.load(f)["address"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        # a file that cannot work, as an address that cannot: a usage error at once
        raise UsageError(f"--scheduler {scheduler}: not a Dask scheduler file "
                         f"({type(exc).__name__}: {exc})") from None
    try:
        kind, address = parse_scheduler(address, option="address")
    except UsageError as exc:
        raise UsageError(f"--scheduler {scheduler}: the scheduler file's {exc}") from None
    if kind != "address":
        raise UsageError(f"--scheduler {scheduler}: the scheduler file's address "
                         f"{address!r} is not tcp://HOST:PORT")
    return address, value


@contextlib.contextmanager
def open_client(cluster=None, scheduler=None, *, worker_memory=None, timeout=None,
                report=None):
    """A ``distributed.Client`` for the run; closes what it started.

    Every argument is checked before Dask is imported (a malformed address, a worker memory
    too small for a worker process: usage errors at once). While the client is open Dask is
    quiet (:func:`quiet_dask`), and a failure of the cluster itself during the run (the
    scheduler gone, a task cancelled with it, a worker killed again and again) is one
    :class:`ClusterError`.

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
    if cluster is not None and scheduler is not None and isinstance(cluster, str):
        raise UsageError("give --cluster local[:N] or --scheduler ADDRESS, not both")
    if scheduler is not None:
        _scheduler_address(scheduler)   # a scheduler file read too: its address checked
    elif isinstance(cluster, str):
        parse_local(cluster)
        check_worker_memory(worker_memory)
    if timeout is None:
        timeout = connect_timeout()
    require_dask()
    from distributed import Client

    if isinstance(cluster, Client):
        with _cluster_failures(cluster):
            yield cluster
        return
    with quiet_dask():
        if scheduler is not None:
            client = _connect(scheduler, timeout)
            try:
                _report_dashboard(client, report)
                with _cluster_failures(client):
                    yield client
            finally:
                _close(client)
            return
        n = parse_local(cluster)
        local = _start_local(n, worker_memory)
        try:
            client = Client(local, set_as_default=False)
        except Exception as exc:  # noqa: BLE001
            _close(local)
            raise ClusterError(f"cannot connect to the local Dask cluster: {exc}") from None
        try:
            _report_dashboard(client, report)
            with _cluster_failures(client, worker_memory):
                yield client
        finally:
            _close(client)
            _close(local)


def _close(thing):
    """Close a client or cluster; what it says while closing after a failure or a signal
    (its connections gone, its tasks cancelled) is no news."""
    try:
        thing.close()
    except Exception:  # noqa: BLE001 -- already broken: nothing more to report
        pass


@contextlib.contextmanager
def _cluster_failures(client, worker_memory=None):
    """Dask's own failures during a run as one :class:`ClusterError` (exit 1)."""
    from distributed.client import FutureCancelledError
    from distributed.comm.core import CommClosedError

    try:
        yield
    except KKMeansError:
        raise
    except Exception as exc:  # noqa: BLE001 -- sorted below
        try:
            from distributed.scheduler import KilledWorker
        except ImportError:  # pragma: no cover - every distributed has it
            KilledWorker = ()  # noqa: N806
        where = _where(client)
        if isinstance(exc, KilledWorker):
            memory = ("" if worker_memory is None else
                      f" (out of memory? each worker has --worker-memory "
                      f"{format_bytes(worker_memory)})")
            raise ClusterError(f"a worker of the Dask cluster{where} died each time it ran a "
                               f"task{memory}") from None
        if isinstance(exc, (FutureCancelledError, CommClosedError, ConnectionError)) or \
                type(exc).__name__ == "AllExit":
            raise ClusterError(f"the Dask cluster{where} went away during the run (the "
                               f"connection to its scheduler was lost)") from None
        if isinstance(exc, TimeoutError):
            raise ClusterError(f"the Dask cluster{where} stopped answering during the "
                               f"run") from None
        raise


def _where(client):
    try:
        return f" at {client.scheduler.address}"
    except Exception:  # noqa: BLE001
        return ""


@contextlib.contextmanager
def quiet_dask():
    """Dask says nothing on stderr while the block runs: its log records (a task that failed
    on a worker, connections closed after Ctrl-C, 'Task exception was never retrieved'), its
    warnings and the exceptions its objects raise when collected; kkmeans reports what went
    wrong in one line. ``KKMEANS_DEBUG=1`` keeps them."""
    import gc
    import logging
    import sys
    import warnings

    if os.environ.get("KKMEANS_DEBUG", "") not in ("", "0"):
        yield
        return
    previous_disable = logging.root.manager.disable
    previous_hook = sys.unraisablehook
    logging.disable(logging.CRITICAL)
    sys.unraisablehook = lambda unraisable: None
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", module="distributed")
            warnings.filterwarnings("ignore", module="tornado")
            yield
    finally:
        gc.collect()  # clients half made by a failed connection go now, quietly
        sys.unraisablehook = previous_hook
        logging.disable(previous_disable)


def connect_timeout():
    """Seconds to wait for a scheduler (``KKMEANS_CONNECT_TIMEOUT``, default
    ``CONNECT_TIMEOUT``); anything but a positive finite number is a usage error."""
    text = os.environ.get("KKMEANS_CONNECT_TIMEOUT", "").strip()
    if not text:
        return CONNECT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (value > 0 and value < 1e9):
        raise UsageError(f"KKMEANS_CONNECT_TIMEOUT={text!r}: expected a positive number of "
                         f"seconds (at most 1e9)")
    return value


def _start_local(n_workers, worker_memory):
    import logging

    from distributed import LocalCluster

    # The dashboard always listens (it asks for bokeh when that is missing): loopback, on a
    # free port (8787 may be taken by another cluster on this machine).
    dashboard = f"{LOOPBACK}:0"
    # The worker processes start with /dev/null as their stderr: what they say (a traceback
    # when Ctrl-C reaches them while they start, a task that failed) is no news, kkmeans
    # reports a failure in one line. Once started they ignore Ctrl-C and a terminal's hang-up
    # (worker_setup, also after a restart); this process stops them.
    try:
        with _workers_stderr_to_null(), _terminal_signals_blocked():
            return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                host=LOOPBACK, dashboard_address=dashboard,
                                memory_limit=worker_memory if worker_memory else "auto",
                                silence_logs=logging.CRITICAL,
                                preload=["kkmeans_cli.distributed.worker_setup"])
    except Exception as exc:  # noqa: BLE001 -- any start failure is one line
        raise ClusterError(f"cannot start a local Dask cluster of {n_workers} workers on "
                           f"{LOOPBACK}: {type(exc).__name__}: {exc}") from None


@contextlib.contextmanager
def _terminal_signals_blocked():
    """SIGHUP and SIGQUIT blocked in the threads the block starts (Dask's event loop) and so
    in every process they start, then or later: the workers (also after a restart) and
    multiprocessing's resource tracker. A terminal's hang-up or Ctrl-\\ goes to the whole
    process group; the tracker ignores only SIGINT and SIGTERM, and, killed, was started
    again and printed a traceback for each shared-memory name it did not know. This process
    (its main thread) still gets them, ends the command and stops the cluster."""
    import signal

    wanted = {getattr(signal, name) for name in ("SIGHUP", "SIGQUIT") if hasattr(signal, name)}
    if not wanted or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, wanted)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextlib.contextmanager
def _workers_stderr_to_null():
    """Descriptor 2 points at /dev/null while the block starts worker processes (they keep
    it), then back at this process's stderr; ``KKMEANS_DEBUG=1`` leaves it alone."""
    import sys

    if os.environ.get("KKMEANS_DEBUG", "") not in ("", "0"):
        yield
        return
    try:
        sys.stderr.flush()
        saved = os.dup(2)
        null = os.open(os.devnull, os.O_WRONLY)
    except (OSError, ValueError, AttributeError):
        yield
        return
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


#: Memory of a worker process before it holds any data: Python with NumPy, Dask and the
#: engine imported (about 90 MB resident, measured), doubled because Dask pauses a worker at
#: 80% of its memory limit and restarts it at 95%.
WORKER_PROCESS_BYTES = 192 * 2**20


def check_worker_memory(worker_memory, chunk_bytes=0, rows=None):
    """Refuse (usage error) a ``--worker-memory`` below what a worker needs: its process and,
    once DATA's chunks are known, twice one chunk (its rows, features and state). Below it,
    Dask restarts the worker over and over and the run never ends."""
    if worker_memory is None:
        return
    need = WORKER_PROCESS_BYTES + 2 * int(chunk_bytes)
    if worker_memory < need:
        what = (f"its process ({format_bytes(WORKER_PROCESS_BYTES)})" if not chunk_bytes else
                f"its process ({format_bytes(WORKER_PROCESS_BYTES)}) and twice one chunk of "
                f"{rows:,} rows ({format_bytes(chunk_bytes)}: the rows, their Nyström features "
                f"and state)")
        hint = "" if not chunk_bytes else " or fewer rows per chunk (--chunk-rows)"
        raise UsageError(f"--worker-memory {format_bytes(worker_memory)}: a worker needs at "
                         f"least {format_bytes(need)}, {what}; give at least "
                         f"{format_bytes(need)}{hint}")


def _connect(scheduler, timeout):
    from distributed import Client

    address, path = _scheduler_address(scheduler)
    where = f"{address}" + (f" (from {path})" if path else "")
    try:
        client = Client(address, timeout=timeout, set_as_default=False)
    except Exception as exc:  # noqa: BLE001 -- OSError, TimeoutError, CommClosedError...
        reason = " ".join(str(exc).split()) or type(exc).__name__
        # named by its option, so that one a config set says so (io.config.origin_note)
        raise ClusterError(f"--scheduler: cannot reach the Dask scheduler at {where} within "
                           f"{timeout:g} s: {reason[:300]}") from None
    try:
        client.wait_for_workers(1, timeout=timeout)
    except Exception:  # noqa: BLE001
        _close(client)
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
