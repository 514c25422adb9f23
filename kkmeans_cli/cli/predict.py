"""``kkmeans predict MODEL DATA``: labels (and distances) of new rows from a saved model."""

import contextlib
import io
import sys

import click

from .._text import plural
from ..errors import DataError, NoRowLeft, UsageError, ValueRangeError
from .inputs import (check_values, columns_row, input_paths, labels_text, read_input,
                     read_model_columns, stdin_open, where)
from .options import (Integer, OutputPath, cluster_options, data_options, effective_options, on_cluster,
                      run_options, warn_unused_options)


PREDICT_EPILOG = """\b
Examples:
  kkmeans predict model.npz new.csv | sort | uniq -c
  kkmeans predict model.npz new.npy --labels new-labels.txt --distances dist.csv
  kkmeans predict model.npz new.csv --with-data > new-labelled.csv
  kkmeans predict model.npz 'parts/*.csv' --labels labels.txt
"""


@click.command(epilog=PREDICT_EPILOG)
@click.argument("model_path", metavar="MODEL")
@click.argument("data")
@click.option("--labels", type=OutputPath(), default="-", show_default=True, metavar="PATH",
              help="Where the labels go (- is stdout).")
@click.option("--distances", type=OutputPath(), default=None, metavar="PATH",
              help="Write the n×k squared feature-space distances (.npy, else CSV); for "
                   "a knn model that kept its Gaussian mixture, each component's cost "
                   "-2 ln(w N(x)) instead.")
@click.option("--with-data", is_flag=True,
              help="Write each row of DATA followed by its label, as CSV (the columns used; "
                   "a header line, when DATA has one, ends in 'label').")
@click.option("--threads", type=Integer(min=1), default=None,
              help="OpenMP and BLAS threads  [default: all cores]")
