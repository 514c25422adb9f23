"""What the command line tells people, on stderr: reports, progress, warnings.

stdout carries data only; everything here goes to stderr through a rich console. ``quiet``
silences all of it (errors are printed by the CLI's error handler, not here). Progress is
shown only when stderr is a terminal.
"""
import contextlib
import io
import os
import re
import sys
import warnings

import click

from .._options import REFIT_TESTS
from .._text import one_line, plural, printable


# Keyword arguments of KernelKMeans whose command-line option is not --<name with - for _>.
_API_OPTIONS = {"n_clusters": "-k", "random_state": "--seed", "n_threads": "--threads",
                "n_landmarks": "--landmarks", "nystroem_rank": "--rank",
                "sample_weight": "--weights"}
_API_PARAMS = ("n_clusters", "kernel", "gamma", "degree", "coef0", "init", "n_init",
               "max_iter", "tol", "algorithm", "random_state", "dtype", "n_threads",
               "psd_repair", "solver", "objective", "refine", "approx", "n_landmarks",
               "memory_limit", "storage", "nystroem_rank", "n_neighbors",
               "weighting", "neighbor_search", "whiten")
# Never inside a file name: a path such as max_iter/n_init.csv or n_clusters=3.csv is kept.
_API_SETTING = re.compile(r"(?<![\w./-])(" + "|".join(_API_PARAMS)
                          + r")=(?:'([^']*)'|\"([^\"]*)\"|([-+0-9.eE]+\b)|(True)\b)")
# Parameter names with an underscore are never ordinary words: said bare, they are options too.
_API_NAME = re.compile(r"(?<![\w'=./-])(" + "|".join(p for p in _API_PARAMS + ("sample_weight",)
                                                    if "_" in p) + r")\b(?![=/-]|\.\w)")
_REPEATED = re.compile(r"((?:-k|--[a-z0-9-]+) [^\s(),;]+) \(\1\)")


_TRAILING_BLANKS = re.compile(r"[ \t]+((?:\x1b\[[0-9;]*m)*)$", re.MULTILINE)


def cli_wording(text):
    """A message of the Python API in the words of the command line: ``algorithm='lloyd'``
    becomes ``--algorithm lloyd``, ``n_clusters=3`` becomes ``-k 3``; a setting followed by
    its own API spelling in parentheses is said once; ``whiten=True`` is the flag
    ``--whiten``."""
    def option(match):
        name = match.group(1)
        value = next(v for v in match.groups()[1:] if v is not None)
        flag = _API_OPTIONS.get(name, '--' + name.replace('_', '-'))
        return flag if match.group(5) else f"{flag} {value}"

    text = _API_SETTING.sub(option, text)
    text = _API_NAME.sub(lambda m: _API_OPTIONS.get(m.group(1),
                                                    "--" + m.group(1).replace("_", "-")), text)
    return _REPEATED.sub(r"\1", text)


