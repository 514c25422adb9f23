"""``kkmeans sweep DATA``: fit every k of a range over one kernel matrix, measure each, choose
k."""

import click

from .._options import GRAPH_KERNELS

from .._text import plural
from ..errors import DataError, UsageError
from .inputs import (CANNOT_SWEEP, check_distinct, dropped_note, init_is_file, input_paths,
                     is_graph_data, prepare_fit_data)
from .options import (KsType, OutputPath, check_memory_plan, check_option_combination, data_options,
                      effective_options, estimator_kwargs, fit_options, require_matplotlib,
                      run_options, stored_options, warn_unused_options, whiten_setting)


SWEEP_METRICS = ("silhouette", "simplified-silhouette", "calinski-harabasz", "davies-bouldin",
                 "inertia", "cut-ratio", "eigengap")
# The measures of a sweep on a graph (--kernel knn, or a sparse graph as DATA); the first is
# the default there (silhouette elsewhere).
GRAPH_METRICS = ("cut-ratio", "silhouette", "eigengap")

SWEEP_EPILOG = """\b
With --kernel knn (the default, as for fit) one neighbour graph serves every k (with the
default --n-neighbors, that of the smallest k: the report names it); the columns are
k,objective,ncut,cut_ratio,silhouette,eigengap,n_iter,seconds (cut_ratio: (ncut(k+1) + 1e-6)
/ (ncut(k) + 1e-6); the graph silhouette; the eigengap λ(k+1) − λ(k) of the normalized
Laplacian). k is chosen by cut-ratio (the default: the largest k whose next cluster at least
triples the normalized cut, else the largest ratio; k+1 is fitted too), silhouette or
eigengap, and the k of the largest eigengap is marked ^ beside the chosen one. The same with
--kernel precomputed and a sparse graph as DATA (.npz, .mtx).
With a dense kernel (--kernel rbf, ...) the chosen k is the largest silhouette (the default),
simplified silhouette or Calinski-Harabasz, the smallest Davies-Bouldin, or the elbow of the
inertia curve. Ties go to the smaller k.
No model is saved unless -o PATH is given. Labels are not printed; fit the chosen k with
'kkmeans fit' for those (same options, same labels; with knn add --no-whiten, as a sweep
makes no whitened refit, Gaussian step or mixture, and with the default neighbours the
--n-neighbors the report names).
\b
Examples:
  kkmeans sweep examples/moons.csv --k 2..6
  kkmeans sweep examples/blobs.csv --k 2..6 --kernel rbf
  kkmeans sweep data.csv --k 2..10 --metric eigengap --n-neighbors 15
  kkmeans sweep graph.npz --kernel precomputed --k 2..8 > sweep.csv
  kkmeans sweep data.h5:/features --k 2..12 -o best.npz > sweep.csv
  kkmeans sweep data.csv --k 2,3,5,8 --kernel rbf --metric davies-bouldin --plot sweep.png
  kkmeans sweep data.csv --config configs/rbf.yaml --k 2..10 --quiet
"""


def sweep_fit_options(f):
    """The fit options of ``sweep``, with fit's default kernel (knn: one graph for every k)."""
    return fit_options(f)


@click.command("sweep", epilog=SWEEP_EPILOG)
@click.argument("data")
@click.option("--k", "k", type=KsType(), default=None, metavar="2..10|2,3,5",
              help="The ks to try: a range lo..hi (inclusive), a list, or both (2..4,8); "
                   "each 2 ≤ k < rows (on a graph k ≤ rows) (required).")
@click.option("--metric", type=click.Choice(SWEEP_METRICS), default=None,
              help="The measure that chooses k  [default: cut-ratio on a graph, silhouette "
                   "with a kernel matrix]")
@sweep_fit_options
@click.option("-o", "--model", type=OutputPath(), default=None, metavar="PATH",
              help="Save the chosen k's model here  [default: no model]")
@click.option("--table", type=OutputPath(), default="-", show_default=True, metavar="PATH",
              help="Where the CSV table goes (- is stdout).")
@click.option("--plot", type=OutputPath(plot=True), default=None, metavar="PATH",
              help="Draw every measure against k as .png, .pdf or .svg by PATH's extension "
                   "(needs matplotlib).")
