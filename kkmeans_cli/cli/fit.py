"""``kkmeans fit DATA``: cluster DATA, print the labels, save the model."""
import time

import click

from ..errors import DataError, UsageError
from ..io.config import ORIGINS, given_on_command_line
from .inputs import (check_distinct, dropped_note, init_is_file, input_paths, is_graph_data,
                     labels_text, prepare_fit_data)
from .._options import GRAPH_KERNELS
from .options import (PRECOMPUTED_KERNELS, Integer, OutputPath, check_memory_plan, check_option_combination,
                      cluster_options, data_options, effective_options, estimator_kwargs,
                      fit_options, on_cluster, require_matplotlib, run_options,
                      stored_options, warn_unused_options)


FIT_EPILOG = """\b
Examples:
  kkmeans fit examples/moons.csv -k 2
  kkmeans fit data.csv -k 5 --n-neighbors 30 > labels.txt
  kkmeans fit data.csv -k 5 --kernel rbf --gamma 0.5 > labels.txt
  cat data.csv | kkmeans fit - -k 3 --no-model --quiet
  kkmeans fit data.csv --config configs/rbf.yaml -k 4 --summary run.json
  kkmeans fit data.tsv -k 3 --columns x,y --scale standard --missing drop
  kkmeans fit 'parts/*.parquet' -k 8 --columns x,y,z --kernel rbf --approx nystroem
  kkmeans fit graph.npz -k 4 --kernel precomputed
  kkmeans fit examples/blobs.csv -k 4 --kernel rbf --silhouette --plot clusters.png
  kkmeans fit examples/blobs.csv -k 4 --no-model --with-data > labelled.csv
"""


@click.command(epilog=FIT_EPILOG)
@click.argument("data")
@click.option("-k", "--n-clusters", type=Integer(min=1), default=None,
              help="Number of clusters, 1 ≤ k ≤ rows (required).")
@fit_options
@click.option("-o", "--model", type=OutputPath(), default="model.npz", show_default=True,
              metavar="PATH",
              help="Where the model goes.")
@click.option("--no-model", is_flag=True, help="Do not save a model.")
@click.option("--labels", type=OutputPath(), default="-", show_default=True, metavar="PATH",
              help="Where the labels go, one per row of DATA (- is stdout).")
@click.option("--summary", type=OutputPath(), default=None, metavar="PATH",
              help="Also write a JSON summary.")
@click.option("--with-data", is_flag=True,
              help="Write each row of DATA followed by its label, as CSV (the columns used; "
                   "a header line, when DATA has one, ends in 'label').")
@click.option("--json", is_flag=True, help="Print the JSON summary on stdout instead of labels.")
@click.option("--silhouette", is_flag=True,
              help="Also compute the feature-space silhouette (exact up to 20,000 rows, else "
                   "on a stratified sample of 10,000, reported).")
@click.option("--plot", type=OutputPath(plot=True), default=None, metavar="PATH",
              help="Draw the points coloured by cluster (first two principal axes when there "
                   "are more than two features) as .png, .pdf or .svg by PATH's extension; "
                   "needs matplotlib.")
