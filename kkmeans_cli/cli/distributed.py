"""``kkmeans fit`` and ``kkmeans predict`` with ``--cluster`` or ``--scheduler``: the same
outputs as in one process (labels in input order, the model file, the report), with DATA
read by the workers and only summaries on the client. Labels are written chunk by chunk."""
import sys
from types import SimpleNamespace

import click

from ..errors import DataError, KKMeansError, UsageError

#: Options of the one-process route that need the data (or per-row files) on the client.
UNSUPPORTED = (("weights", None, "--weights"), ("plot", None, "--plot"),
               ("silhouette", False, "--silhouette"), ("scale", "none", "--scale"),
               ("with_data", False, "--with-data"))


def check_fit_options(opts):
    """Usage errors (exit 2) for options the cluster route does not run, before any work."""
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


def _client(opts, reporter):
    from ..distributed.cluster import open_client

    def report(line):
        if not reporter.quiet:
            reporter.console.print(line)

    return open_client(opts.get("cluster"), opts.get("scheduler"),
                       worker_memory=opts.get("worker_memory"), report=report)


def _data(client, opts, spec):
    from ..distributed.readers import open_data

    return open_data(client, spec, dataset=opts["dataset"], columns=opts["columns"],
                     header=opts["header"], delimiter=opts["delimiter"],
                     missing=opts["missing"])


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


def write_labels(client, futures, handle=None):
    """Labels of per-chunk futures, one per line, chunk by chunk (stdout when no handle);
    returns the cluster sizes."""
    import numpy as np

    sizes = None
    for fut in futures:
        labels = np.asarray(client.gather(fut))
        counts = np.bincount(labels)
        sizes = counts if sizes is None else _add_counts(sizes, counts)
        text = "".join(f"{v}\n" for v in labels.tolist())
        if handle is None:
            click.echo(text, nl=False)
        else:
            handle.write(text.encode())
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
        if opts.get("chunk_rows") or len(data.bounds) == 1 or not data.is_aligned():
            data = data.aligned(client, chunk_rows(data.d, opts.get("chunk_rows")))
        estimator.cluster = client
        with reporter.engine_warnings(), \
                reporter.progress(f"fitting k = {k} on {data.source} (Dask)") as update:
            try:
                estimator.fit(data, progress=update)
            except KKMeansError:
                raise
            except ValueError as exc:
                raise DataError(f"{data.source}: {exc}") from exc
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
    if loaded.params.get("approx", "none") != "nystroem":
        raise UsageError(f"{opts['model_path']}: predict on a cluster needs a Nyström model "
                         f"(fitted with --approx nystroem)")
    if loaded.scaler.method != "none":
        raise UsageError(f"{opts['model_path']}: the model scales its data (--scale "
                         f"{loaded.scaler.method}); predict on a cluster does not scale yet")
    expected = loaded.meta["n_features"]
    with _client(opts, reporter) as client:
        data = _data(client, opts, opts["data"])
        if data.d != expected:
            raise DataError(f"{data.source}: has {data.d} columns, the model "
                            f"{opts['model_path']} expects {expected} features"
                            + ("; pick them with --columns" if data.d > expected else ""))
        with reporter.engine_warnings(), \
                reporter.progress(f"predicting {data.source} (Dask)"):
            try:
                futures = predict_on_cluster(loaded.predictor, data, client,
                                             rows=opts.get("chunk_rows"))
                if opts["labels"] == "-":
                    # Nothing is printed before every chunk is done (an error leaves no
                    # partial output): wait for all, then stream them.
                    client.gather([client.submit(len, f, pure=False) for f in futures])
                    sizes = write_labels(client, futures)
                else:
                    with AtomicOutputs(**_force(opts)) as out:
                        sizes = write_labels(client, futures,
                                             out.open(opts["labels"], "labels"))
            except KKMeansError:
                raise
            except ValueError as exc:
                raise DataError(f"{data.source}: {exc}") from exc
    import numpy as np

    k = loaded.params["n_clusters"]
    sizes = np.pad(sizes, (0, max(0, k - sizes.size)))
    reporter.table("kkmeans predict", [
        ("data", f"{data.source}: {data.n} rows"),
        ("model", f"{opts['model_path']}: {loaded.result.kernel.describe()}, k = {k}"),
        ("cluster", f"Dask, {len(data.bounds)} chunk(s)"),
        ("cluster sizes", ", ".join(str(int(s)) for s in sizes)),
    ])
    sys.stdout.flush()