@data_options
@run_options
@click.pass_context
def sweep_command(ctx, **_):
    """Fit every k of --k over one graph or kernel matrix, score each, choose the best k.

    Writes one CSV row per k to stdout (knn: k,objective,ncut,cut_ratio,silhouette,eigengap,
    n_iter,seconds; other kernels: k,inertia,silhouette,simplified_silhouette,calinski_harabasz,
    davies_bouldin,n_iter,seconds) and reports the table, with the chosen k marked, on
    stderr.
    """
    opts = effective_options(ctx)
    if opts["k"] is None:
        raise UsageError("missing option --k (e.g. --k 2..10 or --k 2,3,5; or k in --config) "
                         "(see 'kkmeans sweep --help')")
    from ..model.sweep import parse_k_ranges

    try:  # expanded once checked against the rows; k ≥ 2: the measures compare clusters
        k_ranges = parse_k_ranges(opts["k"], minimum=2)
    except ValueError as exc:
        raise UsageError(f"--k {opts['k']}: {exc}") from None
    if init_is_file(opts["init"]):
        raise UsageError("--init PATH fixes the number of clusters and cannot be used with "
                         "sweep; use --init k-means++, spectral or random")
    graph = opts["kernel"] in GRAPH_KERNELS or is_graph_data(opts)
    if opts["metric"] is None:
        opts["metric"] = GRAPH_METRICS[0] if graph else "silhouette"
    if graph and opts["metric"] not in GRAPH_METRICS:
        what = (f"--kernel {opts['kernel']}" if opts["kernel"] in GRAPH_KERNELS
                else f"a sparse graph as DATA ({opts['data']})")
        other = " (or --kernel rbf)" if opts["kernel"] in GRAPH_KERNELS else ""
        raise UsageError(f"--metric {opts['metric']} is measured on a kernel matrix; {what} "
                         f"is swept on its graph: use --metric cut-ratio, silhouette or "
                         f"eigengap{other}")
    if not graph and opts["metric"] in ("cut-ratio", "eigengap"):
        what = ("the ratio of a graph's normalized cuts" if opts["metric"] == "cut-ratio"
                else "the gap of a graph's Laplacian eigenvalues")
        way = ("give a sparse graph (.npz of scipy.sparse.save_npz, or .mtx) as DATA, or "
               "another --metric" if opts["kernel"] == "precomputed" else
               "use --kernel knn, or another --metric")
        raise UsageError(f"--metric {opts['metric']} is {what}; --kernel {opts['kernel']} has "
                         f"no graph ({way})")
    if graph:
        return _graph_sweep(opts, k_ranges)
    if opts["storage"] == "blocked":
        raise UsageError("sweep fits every k on one kernel matrix; --storage blocked has none. "
                         "For data too large for the matrix use --approx nystroem (or run "
                         "'kkmeans fit --storage blocked --silhouette' per k)")
    check_option_combination(opts, min(lo for lo, _ in k_ranges))
    metric = opts["metric"].replace("-", "_")

    from ..model.sweep import sweep, to_csv

    reporter, data, scaler, X, weights, ks = _read_for_sweep(opts, k_ranges)
    n = X.shape[0]
    check_distinct(data, X, ks[0], weights, opts["kernel"], "--k")  # others: skipped by sweep
    check_memory_plan(opts, n, ks, "from-kernel", sweep=True)
    params = estimator_kwargs(opts, ks[0], opts["init"])
    del params["n_clusters"]
    with reporter.engine_warnings(), \
            reporter.progress_bar(len(ks), f"sweeping k on {data.source}") as advance:
        try:
            result = sweep(X, ks, metric=metric, sample_weight=weights, progress=advance,
                           **params)
        except UsageError:
            raise  # options that cannot work on this data (exit 2)
        except ValueError as exc:
            raise DataError(f"{data.source}: {exc}") from exc
    best = result.best_estimator
    text = to_csv(result.rows)
    model = None
    if opts["model"] is not None:
        stored = stored_options(opts)   # the options given (the k chosen is the model's)
        best_row = result.best_row
        extra = {"source": data.source, "columns": data.columns,
                 "silhouette": float(best_row["silhouette"]),
                 "silhouette_n_used": int(result.silhouette_n_used[
                     result.rows.index(best_row)]),
                 "silhouette_exact": result.silhouette_n_used[
                     result.rows.index(best_row)] == n,
                 "sweep": {"ks": ks, "metric": metric, "best_k": result.best_k}}
        model = (best, scaler, stored, extra)
    _commit_outputs(opts, result, metric, text, model)
    reporter.sweep_table(result.rows, metric, result.best_k)
    used = result.silhouette_n_used
    sampled = [u for u in used if u < n]
    rows = [
        ("data", f"{data.source}: {plural(n, 'sample')} × {plural(X.shape[1], 'feature')}"
                 + (f" ({plural(data.n_dropped, 'row')} with missing values dropped)"
                    if data.n_dropped else "")),
        ("kernel", best.kernel_.describe()),
        ("chosen k", f"{result.best_k} by {opts['metric']}"
                     f"{' (elbow)' if metric == 'inertia' else ''} = "
                     f"{result.best_row[metric]:.6g}"),
        ("silhouette", "exact (all points)" if not sampled else
         f"on a stratified sample of {max(sampled)} of {n} points"),
        ("model", opts["model"] or "not saved (give -o PATH)"),
    ]
    if opts["table"] != "-":
        rows.append(("table", opts["table"]))
    if opts["plot"] is not None:
        rows.append(("plot", opts["plot"]))
    # (a Nyström sweep builds features of the landmarks once, no kernel matrix)
    built = ("Nyström features" if opts.get("approx") == "nystroem" else "kernel matrix")
    rows.append(("time", f"{built} {result.kernel_seconds:.3f} s (once), fits and "
                         f"measures {sum(r['seconds'] for r in result.rows):.3f} s "
                         f"({plural(len(result.rows), 'k')})"))
    reporter.table("kkmeans sweep", rows)