class Reporter:
    """Reports and warnings for one command.

    Parameters
    ----------
    quiet : bool
        Print nothing (warnings included).
    """

    def __init__(self, quiet=False):
        self.quiet = quiet
        self.gone = sys.stderr is None  # started with stderr closed
        self._console = None

    @property
    def console(self):
        """The rich console on stderr (rich is loaded when first needed)."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=True, highlight=False, soft_wrap=True,
                                    file=sys.stderr if sys.stderr is not None
                                    else io.StringIO())
        return self._console

    def on_terminal(self):
        """Whether stderr is a terminal as rich judges it; rich is not loaded when stderr is
        no terminal and no variable of rich's (``TTY_COMPATIBLE``, ``FORCE_COLOR``) could make
        it one (``kkmeans predict`` in a pipe stays quick)."""
        if self.gone:
            return False
        if self._console is None and not _maybe_terminal(sys.stderr):
            return False
        return self.console.is_terminal

    @contextlib.contextmanager
    def progress(self, message):
        """A spinner with ``message`` while the block runs, on a terminal only.

        Yields ``update(done, total, what)``, which shows ``message: what done/total`` (a no-op
        when quiet or not on a terminal), e.g. the ``progress`` of a Nyström fit.
        """
        if self.quiet or not self.on_terminal():
            yield lambda *args: None
            return
        from rich.text import Text

        with self.console.status(Text(printable(message))) as status:
            yield lambda done, total, what="": status.update(
                Text(printable(f"{message}: {what} {done:,}/{total:,}")))

    @contextlib.contextmanager
    def engine_warnings(self):
        """Print each warning raised in the block once, as ``kkmeans: warning: ...`` (every
        ``KKMeansWarning`` is shown, not only the first of its kind)."""
        from ..errors import KKMeansWarning

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", KKMeansWarning)
            try:
                yield
            finally:
                seen = set()
                for w in caught:
                    text = str(w.message)
                    if text not in seen:
                        seen.add(text)
                        self.warn(text)

    @contextlib.contextmanager
    def progress_bar(self, total, message):
        """A progress bar over ``total`` steps, on a terminal only.

        Yields ``advance(done, total, row)`` (the ``progress`` callback of
        :func:`kkmeans_cli.model.sweep.sweep`); a no-op when quiet or not on a terminal.
        """
        if self.quiet or not self.on_terminal():
            yield lambda *args: None
            return
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn)

        message = printable(message)
        with Progress(TextColumn("{task.description}", markup=False), BarColumn(),
                      MofNCompleteColumn(),
                      TimeElapsedColumn(), console=self.console, transient=True) as bar:
            task = bar.add_task(message, total=total)

            def advance(done, total, row=None):
                label = f"{message} (k = {row['k']} done)" if row else message
                bar.update(task, completed=done, total=total, description=label)

            yield advance

    def sweep_table(self, rows, metric, best_k, eigengap_k=None):
        """The sweep's rows as a rich table, the chosen k marked (``*``); on a graph the
        columns of ``model.sweep.GRAPH_COLUMNS`` and the k of the largest eigengap marked
        ``^`` (``eigengap_k``)."""
        if self.quiet:
            return
        from rich import box
        from rich.table import Table

        graph = bool(rows) and "eigengap" in rows[0]
        title = f"kkmeans sweep: * marks the k chosen by {metric.replace('_', '-')}"
        if graph and metric != "eigengap" and eigengap_k is not None:
            title += ", ^ the largest eigengap"
        table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        heads = ({"k": "k", "objective": "objective", "ncut": "ncut",
                  "cut_ratio": "cut-ratio", "silhouette": "silhouette",
                  "eigengap": "eigengap", "n_iter": "iter", "seconds": "s"} if graph else
                 {"k": "k", "inertia": "inertia", "silhouette": "silhouette",
                  "simplified_silhouette": "simpl-sil", "calinski_harabasz": "CH",
                  "davies_bouldin": "DB", "n_iter": "iter", "seconds": "s"})
        table.add_column("", no_wrap=True)
        for key, head in heads.items():
            table.add_column(head, justify="right", no_wrap=True,
                             header_style="bold" if key == metric else "")
        for row in rows:
            chosen = row["k"] == best_k
            mark = ("*" if chosen else "") + ("^" if graph and metric != "eigengap"
                                              and row["k"] == eigengap_k else "")
            table.add_row(mark, *[_cell(key, row[key]) for key in heads],
                          style="bold green" if chosen else None)
        from rich.measure import Measurement

        # as wide as the table needs, however narrow stderr is (80 columns when it is no
        # terminal): rich would otherwise cut numbers short with an ellipsis
        console = self.console
        needed = Measurement.get(console, console.options.update_width(1000), table).maximum
        narrow = console.width
        console.width = max(narrow, needed)     # print(width=) cannot exceed the console's
        try:
            with console.capture() as captured:
                console.print(table)
        finally:
            console.width = narrow
        # rich pads every cell to its column's width: no spaces at the ends of lines.
        self._echo(_TRAILING_BLANKS.sub(r"\1", captured.get()), nl=False)

    def say(self, text):
        """One line for people (not a warning), unless quiet."""
        if not self.quiet:
            self._echo(one_line(text))

    def warn(self, text):
        """One warning line."""
        if not self.quiet:
            self._echo(f"kkmeans: warning: {one_line(cli_wording(text))}")

    def _echo(self, text, nl=True):
        """Text on stderr for people: a stderr that is closed or whose reader went away is
        not an error of the command (its outputs do not depend on it)."""
        if self.gone:
            return
        try:
            click.echo(text, err=True, nl=nl)
        except (OSError, ValueError):
            self._lost()

    def _lost(self):
        from .._streams import silence_stream

        self.gone = True
        silence_stream(2)

    def table(self, title, rows):
        """(label, value) rows under a title: a rich grid on a terminal, plain text otherwise."""
        if self.quiet:
            return
        if not self.on_terminal():
            self._echo(f"{title}\n{format_rows(rows)}", nl=False)
            return
        from rich.table import Table
        from rich.text import Text

        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold")
        grid.add_column()
        for label, value in rows:       # Text: a value is never read as rich markup
            grid.add_row(Text(printable(label)), Text(printable(value)))
        try:
            self.console.print(Text(printable(title), style="bold"))
            self.console.print(grid)
        except (OSError, ValueError):
            self._lost()


def _maybe_terminal(stream):
    if os.environ.get("TTY_COMPATIBLE") == "1" or "FORCE_COLOR" in os.environ:
        return True
    try:
        return bool(stream.isatty())
    except (AttributeError, OSError, ValueError):
        return False


def fit_report(estimator, data, scaler, model_path):
    """Rows of the report after ``fit``: n, d, k, kernel, restarts, iterations, inertia,
    cluster sizes, where the model went and the time spent."""
    stats = estimator.fit_stats_
    n, d = data.X.shape
    restarts = len(stats["restart_inertias"])
    rows = [
        ("data", f"{data.source}: " + (f"sparse affinity graph of {plural(n, 'node')}"
                                       if hasattr(data.X, "nnz") else
                                       f"{plural(n, 'sample')} × {plural(d, 'feature')}")
                 + (f" ({plural(data.n_dropped, 'row')} with missing values dropped)"
                    if data.n_dropped else "")),
        ("k", str(estimator.n_clusters)),
        ("kernel", estimator.kernel_.describe()
         + (f"  (gamma from '{estimator.gamma}')" if isinstance(estimator.gamma, str)
            and estimator.kernel_.gamma is not None else "")
         + ("  (the normalized cut of a sparse graph)" if "graph" in stats else "")),
        ("scaling", scaler.method),
        ("restarts", _restarts_text(stats, restarts)),
        ("iterations", f"{estimator.n_iter_}"
                       + ("" if estimator.converged_ else " (max_iter reached, not converged)")),
        ("inertia", f"{estimator.inertia_:.6g}"),
        ("cluster sizes", ", ".join(str(int(s)) for s in estimator.cluster_sizes_)),
        ("model", model_path or "not saved (--no-model)"),
        ("time", _time_text(stats, _threads_text(estimator, stats, n),
                            getattr(estimator, "approx", "none"))),
    ]
    rows[-2:-2] = _psd_rows(stats)
    rows[-2:-2] = _graph_rows(stats)
    rows[-2:-2] = _optima_rows(estimator)
    rows[-2:-2] = _nystroem_rows(estimator)
    if stats.get("storage_reason") and (stats.get("storage", "matrix") != "matrix"
                                        or "route_predicted_seconds" in stats):
        rows[-2:-2] = [("route", _route_text(stats))]
    return rows


def graph_text(graph, ncut=None):
    """A graph kernel's graph for people: ``20 neighbours (connectivity), 300 nodes,
    1 component, nnz 6,488`` (and the normalized cut when given); components that the fit
    joined (``kernels.graph.join_components``): ``4 components joined by 3 bridges``, the cut
    then being the joined graph's. The neighbours are those each node has: the setting
    (``GraphInfo.n_neighbors``) capped by the nodes, as the search caps it, and said so
    (``3 neighbours (connectivity; 8 set, capped by the 3 nodes)``); neighbours found by the
    approximate search say so (``21 neighbours (connectivity; approximate search)``), and
    the whitened refit, kept (``whitened``) or made and turned down (``whitened refit not
    kept: it moved few points``, the first of ``_options.REFIT_TESTS`` it failed, or ``not
    made: a sample's moved few points``; the default,
    ``kernels.graph_fit.fit_graph``), and the Gaussian step and mixture where they were
    kept (``Gaussian step kept``, ``kernels.graph_fit.gaussian_step``; ``Gaussian mixture
    kept``, ``kernels.graph_fit.mixture_step``), or all three undone by the split test
    (``Gaussian steps undone: the clusters are not Gaussian``,
    ``kernels.graph_fit.split_test``)."""
    parts = []
    if graph.get("weighting") != "precomputed":
        used = min(graph["n_neighbors"], graph["n_nodes"])
        capped = (f"; {graph['n_neighbors']} set, capped by the "
                  f"{plural(graph['n_nodes'], 'node')}" if used < graph["n_neighbors"] else "")
        found = "; approximate search" if graph.get("search") == "approximate" else ""
        tried = graph.get("whitening")      # whiten='auto' tried the refit, or on a sample
        if graph.get("whitened"):
            found += "; whitened"
        elif tried and tried.get("sample"):
            found += "; whitened refit not made: a sample's moved few points"
        elif tried and not tried.get("kept") and not tried.get("undone"):
            found += "; whitened refit not kept"
            test = tried.get("turned_down_by")      # absent from models written before it
            if test is not None:
                found += f": {REFIT_TESTS[test]}"
        if (graph.get("gaussian") or {}).get("kept"):
            found += "; Gaussian step kept"
        if (graph.get("mixture") or {}).get("kept"):
            found += "; Gaussian mixture kept"
            if graph["mixture"].get("tied"):
                found += " (one covariance shared)"
        if (graph.get("split_test") or {}).get("kept") is False:
            found += "; Gaussian steps undone: the clusters are not Gaussian"
        parts.append(f"{plural(used, 'neighbour')} ({graph['weighting']}{capped}{found})")
    else:
        parts.append("affinity given as DATA")
    nodes = plural(graph["n_nodes"], "node")
    if graph.get("n_duplicates"):
        nodes += f" ({plural(graph['n_duplicates'], 'repeated point')} merged)"
    components = plural(graph["n_components"], "component")
    if graph.get("bridges"):
        components += f" joined by {plural(graph['bridges'], 'bridge')}"
    parts += [nodes, components, f"nnz {graph['nnz']:,}"]
    if ncut is not None:
        parts.append(f"normalized cut {ncut:.6g}")
    return ", ".join(parts)


def _graph_rows(stats):
    """The row of a graph kernel's fit: its graph and normalized cut."""
    if "graph" not in stats:
        return []
    return [("graph", graph_text(stats["graph"], stats["ncut"]))]