@data_options
@cluster_options
@run_options
@click.pass_context
def predict(ctx, **_):
    """Label each row of DATA with the nearest cluster of MODEL.

    DATA needs the model's features; the model's scaling is applied. For a precomputed model
    DATA holds the kernel rows K(new, train), one column per training point; for a
    precomputed-distance model the distance rows D(new, train). A --psd-repair of the model is
    applied to these rows as it was to the training matrix.
    """
    opts = effective_options(ctx)
    import numpy as np

    from ..engine.threads import effective_n_threads
    from ..io.outputs import AtomicOutputs, check_outputs, write_matrix
    from ..model.model_file import load_model
    from ..model.predictor import nearest
    from .report import Reporter

    check_outputs([(opts["labels"], "labels", "--labels"),
                   (opts["distances"], "distances", "--distances")], opts["force"],
                  [(opts["model_path"], "MODEL")] + input_paths(opts))
    reporter = Reporter(opts["quiet"])
    warn_unused_options(opts, reporter)
    loaded = load_model(opts["model_path"])
    if opts["distances"] is not None and loaded.meta["kernel"] == "precomputed":
        raise UsageError(f"--distances: the distances to a precomputed model's centres need "
                         f"K(x, x) of each new point, which DATA's kernel rows K(new, train) "
                         f"do not hold; drop --distances (the labels need only the rows), or "
                         f"fit the points with their kernel (--kernel rbf, poly, ...) to get "
                         f"distances")
    graph = loaded.result.graph
    if graph is not None and graph.model is None:
        from ..model.predictor import no_graph_coordinates

        raise UsageError(f"{opts['model_path']}: {no_graph_coordinates()}")
    if graph is not None and on_cluster(opts):
        raise UsageError(f"{'--cluster' if opts.get('cluster') else '--scheduler'}: the "
                         f"{loaded.meta['kernel']} model {opts['model_path']} predicts in one "
                         f"process (a cluster predicts with --approx nystroem models)")
    if on_cluster(opts):
        from .distributed import predict_command

        return predict_command(opts, reporter, loaded)
    try:
        data, by_name = _read_model_columns(opts, loaded.meta.get("columns"), reporter)
    except NoRowLeft as exc:    # --missing drop dropped every row: each is labelled -1
        data, by_name = exc.data, False
    expected = loaded.meta["n_features"]
    if data.X.shape[1] != expected:
        what = {"precomputed": "kernel column", "precomputed-distance": "distance column"
                }.get(loaded.meta["kernel"], "feature")
        raise DataError(f"{data.source}: has {plural(data.X.shape[1], 'column')}, the model "
                        f"{opts['model_path']} expects {plural(expected, what)}"
                        + (f"; pick {'it' if expected == 1 else 'them'} with --columns"
                           if data.X.shape[1] > expected else ""))
    # The fitted arrays straight from the model file: no estimator (nor scikit-learn).
    result, kernel = loaded.result, loaded.result.kernel
    X = np.ascontiguousarray(loaded.scaler.transform(data.X), dtype=np.float64)
    check_values(data, X, kernel.name, max(len(result.labels),
                                           float(np.sum(result.sample_weight))),
                 loaded.meta.get("scale", "none"), resolved=kernel)
    with reporter.engine_warnings(), reporter.progress(f"predicting {data.source}"):
        try:
            if X.shape[0]:
                labels, dist = nearest(loaded.predictor, X,
                                       want_distances=bool(opts["distances"]),
                                       n_threads=effective_n_threads(opts["threads"]))
            else:   # every row dropped (--missing drop): all labelled -1, no distance
                k = loaded.params["n_clusters"]
                labels, dist = np.empty(0, dtype=np.int64), (np.empty((0, k))
                                                            if opts["distances"] else None)
        except ValueRangeError as exc:       # a row the model cannot place in float64
            raise DataError(f"{where(data, exc.row, exc.column)}: {exc.detail}") from None
        except ValueError as exc:
            raise DataError(f"{data.source}: {exc}") from exc
    with AtomicOutputs(opts["force"]) as out:
        out.open(opts["labels"], "labels").write(labels_text(opts, labels, data).encode())
        if dist is not None:
            full = np.full((data.n_rows, dist.shape[1]), np.nan)
            full[data.kept] = dist
            write_matrix(out.open(opts["distances"], "distances"), opts["distances"], full)
    k = loaded.params["n_clusters"]
    sizes = np.bincount(labels, minlength=k)
    reporter.table("kkmeans predict", [
        ("data", f"{data.source}: {plural(data.X.shape[0], 'row')}"
                 + (f" ({data.n_dropped} dropped)" if data.n_dropped else "")),
        ("model", f"{opts['model_path']}: {kernel.describe()}, k = {k}"),
        *columns_row(data, by_name),
        ("cluster sizes", ", ".join(str(int(s)) for s in sizes)),
    ])


def _read_model_columns(opts, names, reporter):
    """DATA read in one process for a model trained on columns ``names`` (see
    ``read_model_columns``); standard input is held so that it can be read again."""
    return read_model_columns(opts, names, lambda o: read_input(o, o["data"]), reporter,
                              hold=lambda: _rereadable_stdin(opts["data"], opts))


@contextlib.contextmanager
def _rereadable_stdin(spec, opts):
    """While DATA is ``-``, standard input read once and held, so it can be read again."""
    if spec != "-":
        yield
        return
    stdin_open("DATA", spec)
    stream = sys.stdin
    if not opts.get("quiet") and getattr(stream, "isatty", lambda: False)():
        click.echo("kkmeans: reading CSV from standard input (the terminal); end it with "
                   "Ctrl-D, or give a file instead of -", err=True)
    binary = getattr(stream, "buffer", None)
    raw = binary.read() if binary is not None else stream.read()
    sys.stdin = _HeldInput(raw if isinstance(raw, bytes) else raw.encode())
    try:
        yield
    finally:
        sys.stdin = stream


class _HeldInput:
    """Standard input's bytes, read again from the start each time."""

    def __init__(self, raw):
        self.raw = raw

    @property
    def buffer(self):
        return io.BytesIO(self.raw)

    def isatty(self):
        return False