def _graph_sweep(opts, k_ranges):
    """``sweep`` on a graph: --kernel knn (the neighbour graph of DATA, built once for every
    k) or --kernel precomputed with a sparse graph as DATA (``model.sweep.graph_sweep``)."""
    from ..model.sweep import graph_sweep
    from ..kernels.graph import default_neighbors
    from .report import graph_text

    check_option_combination(opts, min(lo for lo, _ in k_ranges))
    metric = opts["metric"].replace("-", "_")
    reporter, data, scaler, X, weights, ks = _read_for_sweep(opts, k_ranges, graph=True)
    n = X.shape[0]
    if opts["kernel"] in GRAPH_KERNELS:  # one graph for the largest k: every k must fit it
        check_distinct(data, X, ks[-1], weights, opts["kernel"], "--k")
    params = estimator_kwargs(opts, ks[0], opts["init"])
    del params["n_clusters"]
    with reporter.engine_warnings(), \
            reporter.progress_bar(len(ks), f"sweeping k on {data.source}") as advance:
        try:
            result = graph_sweep(X, ks, metric=metric, sample_weight=weights,
                                 progress=advance, refit_best=opts["model"] is not None,
                                 **params)
        except UsageError:
            raise  # options that cannot work on this data (exit 2)
        except ValueError as exc:
            raise DataError(f"{data.source}: {exc}") from exc
    text = to_csv_text(result)
    best_row = result.best_row
    info = vars(result.graph)
    model = None
    if opts["model"] is not None:
        best = result.best_estimator
        stored = stored_options(opts)   # as given: the k chosen and the graph are the model's
        extra = {"source": data.source, "columns": data.columns,
                 "silhouette": float(best_row["silhouette"]),
                 "silhouette_n_used": n, "silhouette_exact": True,
                 "sweep": {"ks": ks, "metric": metric, "best_k": result.best_k,
                           "eigengap_k": result.eigengap_k,
                           "measures": {column: [row[column] if row[column] == row[column]
                                                 else None for row in result.rows]
                                        for column in ("objective", "ncut", "cut_ratio",
                                                       "silhouette", "eigengap")}}}
        model = (best, scaler, stored, extra)
    _commit_outputs(opts, result, metric, text, model)
    reporter.sweep_table(result.rows, metric, result.best_k, result.eigengap_k)
    given = opts["kernel"] not in GRAPH_KERNELS
    computed = any(row["eigengap"] is not None and row["eigengap"] == row["eigengap"]
                   for row in result.rows)
    if result.eigengap_k is None and computed:
        top = max(row["k"] for row in result.rows)
        gap = ("0 at every k swept (the eigenvalue 0 repeats: the graph has more components "
               "than any of them)" if info["n_components"] > top else
               "0 at every k swept (a repeated eigenvalue)")
    elif result.eigengap_k is None:
        gap = "not computed" + (" (more than 20,000 nodes; give --metric eigengap)"
                                if info["n_nodes"] > 20_000 else
                                " (λ(k+1) needs more than k nodes)"
                                if all(row["k"] >= info["n_nodes"] for row in result.rows)
                                else "")
    else:
        gap_row = next(r for r in result.rows if r["k"] == result.eigengap_k)
        k = result.eigengap_k
        gap = f"largest at k = {k}: λ{k + 1} − λ{k} = {gap_row['eigengap']:.6g}"
    rows = [
        ("data", f"{data.source}: " + (f"sparse affinity graph of {plural(n, 'node')}" if given
                                       else f"{plural(n, 'sample')} × "
                                            f"{plural(X.shape[1], 'feature')}")
                 + (f" ({plural(data.n_dropped, 'row')} with missing values dropped)"
                    if data.n_dropped else "")),
        ("kernel", ("precomputed" if given else opts["kernel"])
         + "  (the normalized cut of a sparse graph)"),
        ("graph", graph_text(dict(info, weighting="precomputed" if given
                                  else info["weighting"]))
         + ("" if given or opts["n_neighbors"] is not None
            or all(default_neighbors(info["n_nodes"], k) == info["n_neighbors"] for k in ks)
            else f" (the default neighbours of k = {ks[0]}; fit a larger k with "
                 f"--n-neighbors {info['n_neighbors']}"
                 f"{' --no-whiten' if whiten_setting(opts) == 'auto' else ''} for the "
                 f"sweep's labels)")),
        ("chosen k", _graph_choice_text(result, metric)),
        ("eigengap", gap),
        ("silhouette", "exact (all points, graph kernel's feature space)"),
        ("model", opts["model"] or "not saved (give -o PATH)"),
    ]
    if opts["table"] != "-":
        rows.append(("table", opts["table"]))
    if opts["plot"] is not None:
        rows.append(("plot", opts["plot"]))
    rows.append(("time", f"graph and eigenvalues {result.kernel_seconds:.3f} s (once), fits "
                         f"and measures {sum(r['seconds'] for r in result.rows):.3f} s "
                         f"({plural(len(result.rows), 'k')})"))
    reporter.table("kkmeans sweep", rows)


