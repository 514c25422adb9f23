"""Plots of a sweep and of a clustering (matplotlib, optional: ``kkmeans-cli[plot]``).

The format follows the file's extension: ``.png``, ``.pdf`` or ``.svg`` (PNG when the path has
no extension, e.g. ``/dev/stdout``); any other extension is refused before any work.

matplotlib is imported only when a plot is drawn, and only its Agg canvas is used (no pyplot,
no change to the global backend), so the plots work without a display.
"""
import numpy as np

from ..errors import UsageError

PLOT_COLUMNS = ("inertia", "silhouette", "simplified_silhouette", "calinski_harabasz",
                "davies_bouldin", "ncut", "cut_ratio", "eigengap")
TITLES = {"inertia": "inertia", "silhouette": "silhouette",
          "simplified_silhouette": "simplified silhouette",
          "calinski_harabasz": "Calinski-Harabasz", "davies_bouldin": "Davies-Bouldin",
          "ncut": "normalized cut", "cut_ratio": "ncut(k+1) / ncut(k)",
          "eigengap": "eigengap"}


PLOT_FORMATS = {".png": "png", ".pdf": "pdf", ".svg": "svg", "": "png"}


class PlotUnavailableError(UsageError):
    """A plot was asked for but matplotlib is not installed."""


def plot_format(path):
    """The file format of a plot written to ``path``, from its extension.

    Raises
    ------
    UsageError
        The extension is not one of ``.png``, ``.pdf``, ``.svg``.
    """
    import os

    suffix = os.path.splitext(os.path.basename(path))[1].lower()
    if suffix not in PLOT_FORMATS:
        raise UsageError(f"--plot {path}: unknown plot format {suffix!r}; name the file "
                         f".png, .pdf or .svg")
    return PLOT_FORMATS[suffix]


def figure(**kwargs):
    """A matplotlib Figure on an Agg canvas; a clear error when matplotlib is missing."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise PlotUnavailableError(
            "plotting needs matplotlib, which is not installed; install it with "
            "pip install 'kkmeans-cli[plot]' (or pip install matplotlib)") from exc
    fig = Figure(**kwargs)
    FigureCanvasAgg(fig)
    return fig


def _save(fig, path, fmt):
    from ..errors import OutputError

    try:
        fig.savefig(path, format=fmt, dpi=100)
    except OutputError:
        raise  # a staged output names itself
    except OSError as exc:
        raise OutputError(f"cannot write the plot to {path}: "
                          f"{exc.strerror or exc}") from None


def plot_sweep(rows, metric, best_k, path, fmt="png"):
    """Draw every measure of sweep ``rows`` against k, one panel each, into ``path`` (a path
    or a binary file) in the format ``fmt`` (see :func:`plot_format`).

    The panel of ``metric`` (the measure k was chosen by) is highlighted, and the chosen
    ``best_k`` is marked by a dashed vertical line in every panel.
    """
    columns = [c for c in PLOT_COLUMNS if rows and c in rows[0]]
    fig = figure(figsize=(3.2 * len(columns), 3.2), layout="constrained")
    axes = fig.subplots(1, len(columns), squeeze=False)[0]
    ks = [r["k"] for r in rows]
    for ax, col in zip(axes, columns):
        chosen = col == metric
        ax.plot(ks, [r[col] for r in rows], marker="o", color="C3" if chosen else "C0",
                linewidth=2 if chosen else 1)
        ax.axvline(best_k, color="grey", linestyle="--", linewidth=1)
        ax.set_title(TITLES[col] + (" (chosen)" if chosen else ""),
                     fontweight="bold" if chosen else "normal")
        ax.set_xlabel("k")
        ax.set_xticks(ks)
        if col == "cut_ratio":  # from about 1 to 10⁶ (a cut of 0 against one that is not)
            from ..measures.graph_sweep import CUT_RATIO_JUMP

            ax.set_yscale("log")
            ax.axhline(CUT_RATIO_JUMP, color="grey", linestyle=":", linewidth=1)
    fig.suptitle(f"best k = {best_k} by {TITLES.get(metric, metric)}")
    _save(fig, path, fmt)


def principal_axes(X, n_components=2):
    """Coordinates of X on its first principal axes (centred SVD); X itself when d ≤ 2.

    One feature is drawn against zeros.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError("X must be 2-D")
    if X.shape[1] == 1:
        return np.column_stack([X[:, 0], np.zeros(X.shape[0])])
    if X.shape[1] <= n_components:
        return X
    Xc = X - X.mean(axis=0)
    _, _, vt = np.linalg.svd(Xc, full_matrices=False)
    return Xc @ vt[:n_components].T


def plot_clusters(X, labels, path, title=None, fmt="png"):
    """Scatter the points coloured by cluster into ``path`` (a path or a binary file) in the
    format ``fmt`` (see :func:`plot_format`).

    When X has more than two features the points are drawn on its first two principal axes.
    """
    labels = np.asarray(labels)
    P = principal_axes(X)
    fig = figure(figsize=(6, 5), layout="constrained")
    ax = fig.subplots()
    for j, c in enumerate(np.unique(labels)):
        sel = labels == c
        ax.scatter(P[sel, 0], P[sel, 1], s=8, color=f"C{j % 10}", label=str(c))
    d = np.asarray(X).shape[1]
    ax.set_xlabel("principal axis 1" if d > 2 else "x1")
    ax.set_ylabel("principal axis 2" if d > 2 else ("x2" if d == 2 else ""))
    if np.unique(labels).size <= 20:
        ax.legend(title="cluster", markerscale=2, fontsize="small")
    ax.set_title(title or f"{np.unique(labels).size} clusters")
    _save(fig, path, fmt)
