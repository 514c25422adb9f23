"""``kkmeans fit`` and ``kkmeans predict`` with ``--cluster`` or ``--scheduler``: the same
outputs as in one process (labels in input order, the model file, the report), with DATA
read by the workers and only summaries on the client. Labels are written chunk by chunk."""
import contextlib
import os
from types import SimpleNamespace

from .._options import PRECOMPUTED_KERNELS
from .._text import plural
from ..errors import (DataError, KKMeansError, TooFewDistinctPointsError, UsageError,
                      ValueRangeError)
from .inputs import columns_row, read_model_columns
from .options import check_graph_where

#: Options of the one-process route that need the data (or per-row files) on the client.
UNSUPPORTED = (("weights", None, "--weights"), ("plot", None, "--plot"),
               ("silhouette", False, "--silhouette"), ("scale", "none", "--scale"),
               ("with_data", False, "--with-data"))


def check_fit_options(opts):
    """Usage errors (exit 2) for options the cluster route does not run, before any work."""
    check_graph_where(opts)
    # before --approx: adding --approx nystroem would not help a kernel matrix (or a graph)
    if opts["kernel"] in PRECOMPUTED_KERNELS:
        raise UsageError(f"--kernel {opts['kernel']} cannot be used with a cluster: DATA would "
                         f"be an n×n matrix, and the cluster route computes kernel values from "
                         f"the data's rows (Nyström features); give the points with their "
                         f"kernel, or run without --cluster/--scheduler")
    if opts["approx"] != "nystroem":
        raise UsageError("--cluster and --scheduler run the Nyström route; add --approx "
                         "nystroem (exact kernel k-means needs n² kernel values and does not "
                         "distribute usefully)")
    for key, default, flag in UNSUPPORTED:
        if opts.get(key, default) not in (default,):
            raise UsageError(f"{flag} cannot be used with a cluster yet (it needs the data on "
                             f"the client); run without --cluster/--scheduler")
    if opts["init"] not in ("k-means++", "random", "spectral"):
        raise UsageError("--init PATH cannot be used with a cluster (the labels file would be "
                         "read on the client); use k-means++, random or spectral")
    if opts["refine"] == "hartigan":
        raise UsageError("--refine hartigan cannot be used with a cluster (single-point moves "
                         "are sequential); use --refine auto or none")
    if opts["missing"] != "error":
        raise UsageError("--missing drop cannot be used with a cluster; clean the data first")
    if opts["objective"] != "kmeans":
        raise UsageError(f"--objective {opts['objective']} cannot be used with a cluster (the "
                         f"normalized cut needs the kernel matrix); use --objective kmeans")
    check_where(opts)


def check_where(opts):
    """Where to run, checked before any work (and before Dask is imported): the --cluster
    and --scheduler values, not both, KKMEANS_CONNECT_TIMEOUT, a --worker-memory a
    worker process fits in, and DATA that the workers can read (not standard input)."""
    from ..distributed.cluster import (check_worker_memory, connect_timeout, parse_local,
                                       parse_scheduler)
    from ..distributed.readers import STDIN_REFUSED
    from ..io.readers import is_glob, split_hdf5_spec

    if opts.get("data") == "-":
        raise UsageError(STDIN_REFUSED)
    spec = opts.get("data")
    path = None if spec is None or is_glob(spec) else split_hdf5_spec(spec)[0]
    if path is not None and not os.path.exists(path):
        # the client reads DATA's header (distributed.readers.open_data): said before any
        # cluster is started or reached
        raise DataError(f"{path}: no such file")
    if opts.get("cluster") is not None and opts.get("scheduler") is not None:
        raise UsageError("give --cluster local[:N] or --scheduler ADDRESS, not both")
    if opts.get("scheduler") is not None:
        parse_scheduler(opts["scheduler"])
        connect_timeout()
    else:
        parse_local(opts["cluster"])
        check_worker_memory(opts.get("worker_memory"))


