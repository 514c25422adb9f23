"""``kkmeans sweep DATA``: fit every k of a range over one kernel matrix, measure each, choose
k."""

import click

from .._text import plural
from ..errors import DataError, UsageError
from .inputs import check_distinct, init_is_file, input_paths, prepare_fit_data
from .options import (check_memory_plan, check_option_combination, data_options,
                      effective_options, estimator_kwargs, fit_options, require_matplotlib,
                      run_options, stored_options, warn_unused_options)


SWEEP_METRICS = ("silhouette", "simplified-silhouette", "calinski-harabasz", "davies-bouldin",
                 "inertia")

SWEEP_EPILOG = """\b
The chosen k is the largest silhouette, simplified silhouette or Calinski-Harabasz, the
smallest Davies-Bouldin, or the elbow of the inertia curve. Ties go to the smaller k.
No model is saved unless -o PATH is given. Labels are not printed; fit the chosen k with
'kkmeans fit' for those (same options, same labels).
\b
Examples:
  kkmeans sweep examples/blobs.csv --k 2..6
  kkmeans sweep data.h5:/features --k 2..12 -o best.npz > sweep.csv
  kkmeans sweep data.csv --k 2,3,5,8 --metric davies-bouldin --table sweep.csv --plot sweep.png
  kkmeans sweep data.csv --config configs/rbf.yaml --k 2..10 --quiet
"""


@click.command("sweep", epilog=SWEEP_EPILOG)
@click.argument("data")
@click.option("--k", "k", default=None, metavar="2..10|2,3,5",
              help="The ks to try: a range lo..hi (inclusive), a list, or both (2..4,8); "
                   "each 2 ≤ k < rows (required).")
@click.option("--metric", type=click.Choice(SWEEP_METRICS), default="silhouette",
              show_default=True, help="The measure that chooses k.")
@fit_options
@click.option("-o", "--model", default=None, metavar="PATH",
              help="Save the chosen k's model here  [default: no model]")
@click.option("--table", default="-", show_default=True, metavar="PATH",
              help="Where the CSV table goes (- is stdout).")
@click.option("--plot", default=None, metavar="PATH",
              help="Draw every measure against k as .png, .pdf or .svg by PATH's extension "
                   "(needs matplotlib).")
@data_options
@run_options
@click.pass_context
def sweep_command(ctx, **_):
    """Fit every k of --k over one kernel matrix, score each, choose the best k.

    Writes one CSV row per k to stdout (k,inertia,silhouette,simplified_silhouette,
    calinski_harabasz,davies_bouldin,n_iter,seconds) and reports the table, with the chosen k
    marked, on stderr.
    """
    opts = effective_options(ctx)
    if opts["k"] is None:
        raise UsageError("missing option --k (e.g. --k 2..10 or --k 2,3,5; or k in --config) "
                         "(see 'kkmeans sweep --help')")
    from ..model.sweep import parse_k_ranges, parse_ks

    try:
        k_ranges = parse_k_ranges(opts["k"])  # expanded once checked against the rows
    except ValueError as exc:
        raise UsageError(f"--k {opts['k']}: {exc}") from None
    if min(lo for lo, _ in k_ranges) < 2:
        raise UsageError(f"--k {opts['k']}: every k must be at least 2 (the measures compare "
                         f"clusters)")
    if init_is_file(opts["init"]):
        raise UsageError("--init PATH fixes the number of clusters and cannot be used with "
                         "sweep; use --init k-means++, spectral or random")
    if opts["storage"] == "blocked":
        raise UsageError("sweep fits every k on one kernel matrix; --storage blocked has none. "
                         "For data too large for the matrix use --approx nystroem (or run "
                         "'kkmeans fit --storage blocked --silhouette' per k)")
    check_option_combination(opts, min(lo for lo, _ in k_ranges))
    metric = opts["metric"].replace("-", "_")

    from ..io.outputs import AtomicOutputs, check_outputs
    from ..model.model_file import model_meta, save_model
    from .report import Reporter
    from ..model.sweep import sweep, to_csv

    check_outputs([(opts["model"], "model", "-o/--model"), (opts["table"], "table", "--table"),
                   (opts["plot"], "plot", "--plot")], opts["force"], input_paths(opts))
    if opts["plot"] is not None:
        require_matplotlib(opts["plot"])
    reporter = Reporter(opts["quiet"])
    warn_unused_options(opts, reporter)
    data, scaler, X, weights, _ = prepare_fit_data(opts)
    n = X.shape[0]
    top = max(hi for _, hi in k_ranges)
    if top > n - 1:
        raise DataError(f"{data.source}: k = {top} is too large for {plural(n, 'row')} (a sweep "
                        f"needs k ≤ rows − 1 = {n - 1}); use a smaller --k")
    ks = parse_ks(opts["k"], max_k=n - 1)
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
    with AtomicOutputs(opts["force"]) as out:
        if opts["model"] is not None:
            stored = dict(stored_options(opts), n_clusters=result.best_k)
            best_row = result.best_row
            extra = {"source": data.source, "columns": data.columns,
                     "silhouette": float(best_row["silhouette"]),
                     "silhouette_n_used": int(result.silhouette_n_used[
                         result.rows.index(best_row)]),
                     "silhouette_exact": result.silhouette_n_used[
                         result.rows.index(best_row)] == n,
                     "sweep": {"ks": ks, "metric": metric, "best_k": result.best_k}}
            save_model(out.open(opts["model"], "model"), best,
                       scaler, model_meta(best, scaler, stored, extra))
        out.open(opts["table"], "table").write(text.encode())
        if opts["plot"] is not None:
            from .plotting import plot_format, plot_sweep

            plot_sweep(result.rows, metric, result.best_k, out.open(opts["plot"], "plot"),
                       fmt=plot_format(opts["plot"]))
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