def starts_mix(kinds):
    """The kinds of a fit's starts counted, in first-seen order: '1 spectral, 1 merge-2k'."""
    return ", ".join(f"{kinds.count(kind)} {kind}" for kind in dict.fromkeys(kinds))


def _optima_rows(est):
    """Rows of the fit report: the objective (with the ncut value), the winning start and
    what each stage lowered the objective by."""
    stats = est.fit_stats_
    rows = []
    if est.objective == "ncut" or "graph" in stats:
        rows.append(("objective", f"ncut = {est.ncut_:.6g} (normalized cut, Σ cut/vol)"))
    kinds = stats.get("start_kinds")
    if kinds:
        rows.append(("starts", f"{starts_mix(kinds)}; best: {stats.get('best_start')}"))
    start, lloyd_obj = stats.get("start_objective"), stats.get("lloyd_objective")
    refined = stats.get("refined_objective")
    if lloyd_obj is not None and refined is not None:
        text = (f"start {start:.6g} → Lloyd {lloyd_obj:.6g}" if start is not None
                else f"Lloyd {lloyd_obj:.6g}")
        if stats.get("refine") == "hartigan":
            moves = plural(stats.get("refine_moves", 0), "move")
            text += (f" → Hartigan {refined:.6g} ({moves}, "
                     f"−{lloyd_obj - refined:.3g})")
        rows.append(("stages", text))
    return rows