def _client(opts, reporter):
    import logging

    from ..distributed.cluster import open_client

    from .. import _streams

    if _streams.WHOLE_PROCESS and not opts.get("debug"):
        # What Dask says while this process ends (connections closed, tasks cancelled after
        # Ctrl-C, a cluster interrupted while it started, closed again at exit) is no news
        # either: kkmeans reports a failure in one line. (While the client is open,
        # cluster.quiet_dask silences it in any process.)
        import sys

        logging.disable(logging.CRITICAL)
        sys.unraisablehook = lambda unraisable: None
    return open_client(opts.get("cluster"), opts.get("scheduler"),
                       worker_memory=opts.get("worker_memory"), report=reporter.say)


def _data(client, opts, spec):
    from ..distributed.readers import open_data
    from .inputs import columns_list

    return open_data(client, spec, dataset=opts["dataset"],
                     columns=columns_list(opts["columns"]), header=opts["header"],
                     delimiter=opts["delimiter"], missing=opts["missing"])


def _check_chunk_memory(opts, data, k, rows):
    """A --worker-memory too small for one chunk of DATA (its rows, Nyström features and
    state) is refused before the fit (see ``cluster.check_worker_memory``)."""
    from ..engine.features import CHUNK_ROWS, default_rank
    from ..kernels.nystroem import resolve_landmarks
    from ..distributed.cluster import check_worker_memory

    if opts.get("worker_memory") is None or opts.get("cluster") is None:
        return
    rows = min(rows, data.n)
    m = resolve_landmarks(opts.get("landmarks"), data.n, k)
    s = default_rank(k, m) if opts.get("rank") is None else min(int(opts["rank"]), m)
    chunk = rows * (8 * data.d + 4 * s + 8 + 8 + 4) + min(rows, CHUNK_ROWS) * m * 8
    check_worker_memory(opts["worker_memory"], chunk, rows)


@contextlib.contextmanager
def _as_one_process(data):
    """The errors of a fit or predict on the workers said as in one process: a value out of
    range by DATA's row and column (numbered from 1, or the column's name), too few distinct
    points with the way out, another value error naming DATA."""
    try:
        yield
    except ValueRangeError as exc:
        column = data.columns[exc.column] if data.columns else exc.column + 1
        raise DataError(f"{data.source}: row {exc.row + 1}, column {column}: "
                        f"{exc.detail}") from None
    except TooFewDistinctPointsError as exc:
        raise DataError(f"{data.source}: {exc}; use a smaller -k") from None
    except KKMeansError:
        raise
    except ValueError as exc:
        raise DataError(f"{data.source}: {exc}") from exc


def _force(opts):
    """``--force`` (replace read-only outputs) where the command has it."""
    return {"force": True} if opts.get("force") else {}


class _Shape:
    def __init__(self, n, d):
        self.shape = (n, d)


def _dataset(data):
    """What the report and summary read of a ``DataSet``, without the rows."""
    import numpy as np

    return SimpleNamespace(X=_Shape(data.n, data.d), n_rows=data.n, n_dropped=0,
                           source=data.source, columns=data.columns,
                           kept=np.ones(0, dtype=bool))


def write_labels(client, futures, handle):
    """Labels of per-chunk futures, one per line, chunk by chunk, into ``handle``; returns
    the cluster sizes."""
    import numpy as np

    sizes = None
    for fut in futures:
        labels = np.asarray(client.gather(fut))
        counts = np.bincount(labels)
        sizes = counts if sizes is None else _add_counts(sizes, counts)
        handle.write("".join(f"{v}\n" for v in labels.tolist()).encode())
        del fut
    return sizes


def _add_counts(a, b):
    import numpy as np

    out = np.zeros(max(a.size, b.size), dtype=np.int64)
    out[:a.size] += a
    out[:b.size] += b
    return out