@data_options
@cluster_options
@run_options
@click.pass_context
def fit(ctx, **_):
    """Cluster DATA into k clusters; print one label per row and save the model."""
    opts = effective_options(ctx)
    if opts["n_clusters"] is None:
        # 'n_clusters' quoted: the key of a config, not reworded as the option -k
        raise UsageError("missing option -k/--n-clusters (or the key 'n_clusters' in --config) "
                         "(see 'kkmeans fit --help')")
    import numpy as np

    from ..io.outputs import check_outputs
    from ..model.estimator import KernelKMeans
    from .report import (Reporter, fit_report, fit_summary, silhouette_text,
                         write_fit_results)

    if on_cluster(opts):  # what a cluster cannot run is said first, in its words
        from .distributed import check_fit_options

        check_fit_options(opts)
    check_option_combination(opts, opts["n_clusters"])
    init_is_file(opts["init"])
    if opts["with_data"] and is_graph_data(opts):
        raise UsageError(f"--with-data writes the rows of DATA; {opts['data']} is a sparse "
                         f"graph (drop --with-data)")
    if opts["silhouette"] and (opts["kernel"] in GRAPH_KERNELS or is_graph_data(opts)):
        graph = "a sparse graph given as DATA" if is_graph_data(opts) else \
            f"--kernel {opts['kernel']}'s sparse neighbour graph"
        raise UsageError(f"--silhouette is fit's silhouette on a dense kernel; on "
                         f"{graph} the silhouette in the graph kernel's feature space is a "
                         f"column of 'kkmeans sweep' (one k: --k {opts['n_clusters']}); "
                         f"drop --silhouette")
    model_path = chosen_model(ctx, opts)
    if opts["json"] and opts["with_data"]:
        raise UsageError("--json prints the summary instead of the labels; --with-data "
                         "cannot be used with it (write the summary with --summary PATH)")
    if opts["json"] and opts["labels"] == "-" and (given_on_command_line(ctx, "labels")
                                                  or "labels" in ORIGINS):
        raise UsageError("--json prints the summary on stdout instead of the labels; "
                         "--labels - asks for them there too (write them with --labels PATH, "
                         "or the summary with --summary PATH)")
    if opts["plot"] is not None and opts["kernel"] in PRECOMPUTED_KERNELS:
        raise UsageError("--plot draws the data points, but with --kernel precomputed DATA is "
                         "a kernel matrix, not points; drop --plot (or fit the original data "
                         "with its kernel)")
    outputs = [(model_path, "model", "-o/--model"), (opts["summary"], "summary", "--summary"),
               (opts["plot"], "plot", "--plot")]
    if opts["json"]:
        outputs.append(("-", "JSON summary", "--json"))
    if not (opts["json"] and opts["labels"] == "-"):
        outputs.append((opts["labels"], "labels", "--labels"))
    check_outputs(outputs, opts["force"], input_paths(opts))
    if opts["plot"] is not None:
        require_matplotlib(opts["plot"])
    reporter = Reporter(opts["quiet"])
    warn_unused_options(opts, reporter)
    if on_cluster(opts):
        from .distributed import fit_command

        return fit_command(opts, reporter, model_path,
                           estimator_kwargs(opts, opts["n_clusters"], opts["init"]))
    data, scaler, X, weights, init = prepare_fit_data(opts)
    k = opts["n_clusters"]
    if k > X.shape[0]:
        raise DataError(f"{data.source}: k = {k} is larger than the number of rows "
                        f"({X.shape[0]}{dropped_note(data)}); use a smaller -k")
    graph = opts["kernel"] in GRAPH_KERNELS or not isinstance(X, np.ndarray)
    estimator = KernelKMeans(**estimator_kwargs(opts, k, init))
    share_K = False
    if not graph:  # a graph fit holds no kernel matrix: no memory plan of one
        check_distinct(data, X, k, weights, opts["kernel"])
        # With --silhouette the kernel matrix is built once, for the fit and the score, when
        # the fit holds it anyway; a fit that starts blocked (--storage blocked, or auto with
        # one start) leaves the silhouette to kernel rows recomputed in blocks.
        share_K = (opts["silhouette"] and estimator.approx != "nystroem"
                   and not estimator.starts_blocked(*X.shape))
        check_memory_plan(opts, X.shape[0], [k], "silhouette" if opts["silhouette"] else None,
                          blocked_silhouette=opts["silhouette"] and not share_K)
    elif opts["kernel"] in GRAPH_KERNELS:
        check_distinct(data, X, k, weights, opts["kernel"])
    with reporter.engine_warnings(), \
            reporter.progress(f"fitting k = {k} on {data.source}") as update:
        try:
            t0 = time.perf_counter()
            K = estimator.kernel_matrix(X) if share_K else None
            built = time.perf_counter() - t0
            estimator.fit(X, sample_weight=weights, kernel_matrix=K, progress=update)
            if K is not None:  # its time, not the 0 s of a fit given K
                estimator.fit_stats_["kernel_seconds"] += built
        except UsageError:
            raise  # options that cannot work on this data (exit 2)
        except ValueError as exc:
            raise DataError(f"{data.source}: {exc}") from exc
    summary = fit_summary(estimator, data, model_path)
    extra = {"source": data.source, "columns": data.columns}
    report = fit_report(estimator, data, scaler, model_path)
    if opts["silhouette"]:
        score = _fit_silhouette(estimator, X, K, opts, reporter, data.source)
        found = {"silhouette": None if score is None else float(score.score),
                 "silhouette_n_used": None if score is None else int(score.n_used),
                 "silhouette_exact": None if score is None else bool(score.exact)}
        summary.update(found)
        extra.update(found)
        report.insert(-2, ("silhouette", "undefined (fewer than 2 clusters)" if score is None
                           else silhouette_text(score, X.shape[0])))
    if opts["plot"] is not None:
        report.insert(-1, ("plot", opts["plot"]))
    def plot(out):
        from .plotting import plot_clusters, plot_format

        plot_clusters(data.X, estimator.labels_, out.open(opts["plot"], "plot"),
                      title=f"{data.source}: k = {k}, {estimator.kernel_.describe()}",
                      fmt=plot_format(opts["plot"]))

    write_fit_results(reporter, opts, estimator, scaler, summary=summary, report=report,
                      meta_options=stored_options(opts), extra=extra, model_path=model_path,
                      labels=lambda: labels_text(opts, estimator.labels_, data),
                      force=opts["force"], more_files=plot if opts["plot"] is not None else None)



def chosen_model(ctx, opts):
    """Where the model goes, or None: ``-o`` and ``--no-model`` both given as flags are a
    usage error; one a flag and the other a config key, the flag wins (flags over the
    config); both config keys, ``no_model`` wins (one config serves every command, and
    ``model`` is also sweep's key)."""
    if not opts["no_model"]:
        return opts["model"]
    flag_model, flag_none = (given_on_command_line(ctx, name) for name in ("model", "no_model"))
    if flag_model and flag_none:
        raise UsageError("-o/--model and --no-model cannot be used together: drop one")
    return opts["model"] if flag_model else None


def _fit_silhouette(estimator, X, K, opts, reporter, source):
    """The silhouette of a fitted estimator on its kernel matrix K (exact, or sampled for large
    n); None when it is undefined (fewer than two non-empty clusters)."""
    from ..measures.metrics import silhouette_score

    if len(set(estimator.labels_.tolist())) < 2:
        reporter.warn("the silhouette is undefined for fewer than 2 clusters; not computed")
        return None
    seed = opts["seed"]
    if getattr(estimator, "approx", "none") == "nystroem":
        from ..measures.features import fit_silhouette

        with reporter.engine_warnings(), reporter.progress("computing the silhouette"):
            return fit_silhouette(X, estimator.labels_, estimator.landmarks_,
                                  estimator.nystroem_transform_, estimator.kernel_,
                                  random_state=seed, n_threads=opts["threads"])
    with reporter.engine_warnings(), reporter.progress("computing the silhouette"):
        try:
            # Without K (--storage blocked) the kernel rows are recomputed in blocks from X.
            return silhouette_score(estimator.labels_, K=K, X=None if K is not None else X,
                                    kernel=estimator.kernel_, random_state=seed,
                                    n_threads=opts["threads"])
        except ValueError as exc:
            raise DataError(f"{source}: silhouette: {exc}") from exc