def _nystroem_rows(estimator):
    """Rows of the fit report: the Nyström approximation, when there is one."""
    if getattr(estimator, "approx", "none") != "nystroem":
        return []
    stats = getattr(estimator, "nystroem_stats_", None)
    if stats:
        rows = [("approximation",
                 f"Nyström, {plural(estimator.n_landmarks_, 'landmark')}, rank {estimator.nystroem_rank_} "
                 f"({estimator.nystroem_dtype_} features); estimated error "
                 f"trace(K − K̃)/trace(K) = {stats['approximation_error']:.3g}; inertia in the "
                 f"Nyström feature space")]
        # (the restarts screened on a sample: the report's own "restarts" row)
        sec = stats["stage_seconds"]
        rows.append(("stages time", ", ".join(f"{name} {sec[name]:.2f} s" for name in
                                              ("landmarks", "features", "restarts")
                                              if name in sec)))
        return rows
    return [("approximation", f"Nyström, {plural(estimator.n_landmarks_, 'landmark')} (rank "
                              f"{estimator.nystroem_rank_}); inertia in the Nyström feature "
                              f"space")]


def _psd_rows(stats):
    """(label, value) rows of the fit report for the PSD check, repair and solver."""
    rows = []
    if stats.get("psd_checked"):
        rows.append(("psd check", f"{'PSD' if stats['psd'] else 'not PSD'}: smallest eigenvalue "
                                  f"{stats['lambda_min']:.6g} (largest |λ| "
                                  f"{stats['lambda_max_abs']:.6g}; {stats['eig_method']})"))
    repair = stats.get("psd_repair", "none")
    if repair == "lingoes":
        rows.append(("psd repair", f"lingoes, sigma = {stats['psd_sigma']:.6g}: objective "
                                   f"{stats['objective_used']:.6g} repaired, "
                                   f"{stats['objective_original']:.6g} on the original kernel"
                     if stats["psd_sigma"] > 0 else "lingoes: not needed (PSD)"))
    elif repair == "clip":
        rows.append(("psd repair", f"clip: objective {stats['objective_used']:.6g} "
                                   f"clipped, {stats['objective_original']:.6g} on the "
                                   f"original kernel (clipping changes the clustering)"))
    elif stats.get("psd_checked") and not stats.get("psd"):
        rows.append(("psd repair", f"none (objective {stats['objective_used']:.6g}); "
                                   f"--psd-repair lingoes keeps the optimal clustering"))
    if stats.get("solver") == "embed":
        rows.append(("solver", "embed (k-means on the eigen-embedding of K)"))
    return rows


