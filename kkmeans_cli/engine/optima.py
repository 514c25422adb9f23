"""Better optima: the start mix of a fit and its refinement.

A fit's restarts do not all start alike (:func:`start_kinds`): with the default k-means++ and
several restarts, restart 0 is a spectral start (``spectral.py``) and restart 1 a normalized
spectral one; each converged run is then refined by Hartigan's single-point moves
(``hartigan.py``) when the fit refines. :class:`OptimaState` draws the starts, refines the
runs and records both for ``fit_stats_``. The normalized-cut objective is in ``ncut.py``.
"""
import numpy as np

from .hartigan import refine
from .iterate import iterate
from .spectral import SpectralStarts
from .starts import kmeans_plusplus, random_centres


def start_kinds(init, n_init, objective="kmeans"):
    """The start method of each restart.

    'k-means++' (the default): with several restarts (or the objective 'ncut') restart 0 is
    a spectral start, and for the objective 'kmeans' with three or more restarts restart 1 is
    a normalized spectral start; the others are k-means++. 'spectral': restart 0 spectral,
    restart 1 normalized spectral (objective 'kmeans'), the rest spectral again (new draws of
    the embedding k-means). 'random': every restart random. (For 'ncut' the kernel is already
    degree-normalised, so its spectral start is the normalized one.)
    """
    second = "normalized-spectral" if objective == "kmeans" else None
    if init == "spectral":
        kinds = ["spectral"] * n_init
        if second and n_init >= 2:
            kinds[1] = second
        return kinds
    if init == "k-means++" and (n_init >= 2 or objective == "ncut"):
        kinds = ["spectral"] + ["k-means++"] * (n_init - 1)
        if second and n_init >= 3:
            kinds[1] = second
        return kinds
    return [init] * n_init


class OptimaState:
    """Per-fit bookkeeping of the start mix and the refinement (for ``fit_stats_``), and the
    starts and refinement themselves, from the :class:`~kkmeans_cli.engine.records.FitSpec`
    of the fit (``spec.init`` is 'labels' when starting labels are given)."""

    def __init__(self, spec, n_init):
        given_labels = spec.init == "labels"
        self.spec = spec
        self.kinds = ["labels"] if given_labels else start_kinds(spec.init, n_init,
                                                                spec.objective)
        self.do_refine = spec.refine == "hartigan" or (spec.refine == "auto"
                                                       and not given_labels)
        self.spectral = SpectralStarts(spec.n_threads)
        self.records = []

    def spectral_start(self, source, weights, n_clusters, rng, restart):
        """Labels of a spectral restart; None for other kinds. A spectral start that is not
        possible (no kernel rows, or no positive degrees for the normalized one) becomes
        k-means++, recorded in ``kinds``."""
        kind = self.kinds[restart]
        if kind not in ("spectral", "normalized-spectral"):
            return None
        labels = None
        if hasattr(source, "rows") and n_clusters <= source.n:
            labels = self.spectral.labels(source, weights, n_clusters, rng, kind)
        if labels is None:
            self.kinds[restart] = "k-means++"
        return labels

    def start(self, source, weights, rng, restart=0):
        """Starting labels of restart number ``restart``: its kind of ``kinds`` (a spectral
        start, else random centres or k-means++, ``starts.py``)."""
        k = self.spec.n_clusters
        labels = self.spectral_start(source, weights, k, rng, restart)
        if labels is not None:
            return labels
        if self.kinds[restart] == "random":
            labels, _ = random_centres(source, weights, k, rng)
        else:
            labels, _ = kmeans_plusplus(source, weights, k, rng)
        return labels

    def refine(self, source, weights, result, start):
        """Hartigan's refinement of a converged ``result`` when the fit refines (recorded
        for ``fit_stats_`` either way)."""
        trace = getattr(result, "objective_trace", None)
        record = {"start_objective": float(trace[0]) if trace else None,
                  "lloyd_objective": float(result.inertia), "refine_moves": 0}
        if self.do_refine:
            spec = self.spec
            result, stats = refine(
                source, weights, result, spec.n_clusters,
                lambda labels: iterate(source, weights, labels, spec), spec.n_threads)
            record["refine_moves"] = stats["refine_moves"]
        record["refined_objective"] = float(result.inertia)
        self.records.append(record)
        return result

    def finish(self, inertias):
        """The ``fit_stats_`` entries of the start mix and the refinement of the winner."""
        b = int(np.argmin(inertias))
        stats = {"start_kinds": list(self.kinds[:len(inertias)]),
                 "best_start": self.kinds[b] if b < len(self.kinds) else None,
                 "refine": "hartigan" if self.do_refine else "none",
                 "spectral_method": self.spectral.how}
        if b < len(self.records):
            stats.update(self.records[b])
            stats["restart_refine_moves"] = [r["refine_moves"] for r in self.records]
        return stats