def fit_command(opts, reporter, model_path, params):
    """The body of ``kkmeans fit`` on a cluster (options merged and checked by the caller;
    ``params`` the estimator's keyword arguments)."""
    from ..io.outputs import format_labels
    from ..model.estimator import KernelKMeans
    from .report import fit_report, fit_summary, write_fit_results
    from ..io.scaling import Scaler
    from ..distributed.readers import chunk_rows

    check_fit_options(opts)
    k = opts["n_clusters"]
    estimator = KernelKMeans(**params)
    with _client(opts, reporter) as client:
        data = _data(client, opts, opts["data"])
        if k > data.n:
            raise DataError(f"{data.source}: k = {k} is larger than the number of rows "
                            f"({data.n}); use a smaller -k")
        rows = chunk_rows(data.d, opts.get("chunk_rows"))
        _check_chunk_memory(opts, data, k, rows)
        if opts.get("chunk_rows") or len(data.bounds) == 1 or not data.is_aligned():
            data = data.aligned(client, rows)
        estimator.cluster = client
        with reporter.engine_warnings(), \
                reporter.progress(f"fitting k = {k} on {data.source} (Dask)") as update:
            with _as_one_process(data):
                estimator.fit(data, progress=update)
        estimator.cluster = None   # the model keeps no client
        cluster = estimator.fit_stats_["cluster"]
    shown = _dataset(data)
    scaler = Scaler("none")
    summary = fit_summary(estimator, shown, model_path)
    summary["cluster"] = cluster
    report = fit_report(estimator, shown, scaler, model_path)
    report.insert(-2, ("cluster", f"Dask, {cluster['workers']} worker(s), "
                                  f"{cluster['chunks']} chunk(s); "
                                  f"{estimator.fit_stats_['storage']}"))
    extra = {"source": data.source, "columns": data.columns}
    stored = {key: value for key, value in opts.items() if key not in ("debug", "quiet")}
    write_fit_results(reporter, opts, estimator, scaler, summary=summary, report=report,
                      meta_options=stored, extra=extra, model_path=model_path,
                      labels=lambda: format_labels(estimator.labels_), **_force(opts))


def predict_command(opts, reporter, loaded):
    """The body of ``kkmeans predict`` on a cluster: labels in input order, chunk by chunk."""
    from ..io.outputs import AtomicOutputs
    from ..distributed.fit import predict_on_cluster

    if opts["distances"] is not None:
        raise UsageError("--distances cannot be used with a cluster yet (n × k values on the "
                         "client); run without --cluster/--scheduler")
    if opts["missing"] != "error":
        raise UsageError("--missing drop cannot be used with a cluster; clean the data first")
    if opts.get("with_data"):
        raise UsageError("--with-data cannot be used with a cluster yet (it needs the data on "
                         "the client); run without --cluster/--scheduler")
    check_where(opts)
    if loaded.params.get("approx", "none") != "nystroem":
        raise UsageError(f"{opts['model_path']}: predict on a cluster needs a Nyström model "
                         f"(fitted with --approx nystroem)")
    if loaded.scaler.method != "none":
        raise UsageError(f"{opts['model_path']}: the model scales its data (--scale "
                         f"{loaded.scaler.method}); predict on a cluster does not scale yet")

    expected = loaded.meta["n_features"]
    with _client(opts, reporter) as client:
        data, by_name = read_model_columns(opts, loaded.meta.get("columns"),
                                           lambda o: _data(client, o, o["data"]), reporter)
        if data.d != expected:
            raise DataError(f"{data.source}: has {plural(data.d, 'column')}, the model "
                            f"{opts['model_path']} expects {plural(expected, 'feature')}"
                            + (f"; pick {'it' if expected == 1 else 'them'} with --columns"
                               if data.d > expected else ""))
        with reporter.engine_warnings(), \
                reporter.progress(f"predicting {data.source} (Dask)"):
            with _as_one_process(data):
                futures = predict_on_cluster(loaded.predictor, data, client,
                                             rows=opts.get("chunk_rows"))
                # Chunk by chunk into the one commit of the command's outputs (standard
                # output included: nothing is printed before every chunk is done).
                with AtomicOutputs(**_force(opts)) as out:
                    sizes = write_labels(client, futures, out.open(opts["labels"], "labels"))
    import numpy as np

    k = loaded.params["n_clusters"]
    sizes = np.pad(sizes, (0, max(0, k - sizes.size)))
    reporter.table("kkmeans predict", [
        ("data", f"{data.source}: {data.n} rows"),
        ("model", f"{opts['model_path']}: {loaded.result.kernel.describe()}, k = {k}"),
        *columns_row(data, by_name),
        ("cluster", f"Dask, {len(data.bounds)} chunk(s)"),
        ("cluster sizes", ", ".join(str(int(s)) for s in sizes)),
    ])