def write_fit_results(reporter, opts, estimator, scaler, *, summary, report, meta_options,
                      extra, model_path, labels, force=False, more_files=None):
    """What ``kkmeans fit`` leaves behind, on one machine or on a cluster: the model, the
    labels, the JSON summary and, on stdout, the JSON summary (``--json``) or the labels
    (``--labels -``), all committed together (``io.outputs.AtomicOutputs``: all of them or
    none), then the report on stderr.

    ``labels()`` returns the labels' text (made only when a labels output needs it);
    ``more_files(out)`` writes further outputs in the same transaction (the plot)."""
    from ..io.outputs import AtomicOutputs, format_json
    from ..model.model_file import model_meta, save_model

    with AtomicOutputs(force) as out:
        if model_path is not None:
            meta = model_meta(estimator, scaler, meta_options, extra)
            save_model(out.open(model_path, "model"), estimator, scaler, meta)
        if more_files is not None:
            more_files(out)
        if opts["labels"] != "-":
            out.open(opts["labels"], "labels").write(labels().encode())
        if opts["summary"]:
            out.open(opts["summary"], "summary").write(format_json(summary).encode())
        if opts["json"]:
            out.open("-", "JSON summary").write(format_json(summary).encode())
        elif opts["labels"] == "-":
            out.open("-", "labels").write(labels().encode())
    reporter.table("kkmeans fit", report)


