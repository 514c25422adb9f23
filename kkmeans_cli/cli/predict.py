"""``kkmeans predict MODEL DATA``: labels (and distances) of new rows from a saved model."""

import click

from .._text import plural
from ..errors import DataError
from .inputs import check_values, input_paths, labels_text, read_input
from .options import cluster_options, data_options, effective_options, on_cluster, run_options


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
@click.option("--labels", default="-", show_default=True, metavar="PATH",
              help="Where the labels go (- is stdout).")
@click.option("--distances", default=None, metavar="PATH",
              help="Write the n×k squared feature-space distances (.npy, else CSV).")
@click.option("--with-data", is_flag=True,
              help="Write each row of DATA followed by its label, as CSV (the columns used; "
                   "a header line, when DATA has one, ends in 'label').")
@click.option("--threads", type=click.IntRange(min=1), default=None,
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
    loaded = load_model(opts["model_path"])
    if on_cluster(opts):
        from .distributed import predict_command

        return predict_command(opts, reporter, loaded)
    data = read_input(opts, opts["data"])
    expected = loaded.meta["n_features"]
    if data.X.shape[1] != expected:
        what = {"precomputed": "kernel columns", "precomputed-distance": "distance columns"
                }.get(loaded.meta["kernel"], "features")
        raise DataError(f"{data.source}: has {plural(data.X.shape[1], 'column')}, the model "
                        f"{opts['model_path']} expects {expected} {what}"
                        + ("; pick them with --columns" if data.X.shape[1] > expected else ""))
    # The fitted arrays straight from the model file: no estimator (nor scikit-learn).
    result, kernel = loaded.result, loaded.result.kernel
    X = np.ascontiguousarray(loaded.scaler.transform(data.X), dtype=np.float64)
    check_values(data, X, kernel.name, max(len(result.labels),
                                           float(np.sum(result.sample_weight))),
                 loaded.meta.get("scale", "none"), resolved=kernel)
    if kernel.name == "chi2" and np.any(X < 0):
        raise DataError(f"{data.source}: the chi2 kernel needs non-negative data")
    with reporter.engine_warnings(), reporter.progress(f"predicting {data.source}"):
        try:
            labels, dist = nearest(loaded.predictor, X, want_distances=bool(opts["distances"]),
                                   n_threads=effective_n_threads(opts["threads"]))
        except ValueError as exc:
            raise DataError(f"{data.source}: {exc}") from exc
    with AtomicOutputs(opts["force"]) as out:
        if opts["labels"] != "-":
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
        ("cluster sizes", ", ".join(str(int(s)) for s in sizes)),
    ])
    if opts["labels"] == "-":
        click.echo(labels_text(opts, labels, data), nl=False)