def _graph_choice_text(result, metric):
    """The report's line for the k a graph sweep chose, and why."""
    from ..measures.graph_sweep import CUT_RATIO_JUMP

    k, row = result.best_k, result.best_row
    if metric != "cut_ratio":
        return f"{k} by {metric} = {row[metric]:.6g}"
    ratio = row["cut_ratio"]
    if ratio != ratio:
        return (f"{k} by cut-ratio, the one k swept (a graph of {k} nodes cannot be cut "
                f"into {k + 1} clusters to compare)")
    why = (f"the largest k whose next cluster multiplies the normalized cut by "
           f"{CUT_RATIO_JUMP:g} or more" if ratio >= CUT_RATIO_JUMP else
           f"no next cluster multiplies the normalized cut by {CUT_RATIO_JUMP:g}: the largest "
           f"ratio")
    return (f"{k} by cut-ratio = {ratio:.4g}: ncut {row['ncut']:.4g} → {row['next_ncut']:.4g} at "
            f"k = {k + 1} ({why})")


def to_csv_text(result):
    """The CSV text of a sweep's rows, in its columns."""
    from ..model.sweep import to_csv

    return to_csv(result.rows, columns=result.columns)


def _read_for_sweep(opts, k_ranges, graph=False):
    """What both sweeps do before fitting: check the outputs (and matplotlib for --plot),
    warn about unused options, read DATA and expand --k against its rows (k ≤ rows − 1: a
    silhouette needs a cluster of two points; on a graph k ≤ rows, a k of every node being
    the one k that has no cut ratio)."""
    from ..io.outputs import check_outputs
    from ..model.sweep import parse_ks
    from .report import Reporter

    check_outputs([(opts["model"], "model", "-o/--model"), (opts["table"], "table", "--table"),
                   (opts["plot"], "plot", "--plot")], opts["force"], input_paths(opts))
    if opts["plot"] is not None:
        require_matplotlib(opts["plot"])
    reporter = Reporter(opts["quiet"])
    warn_unused_options(opts, reporter)
    data, scaler, X, weights, _ = prepare_fit_data(opts)
    n = X.shape[0]
    top, largest = max(hi for _, hi in k_ranges), n if graph else n - 1
    if top > largest:
        of, need = (f"a graph of {plural(n, 'node')}", f"k ≤ {n}") if graph and \
            is_graph_data(opts) else (plural(n, "row"), f"k ≤ rows = {n}" if graph else
                                      f"k ≤ rows − 1 = {n - 1}")
        advice = "use a smaller --k" if largest >= 2 else CANNOT_SWEEP
        raise DataError(f"{data.source}: k = {top} is too large for {of}{dropped_note(data)} "
                        f"(a sweep {'on a graph ' if graph else ''}needs {need}); {advice}")
    ks = parse_ks(opts["k"], max_k=largest)
    return reporter, data, scaler, X, weights, ks


def _commit_outputs(opts, result, metric, text, model):
    """The sweep's files, committed together or not at all: the best k's model (``model``:
    estimator, scaler, stored options and metadata; None without -o), the table and the plot."""
    from ..io.outputs import AtomicOutputs
    from ..model.model_file import model_meta, save_model

    with AtomicOutputs(opts["force"]) as out:
        if model is not None:
            best, scaler, stored, extra = model
            save_model(out.open(opts["model"], "model"), best,
                       scaler, model_meta(best, scaler, stored, extra))
        out.open(opts["table"], "table").write(text.encode())
        if opts["plot"] is not None:
            from .plotting import plot_format, plot_sweep

            plot_sweep(result.rows, metric, result.best_k, out.open(opts["plot"], "plot"),
                       fmt=plot_format(opts["plot"]))