def _restarts_text(stats, restarts):
    """``20 (best: #3)``; restarts screened on a sample (the exact route's
    ``engine/exact_restarts.py``, the Nyström engine's ``restarts.sampled_restarts``, on one
    machine or a cluster) say how many starts ran on the sample and how many were completed
    on all the data."""
    screened = _screening(stats)
    if screened is not None and "screen_full_restarts" in stats:
        kinds, sample, _ = screened
        return (f"{len(kinds)} screened on a sample of {sample:,} points (their solutions did "
                f"not separate), then {stats['screen_full_restarts']} on all the data (best: "
                f"#{stats['best_restart'] + 1})")
    if screened is not None:
        kinds, sample, completed = screened
        return (f"{len(kinds)} screened on a sample of {sample:,} points, {restarts} "
                f"completed on all the data (best: candidate #"
                f"{completed[stats['best_restart']] + 1})")
    return f"{restarts} (best: #{stats['best_restart'] + 1})"


def _screening(stats):
    """(start kinds, sample size, completed candidates) of screened restarts, else None."""
    if "screened_start_kinds" in stats:
        return stats["screened_start_kinds"], stats["sample_size"], stats["completed"]
    nystroem = stats.get("nystroem") or {}
    if "sample_size" in nystroem and "completed" in nystroem and stats.get("start_kinds"):
        return stats["start_kinds"], nystroem["sample_size"], nystroem["completed"]
    return None


def restarts_run(stats):
    """The restarts that ran: every candidate start of screened restarts (the completed ones
    are ``restart_inertias``), else every restart."""
    screened = _screening(stats)
    return len(screened[0]) if screened is not None else len(stats["restart_inertias"])


def _route_text(stats):
    """Which exact route ran (``fit_stats_['storage']``) and why (``storage_reason``)."""
    storage = stats.get("storage", "matrix")
    name = {"matrix": "kernel matrix in memory",
            "blocked": "blocked (kernel values computed in blocks, no kernel matrix)",
            "blocked, then matrix": "blocked, then the kernel matrix"}.get(storage, storage)
    return f"{name}: {stats['storage_reason']}"


def fit_summary(estimator, data, model_path):
    """The JSON summary of a fit (``--summary``, ``--json``)."""
    from ..model.parts import GraphPart, NystroemPart, ObjectivePart

    stats = estimator.fit_stats_
    return {
        "source": data.source,
        "n_samples": int(data.X.shape[0]),
        "n_features": int(data.X.shape[1]),
        "n_rows": int(data.n_rows),
        "n_dropped": data.n_dropped,
        "n_clusters": int(estimator.n_clusters),
        **estimator.kernel_.params(),
        "n_init": restarts_run(stats),  # starts run (those screened on a sample too)
        "n_completed": len(stats["restart_inertias"]),  # run on all the data
        "best_restart": int(stats["best_restart"]) + 1,  # 1-based, as the report's "#1"
        "restart_inertias": [float(v) for v in stats["restart_inertias"]],
        "n_iter": int(estimator.n_iter_),
        "converged": bool(estimator.converged_),
        "inertia": float(estimator.inertia_),
        "cluster_sizes": [int(s) for s in estimator.cluster_sizes_],
        "model": model_path,
        "storage": stats.get("storage", "matrix"),
        **({"storage_reason": stats["storage_reason"]} if "storage_reason" in stats
           and (stats.get("storage", "matrix") != "matrix"
                or "route_predicted_seconds" in stats) else {}),
        "kernel_seconds": float(stats["kernel_seconds"]),
        "iteration_seconds": float(stats["iteration_seconds"]),
        "n_threads": int(stats["n_threads"]),
        **ObjectivePart.model_meta(estimator),
        **NystroemPart.model_meta(estimator),
        **GraphPart.model_meta(estimator),
        **{key: stats[key] for key in ("solver", "psd_checked", "psd", "lambda_min",
                                       "psd_repair", "psd_sigma", "objective_used",
                                       "objective_original") if key in stats},
    }


def format_rows(rows):
    """Plain aligned ``label: value`` text (for stdout, which must not carry rich markup)."""
    rows = [(printable(label), printable(value)) for label, value in rows]
    width = max(len(label) for label, _ in rows)
    return "".join(f"{label + ':':<{width + 1}} {value}\n" for label, value in rows)


def _cell(key, value):
    if key in ("k", "n_iter"):
        return str(value)
    if key == "seconds":
        return f"{value:.2f}"
    return f"{value:.4g}" if value == value else "nan"


def silhouette_text(result, n):
    """``0.712345 (exact)`` or ``... (stratified sample of m of n points)``."""
    how = ("exact" if result.exact
           else f"stratified sample of {result.n_used} of {plural(n, 'point')}")
    return f"{result.score:.6f} ({how})"


def _threads_text(estimator, stats, n):
    """The threads a fit used, and why fewer than asked for: ``2 threads``, ``1 of 2 threads:
    fewer than 2,000 points``, ``1 thread: engine built without OpenMP``; on a cluster the
    workers' (``on 2 Dask workers, 2 threads in all``: this process's threads do not count)."""
    from ..engine import _openmp
    from ..engine.threads import effective_n_threads
    from ..model.planning import SMALL_N

    cluster = stats.get("cluster")
    if cluster:
        return (f"on {plural(cluster['workers'], 'Dask worker')}, "
                f"{plural(cluster.get('threads', cluster['workers']), 'thread')} in all")
    used = stats["n_threads"]
    if not _openmp.openmp_enabled():
        return f"{plural(used, 'thread')}: engine built without OpenMP"
    available = effective_n_threads(getattr(estimator, "n_threads", None))
    if used < available and n < SMALL_N:
        return f"{used} of {available} threads: fewer than {SMALL_N:,} points"
    return plural(used, "thread")


def _time_text(stats, threads, approx="none"):
    """Where the time went; a fit without the kernel matrix computed kernel values in blocks
    during its iterations (``fit_stats_['storage']``); a Nyström fit built features of the
    landmarks, no kernel matrix."""
    iterations = f"iterations {stats['iteration_seconds']:.3f} s"
    storage = stats.get("storage", "matrix")
    if storage == "graph":
        return (f"graph and iterations {stats['iteration_seconds']:.3f} s (sparse graph, "
                f"no kernel matrix; {threads})")
    if approx == "nystroem":
        return (f"Nyström features {stats['kernel_seconds']:.3f} s (no kernel matrix), "
                f"{iterations} ({threads})")
    if storage == "blocked":
        return f"{iterations} on kernel values computed in blocks, no kernel matrix ({threads})"
    if storage == "blocked, then matrix":
        return (f"kernel matrix {stats['kernel_seconds']:.3f} s (built after blocked "
                f"iterations), {iterations} ({threads})")
    return f"kernel matrix {stats['kernel_seconds']:.3f} s, {iterations} ({threads})"
