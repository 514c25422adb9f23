"""The Gaussian step of the default graph fit (``whiten='auto'``): the classification EM of
Gaussian clusters (Celeux & Govaert, "A classification EM algorithm for clustering and two
stochastic versions", 1992) started from the fit's labels, its labels refined on the graph,
kept only where they lower the Gaussian classification criterion while their normalized cut
stays within 1.5 times the fit's; then the Gaussian mixture (``tests/test_graph_mixture.py``).
Checked against NumPy references: the classification, its criterion, the choice replayed by
hand on a set where it is kept and on moons where it is not, predict of the training points,
one and two threads, the report and the memory plan."""
from dataclasses import replace

import numpy as np
import pytest
from sklearn.datasets import make_blobs, make_moons

from helpers import assert_one_error_line, labels_of, run, run_process, write_csv
from reference import (gaussian_cluster_terms, noise_mixture_em, principal_whitened,
                       total_whitened)
from kkmeans_cli import KernelKMeans
from kkmeans_cli.engine.graph import normalized_cut, refine
from kkmeans_cli.kernels import graph_fit
from kkmeans_cli.kernels.graph_fit import (GAUSSIAN_NCUT_RATIO, MIXTURE_NCUT_RATIO,
                                           MIXTURE_NOISE, MIXTURE_NOISE_MAX, MIXTURE_RIDGE,
                                           MIXTURE_TOL, fit_graph, gaussian_classification,
                                           gaussian_step)


def _reference_classification(X, labels, k, passes=50, ridge=1e-3, tol=1e-4):
    """The classification EM by another route: the total covariance's Cholesky factor
    whitens, each pass takes np.cov, inv and det of every cluster and moves every point to
    its cluster of least Mahalanobis distance + ln det − 2 ln share; it stops after a pass
    that moves at most tol·n points."""
    n, d = X.shape
    Z = total_whitened(X)
    labels = np.array(labels)
    for _ in range(passes):
        cost = np.empty((n, k))
        for c in range(k):
            if np.count_nonzero(labels == c) <= d:
                return None
            Zc, S, logdet = gaussian_cluster_terms(Z, labels, c, ridge)
            R = Z - Zc.mean(axis=0)
            cost[:, c] = (np.sum(R @ np.linalg.inv(S) * R, axis=1) + logdet
                          - 2 * np.log(len(Zc) / n))
        moved = cost.argmin(axis=1)
        changed = np.count_nonzero(moved != labels)
        labels = moved
        if changed <= tol * n:
            break
    return labels


def _likelihood_criterion(X, labels, k, ridge=1e-3):
    """What each pass lowers: Σ_i [(x_i − μ_c)ᵀ S_c⁻¹ (x_i − μ_c) + ln det S_c − 2 ln p_c]
    at the parameters the labels give (whitened by the total covariance, plus the ridge)."""
    n = X.shape[0]
    Z = total_whitened(X)
    total = 0.0
    for c in range(k):
        Zc, S, logdet = gaussian_cluster_terms(Z, labels, c, ridge)
        R = Zc - Zc.mean(axis=0)
        total += (np.sum(R @ np.linalg.inv(S) * R) + len(Zc) * logdet
                  - 2 * len(Zc) * np.log(len(Zc) / n))
    return total


def _varied(seed=4):
    """Blobs of spreads 1, 2.5 and 0.5 (scikit-learn's clustering gallery, 'varied'),
    standardized: on seed 4 the graph's fit cuts the wide blob, and the Gaussian step mends
    it."""
    X, y = make_blobs(1500, centers=3, cluster_std=[1.0, 2.5, 0.5], random_state=seed)
    return (X - X.mean(axis=0)) / X.std(axis=0), y


def _moved_labels(X, y, step=13):
    labels = y.copy()
    labels[::step] = (labels[::step] + 1) % 3
    return labels


def test_gaussian_classification_is_the_reference_in_any_blocks(monkeypatch):
    X, y = _varied()
    start = _moved_labels(X, y)
    want = _reference_classification(X, start, 3)
    for block in (graph_fit.SCATTER_BLOCK_ROWS, 7):
        monkeypatch.setattr(graph_fit, "SCATTER_BLOCK_ROWS", block)
        np.testing.assert_array_equal(gaussian_classification(X, start, 3), want)
    for passes in (1, 2):
        np.testing.assert_array_equal(gaussian_classification(X, start, 3, max_iter=passes),
                                      _reference_classification(X, start, 3, passes))
    assert not np.array_equal(want, start)          # it moved points
    # affine invariant where no point is near a tie: the same labels after X·A + b
    A = np.array([[3.0, 1.0], [-2.0, 0.5]])
    np.testing.assert_array_equal(gaussian_classification(X @ A + [7.0, -4.0], start, 3),
                                  want)


def test_the_classification_stops_at_its_tolerance_and_is_the_same_on_any_threads(
        monkeypatch):
    """On 20,000 moons started from a vertical split, the passes end in a tail of a few
    moves each: the classification stops at the first pass that moves at most 10⁻⁴ n = 2
    points, where the reference run to no moves goes on; pieces of 16 rows on one, two and
    four threads give the same labels."""
    X, _ = make_moons(20_000, noise=0.1, random_state=0)
    start = (X[:, 0] > 0.5).astype(np.int64)
    want = _reference_classification(X, start, 2)
    assert graph_fit.GAUSSIAN_MOVED_TOL == 1e-4
    np.testing.assert_array_equal(gaussian_classification(X, start, 2), want)
    assert not np.array_equal(_reference_classification(X, start, 2, tol=0.0), want)
    small = _reference_classification(X[:1500], start[:1500], 2)
    monkeypatch.setattr(graph_fit, "SCATTER_BLOCK_ROWS", 64)
    for threads in (1, 2, 4):
        np.testing.assert_array_equal(gaussian_classification(X, start, 2, n_threads=threads),
                                      want)
        np.testing.assert_array_equal(
            gaussian_classification(X[:1500], start[:1500], 2, n_threads=threads), small)


def test_the_passes_lower_the_classification_likelihood_here():
    """Without the ridge no pass can raise it (Celeux & Govaert); with it the M-step is exact
    for a likelihood penalised by ridge·n_c·tr(S_c⁻¹), which the moves do not weigh: on this
    data every pass lowers it all the same."""
    X, y = _varied(5)
    start = _moved_labels(X, y, step=5)
    values = [_likelihood_criterion(X, start, 3)]
    for passes in (1, 2, 3, 50):
        values.append(_likelihood_criterion(
            X, gaussian_classification(X, start, 3, max_iter=passes), 3))
    assert all(b <= a + 1e-9 * abs(a) for a, b in zip(values, values[1:])), values
    assert values[-1] < values[0]


def test_a_cluster_too_small_for_its_covariance_gives_no_labels():
    X, y = _varied()
    labels = y.copy()
    labels[labels == 2] = 1
    labels[:2] = 2                      # two points in two columns: no covariance
    assert gaussian_classification(X, labels, 3) is None
    assert _reference_classification(X, labels, 3) is None
    fit = fit_graph(X, 3, random_state=0, n_threads=1, whiten=False)
    fit = replace(fit, labels=labels)
    assert gaussian_step(X, fit, 3).gaussian == {"kept": False, "skipped": True}


def _replayed_step(X, fit, k):
    """The Gaussian step by hand: the reference classification of the fit's labels, refined
    on the fit's graph, kept where the reference criterion falls and the cut stays within
    GAUSSIAN_NCUT_RATIO times the fit's."""
    from test_graph_whiten import _reference_criterion

    labels = _reference_classification(X, fit.labels, k)
    if labels is None:          # a cluster too small for its covariance: no step
        return fit.labels, False, None
    nodes = np.zeros(fit.graph.info.n_nodes, dtype=np.int32)
    nodes[fit.graph.node_of if fit.graph.node_of is not None else slice(None)] = labels
    run_ = refine(fit.kernel, nodes, k)
    moved = fit.graph.point_labels(run_.labels)
    ncut = normalized_cut(fit.graph.affinity, run_.labels)
    assert ncut == pytest.approx(run_.sums.ncut(), rel=1e-9, abs=1e-12)
    ratio = ncut / fit.ncut
    keep = bool(_reference_criterion(X, moved, k) < _reference_criterion(X, fit.labels, k)
                and ratio <= GAUSSIAN_NCUT_RATIO)
    return (moved if keep else fit.labels), keep, ratio


def reference_mixture(X, labels, k, X_new=None, covariance_type="full"):
    """The mixture step's EM by another route: scikit-learn's ``GaussianMixture`` (full
    covariances, or with ``covariance_type='tied'`` one shared; ``reg_covar`` the ridge) on X
    whitened by its total covariance's Cholesky factor, started from the labels' shares,
    means and covariances (tied: their pooled one) + ridge·I; its labels of X (or of
    ``X_new`` in the same coordinates), its passes and mean log-likelihood (in those
    coordinates: the total covariance's log-determinant apart)."""
    from sklearn.mixture import GaussianMixture

    X = np.asarray(X, float)
    n, d = X.shape
    L = np.linalg.cholesky(np.cov(X.T, bias=True))
    Z = np.linalg.solve(L, (X - X.mean(axis=0)).T).T
    eye = MIXTURE_RIDGE * np.eye(d)
    means = np.array([Z[labels == c].mean(axis=0) for c in range(k)])
    if covariance_type == "tied":
        pooled = sum((Z[labels == c] - means[c]).T @ (Z[labels == c] - means[c])
                     for c in range(k)) / n
        precisions = np.linalg.inv(pooled + eye)
    else:
        precisions = np.array([np.linalg.inv(np.cov(Z[labels == c].T, bias=True) + eye)
                               for c in range(k)])
    gm = GaussianMixture(
        k, covariance_type=covariance_type, reg_covar=MIXTURE_RIDGE, tol=MIXTURE_TOL,
        max_iter=200, weights_init=np.bincount(labels, minlength=k) / n, means_init=means,
        precisions_init=precisions, random_state=0).fit(Z)
    new = Z if X_new is None else np.linalg.solve(L, (X_new - X.mean(axis=0)).T).T
    reference_mixture.min_variance = float(np.linalg.eigvalsh(gm.covariances_).min())
    return gm.predict(new), gm.n_iter_, gm.lower_bound_


def reference_noise_mixture(X, labels, k, X_new=None, tied=False):
    """The mixture step's EM by another route: ``reference.noise_mixture_em`` (k Gaussians,
    with ``tied`` of one shared covariance, and a uniform component of starting weight
    MIXTURE_NOISE over the box of the points' principal whitened coordinates), its labels of
    X (or of ``X_new`` in the same coordinates), its passes, mean log-likelihood and uniform
    weight; ``reference_noise_mixture.min_variance`` the least variance of its Gaussians."""
    Z, to_z = principal_whitened(X)
    label, passes, log_likelihood, noise, least = noise_mixture_em(
        Z, labels, k, MIXTURE_NOISE, MIXTURE_RIDGE, MIXTURE_TOL, tied=tied)
    reference_noise_mixture.min_variance = least
    return label(Z if X_new is None else to_z(X_new)), passes, log_likelihood, noise


def replayed_mixture(X, graph, labels, ncut, k):
    """The mixture step by hand on a fit's graph, labels and cut (points of continuous
    columns): the reference mixtures (with the uniform component) of full and of tied
    covariances, the tied one taken unless the full one's log-likelihood exceeds it by more
    than Schwarz's criterion charges for its (k − 1) d(d + 1)/2 more parameters (d the
    columns: the points here are of continuous, full-rank columns, so d = d'); its labels
    (``replayed_mixture.covariance`` says which), kept where no
    cluster falls to d points or fewer, they differ from ``labels``, every cluster holds 30
    points or more, no component's variance is 10⁻⁵ or less, the uniform component's weight
    is at most MIXTURE_NOISE_MAX and their normalized cut of the graph is at most
    MIXTURE_NCUT_RATIO times ``ncut``; (labels, kept, ratio)."""
    n, d = X.shape
    full, tied = (reference_noise_mixture(X, labels, k, tied=tied) + (
        reference_noise_mixture.min_variance,) for tied in (False, True))
    gain = 2 * n * (full[2] - tied[2])
    chosen = full if gain > (k - 1) * d * (d + 1) / 2 * np.log(n) else tied
    replayed_mixture.covariance = "full" if chosen is full else "tied"
    mixed, _, _, noise, least = chosen
    sizes = np.bincount(mixed, minlength=k)
    if sizes.min() <= X.shape[1]:
        return labels, False, None
    nodes = np.zeros(graph.info.n_nodes, dtype=np.int32)
    nodes[graph.node_of if graph.node_of is not None else slice(None)] = mixed
    ratio = normalized_cut(graph.affinity, nodes) / ncut
    keep = bool(ratio <= MIXTURE_NCUT_RATIO and sizes.min() >= 30
                and least > 1e-5
                and noise <= MIXTURE_NOISE_MAX
                and not np.array_equal(mixed, labels))
    return (mixed if keep else labels), keep, ratio


def replayed_steps(X, fit, k):
    """The default's last two steps by hand: the Gaussian step, then the mixture step on
    its labels; (labels, step kept, mixture kept)."""
    labels, keep, _ = _replayed_step(X, fit, k)
    nodes = np.zeros(fit.graph.info.n_nodes, dtype=np.int32)
    nodes[fit.graph.node_of if fit.graph.node_of is not None else slice(None)] = labels
    final, mixed, _ = replayed_mixture(X, fit.graph, labels,
                                       normalized_cut(fit.graph.affinity, nodes), k)
    return final, keep, mixed


@pytest.mark.parametrize("name", ["varied", "moons"])
def test_the_step_is_kept_exactly_where_the_rule_says(name):
    if name == "varied":
        X, _ = _varied()
        k = 3
    else:       # the Gaussian clusters of two moons cut through both: the ratio turns them down
        X, _ = make_moons(1500, noise=0.1, random_state=3)
        X = (X - X.mean(axis=0)) / X.std(axis=0)
        k = 2
    fit = fit_graph(X, k, random_state=4, n_threads=1, whiten=False)
    want, keep, ratio = _replayed_step(X, fit, k)
    got = gaussian_step(X, fit, k)
    np.testing.assert_array_equal(got.labels, want)
    assert got.gaussian["kept"] is keep
    assert got.gaussian["ncut_ratio"] == pytest.approx(ratio, rel=1e-9)
    assert keep is (name == "varied")               # each case runs the branch it names
    if name == "moons":
        assert ratio > 2 * GAUSSIAN_NCUT_RATIO and got is not fit and got.ncut == fit.ncut
    else:       # a kept step is a fit of the graph: its sums, cut and objective agree
        assert got.ncut == pytest.approx(normalized_cut(fit.graph.affinity, got.node_labels),
                                         rel=1e-9)
        assert got.objective - got.ncut == pytest.approx(fit.objective - fit.ncut, rel=1e-9)
        np.testing.assert_array_equal(got.sums.vol, np.bincount(
            got.node_labels, weights=fit.kernel.degrees, minlength=k))


def test_the_default_fit_ends_with_the_steps_and_predicts_its_own_labels():
    X, _ = _varied()
    plain = fit_graph(X, 3, random_state=5, n_threads=1, whiten=False)
    default = fit_graph(X, 3, random_state=5, n_threads=1)
    assert default.whitening["kept"] is False       # the refit is turned down on this draw
    want, keep, mixed = replayed_steps(X, plain, 3)
    assert keep and mixed                           # both steps kept here
    np.testing.assert_array_equal(default.labels, want)
    # the estimator: the same labels from one and two threads, predict of the training
    # points is the labels, and the record says what was kept
    one = KernelKMeans(3, random_state=5, n_threads=1).fit(X)
    two = KernelKMeans(3, random_state=5, n_threads=2).fit(X)
    np.testing.assert_array_equal(one.labels_, two.labels_)
    np.testing.assert_array_equal(one.predict(X), one.labels_)
    np.testing.assert_array_equal(one.predict(X[3::7]), one.labels_[3::7])
    record = one.fit_stats_["graph"]["gaussian"]
    assert record["kept"] is True and record["gaussian_criterion"] < record["criterion"]
    assert one.fit_stats_["graph"]["mixture"]["kept"] is True
    for whiten in (False, True):
        graph = KernelKMeans(3, random_state=5, whiten=whiten).fit(X).fit_stats_["graph"]
        assert "gaussian" not in graph and "mixture" not in graph


def test_the_report_names_a_kept_step_and_the_files_keep_its_labels(tmp_path):
    write_csv(tmp_path / "varied.csv", _varied()[0], fmt="%.6f")
    X = np.loadtxt(tmp_path / "varied.csv", delimiter=",", skiprows=1)
    want = KernelKMeans(3, random_state=0).fit(X)
    assert want.fit_stats_["graph"]["gaussian"]["kept"] is True
    done = run(["fit", tmp_path / "varied.csv", "-k", "3", "-o", tmp_path / "m.npz"])
    assert done.exit_code == 0, done.stderr
    assert "; Gaussian step kept; Gaussian mixture kept)" in done.stderr, done.stderr
    np.testing.assert_array_equal(labels_of(done.stdout), want.labels_)
    # predict of the training points through a subprocess: the fit's labels
    again = run_process(["predict", "m.npz", "varied.csv"], cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stdout == done.stdout
    plain = run(["fit", tmp_path / "varied.csv", "-k", "3", "--no-whiten", "--no-model"])
    assert "Gaussian" not in plain.stderr


def test_the_memory_plan_counts_the_step():
    from kkmeans_cli.memory import graph_plan

    rows = graph_fit.SCATTER_BLOCK_ROWS
    for n, k, d in ((100_000, 3, 2), (100_000, 20, 2), (6_000, 10, 64), (20_000, 40, 8),
                    (20_000, 40, 9)):
        auto = graph_plan(n, 21, d, k, whiten="auto")
        classification = 40 * n + 8 * min(n, rows) * (k + 3 * d + 2) + 24 * k * d * d
        # summed in C in up to 8 columns: a block's coordinates and its pieces' moments
        mixture = (16 * n + 8 * min(n, rows) * (3 * d + 1) + 144 * k * d * d if d <= 8 else
                   16 * n + 8 * min(n, rows) * (3 * k + 5 * d + 4) + 48 * k * d * d)
        assert auto.items["Gaussian step"] == max(classification, mixture)
    n, k = 100_000, 3
    for whiten in (False, True):
        assert "Gaussian step" not in graph_plan(n, 21, d, k, whiten=whiten).items
    assert "Gaussian step" not in graph_plan(n, 21, 65, k, whiten="auto").items


def test_a_kept_step_is_the_chosen_run_of_the_fit(monkeypatch):
    """The reported objective is the chosen run's: the Gaussian step is appended to the
    starts as 'gaussian' and is the best restart, whatever the other starts' cuts (the
    mixture, which would move its labels here, turned down by a limit of 0)."""
    X, _ = _varied()
    monkeypatch.setattr(graph_fit, "MIXTURE_NCUT_RATIO", 0.0)
    est = KernelKMeans(3, random_state=4, n_threads=1).fit(X)
    assert est.fit_stats_["graph"]["mixture"]["kept"] is False
    stats = est.fit_stats_
    assert stats["graph"]["gaussian"]["kept"] is True
    assert stats["start_kinds"][-1] == "gaussian" and stats["best_start"] == "gaussian"
    assert stats["best_restart"] == len(stats["start_kinds"]) - 1
    assert est.inertia_ == pytest.approx(stats["restart_inertias"][stats["best_restart"]],
                                         rel=1e-12)
    assert est.ncut_ == pytest.approx(stats["start_ncuts"][-1], rel=1e-12)
    assert est.ncut_ > min(stats["start_ncuts"])     # kept at a cut above the lowest
    # the cut reported is the labels' own, by the definition on the graph
    from kkmeans_cli.model.params import fit_rngs

    same = fit_graph(X, 3, random_state=fit_rngs(4)[1], n_threads=1)
    np.testing.assert_array_equal(same.labels, est.labels_)
    assert est.ncut_ == pytest.approx(normalized_cut(same.graph.affinity, same.node_labels),
                                      rel=1e-9)
    # a step not kept leaves the starts as they were
    plain = KernelKMeans(3, random_state=4, n_threads=1, whiten=False).fit(X).fit_stats_
    assert "gaussian" not in plain["start_kinds"]
    assert plain["best_restart"] == int(np.argmin(plain["start_ncuts"]))


def test_no_step_on_a_cut_of_zero():
    X, _ = make_blobs(400, centers=[[0, 0], [30, 0]], random_state=0)
    fit = fit_graph(X, 2, random_state=0, n_threads=1, whiten=False)
    assert fit.ncut == 0.0
    assert gaussian_step(X, fit, 2) is fit and fit.gaussian is None


def test_columns_of_any_scale_give_the_same_criterion_and_labels_and_no_overflow(monkeypatch):
    """The criterion and the classification work on each column divided by its largest
    |value| and in the directions of the correlation matrix: a column scaled by 10⁻⁸ and
    another by 10⁸, or values near 10¹⁵³ whose squares overflow, change nothing."""
    from kkmeans_cli.kernels.graph_fit import classification_criterion

    X, y = _varied()
    start = _moved_labels(X, y)
    want = gaussian_classification(X, start, 3)
    crit = classification_criterion(X, start, 3)
    for factors in ([1e-8, 1e8], [3e4, 1.0], [1e153, 1e152]):
        Y = X * factors
        np.testing.assert_array_equal(gaussian_classification(Y, start, 3), want)
        assert classification_criterion(Y, start, 3) == pytest.approx(crit, rel=1e-9)
    # the whitening too: the same T up to the scale, no overflow
    from kkmeans_cli.kernels.graph_fit import within_whitening

    np.testing.assert_allclose(within_whitening(X * 1e153, y, 3) * 1e153,
                               within_whitening(X, y, 3), rtol=1e-10)
    # a fit of such values runs the default through without a warning (warnings are errors)
    rng = np.random.default_rng(0)
    lab = rng.integers(0, 3, 300)
    Z = np.zeros((300, 3))
    Z[:, 1:] = rng.normal(size=(300, 2))
    Z[lab == 1, 1] += 1.5
    Z[:, 0] = np.where(lab == 2, -1e153, 1e153)
    record = KernelKMeans(3, random_state=0).fit(Z).fit_stats_["graph"]
    assert record["whitening"]["criterion"] != 0.0
    # there W^{-½} stretches the N(0, 1) columns by 10¹⁵³: T is scaled by a power of two
    # that keeps the whitened points (and their squared distances) within range
    from kkmeans_cli.kernels.graph_fit import predict_graph, whiten_points

    first = fit_graph(Z, 3, random_state=0, n_threads=1, whiten=False).labels
    T = within_whitening(Z, first, 3)
    assert np.abs(whiten_points(Z, T)).max() <= 2.0 ** 500
    monkeypatch.setattr(graph_fit, "WHITENED_MAX", np.inf)
    unscaled = within_whitening(Z, first, 3)        # squares of X·W^{-½} overflow
    assert np.abs(whiten_points(Z, unscaled)).max() > np.sqrt(np.finfo(float).max)
    np.testing.assert_allclose(T / np.abs(T).max(), unscaled / np.abs(unscaled).max(),
                               rtol=1e-12)
    monkeypatch.undo()
    refit = fit_graph(Z, 3, random_state=0, n_threads=1, whiten=True)
    np.testing.assert_array_equal(predict_graph(refit.model(), Z), refit.labels)
    assert "criterion" in record["gaussian"] or record["gaussian"] == {"kept": False,
                                                                        "skipped": True}


def test_data_near_the_smallest_floats_whiten_to_the_same_graph_without_overflow():
    """Points near 10⁻³¹⁰ (subnormal) have a W^{-½} near 10³¹⁰: T is then W^{-½} times a
    power of two, which changes no neighbour, so the whitened fit's labels, and predict of
    its own points, are those of the same points at scale 1 (the points hold 30 bits,
    which 2⁻¹⁰³⁰ keeps exactly; warnings are errors)."""
    from kkmeans_cli.kernels.graph_fit import predict_graph, within_whitening

    X, y = _varied()
    X = np.round(X * 2.0 ** 20) / 2.0 ** 20
    tiny = np.ldexp(X, -1030)
    assert np.array_equal(np.ldexp(tiny, 1030), X) and np.abs(tiny).max() < 2.0 ** -1022
    T = within_whitening(tiny, y, 3)
    top = np.abs(T).max()
    assert np.isfinite(T).all() and 2.0 ** 1021 <= top < 2.0 ** 1022
    ref = within_whitening(X, y, 3)
    np.testing.assert_allclose(T / top, ref / np.abs(ref).max(), rtol=1e-10)
    want = fit_graph(X, 3, random_state=0, n_threads=1, whiten=True)
    got = fit_graph(tiny, 3, random_state=0, n_threads=1, whiten=True)
    np.testing.assert_array_equal(got.labels, want.labels)
    np.testing.assert_array_equal(predict_graph(got.model(), tiny), got.labels)
    est = KernelKMeans(3, random_state=0).fit(tiny)
    np.testing.assert_array_equal(est.labels_, KernelKMeans(3, random_state=0).fit(X).labels_)


def test_a_model_of_data_near_the_smallest_floats_loads_and_refuses_what_overflows(tmp_path):
    """The default's model of subnormal data keeps its mixture with a scale of at least
    2⁻¹⁰²² (a subnormal scale, which the loader refuses, made the file unreadable), loads
    and predicts its own labels; a --whiten model of data near 10⁻³⁰⁰ stretches new points
    by about 10³⁰⁰, and an ordinary point (1, 0) overflows there: refused in one line
    naming its row (the k-d tree found no neighbour for it: an IndexError)."""
    from kkmeans_cli.errors import ValueRangeError

    X, _ = _varied()
    tiny = np.ldexp(np.round(X * 2.0 ** 20) / 2.0 ** 20, -1030)
    np.save(tmp_path / "tiny.npy", tiny)
    done = run(["fit", tmp_path / "tiny.npy", "-k", "3", "--seed", "0",
                "-o", tmp_path / "m.npz"])
    assert done.exit_code == 0, done.stderr
    with np.load(tmp_path / "m.npz", allow_pickle=False) as saved:
        assert saved["graph_mixture_scale"].min() >= np.finfo(np.float64).tiny
    again = run(["predict", tmp_path / "m.npz", tmp_path / "tiny.npy"])
    assert again.exit_code == 0, again.stderr
    np.testing.assert_array_equal(labels_of(again.stdout), labels_of(done.stdout))
    assert run(["info", tmp_path / "m.npz"]).exit_code == 0
    # whitened by 10³⁰⁰: (1, 0) is too far for float64
    small = X * 1e-300
    write_csv(tmp_path / "small.csv", small, fmt="%.17g")
    write_csv(tmp_path / "new.csv", np.array([[0.0, 0.0], [1.0, 0.0]]))
    done = run(["fit", tmp_path / "small.csv", "-k", "3", "--whiten", "--seed", "0",
                "-o", tmp_path / "w.npz"])
    assert done.exit_code == 0, done.stderr
    result = run(["predict", tmp_path / "w.npz", tmp_path / "new.csv",
                  "--labels", tmp_path / "l.txt"])
    assert_one_error_line(result, f"{tmp_path / 'new.csv'}: row 2, column x0: the value 1 "
                                  f"is too far from the training points for floating point "
                                  f"once whitened", code=1)
    assert not (tmp_path / "l.txt").exists()
    est = KernelKMeans(3, whiten=True, random_state=0).fit(small)
    np.testing.assert_array_equal(est.predict(small), est.labels_)
    with pytest.raises(ValueRangeError, match="X row 1, column 0: the value 1 is too far"):
        est.predict(np.array([[0.0, 0.0], [1.0, 0.0]]))
    # the first such row, whether its whitened values overflow to infinity or only their
    # squares do, at the column stretched most
    with pytest.raises(ValueRangeError, match=r"X row 1, column 1: the value 1e-10 is too"):
        est.predict(np.array([[0.0, 0.0], [0.0, 1e-10], [1e10, 0.0]]))
    with pytest.raises(ValueRangeError, match=r"X row 1, column 0: the value 1e\+10 is too"):
        est.predict(np.array([[0.0, 0.0], [1e10, 0.0], [0.0, 1e-10]]))


def test_the_memory_plan_bounds_the_classification_and_the_mixture_measured(monkeypatch):
    """The classification's and the mixture's own arrays (the graph's passes the
    classification then starts are the fit's, planned as such; the split test after them
    reads at most SPLIT_SAMPLE rows), in one block and in several, on one thread and on
    four (a block's pieces at once): each at most the plan, which is at most twice the
    larger (the plan holds for four threads). How many of the four threads' pieces are
    alive at once is the scheduler's choice (the same step's peak measured 4.8–5.9 MB at
    20,000 × 8), so a four-thread run below half the plan is measured again, up to three
    times in all."""
    import tracemalloc

    from kkmeans_cli import memory
    from kkmeans_cli.kernels.graph_fit import gaussian_mixture
    from kkmeans_cli.memory import graph_plan

    rng = np.random.default_rng(0)
    for n, d, k, block in ((20_000, 8, 5, 1 << 16), (6_000, 64, 10, 1 << 16),
                           (20_000, 8, 5, 3_000), (200_000, 2, 2, 1 << 16),
                           (100_000, 2, 20, 1 << 16)):
        monkeypatch.setattr(graph_fit, "SCATTER_BLOCK_ROWS", block)
        monkeypatch.setattr(memory, "SCATTER_BLOCK_ROWS", block)
        X = rng.normal(size=(n, d)) + np.repeat(np.eye(k, d) * 6, n // k, axis=0)
        labels = np.repeat(np.arange(k), n // k)
        labels[::7] = (labels[::7] + 1) % k
        planned = graph_plan(n, 21, d, k, whiten="auto").items["Gaussian step"]
        peaks = []
        for step in (gaussian_classification, gaussian_mixture):
            for threads in (1, 4):
                for _ in range(3 if threads > 1 else 1):
                    tracemalloc.start()
                    step(X, labels, k, n_threads=threads)
                    peaks.append(tracemalloc.get_traced_memory()[1])
                    tracemalloc.stop()
                    if 2 * peaks[-1] >= planned:
                        break
        assert max(peaks) <= planned <= 2 * max(peaks), (n, d, k, block, peaks, planned)


def test_the_records_reach_the_model_the_json_summary_and_info(tmp_path):
    write_csv(tmp_path / "varied.csv", _varied()[0], fmt="%.6f")
    X = np.loadtxt(tmp_path / "varied.csv", delimiter=",", skiprows=1)
    want = KernelKMeans(3, random_state=0).fit(X).fit_stats_["graph"]
    done = run_process(["fit", "varied.csv", "-k", "3", "--json", "-o", "m.npz"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    import json

    summary = json.loads(done.stdout)
    for key in ("whitening", "gaussian", "mixture", "split_test"):
        assert summary["graph"][key] == pytest.approx(want[key]), key
    assert summary["graph"]["gaussian"]["kept"] is True
    assert summary["graph"]["mixture"]["kept"] is True
    shown = run(["info", tmp_path / "m.npz"])
    assert shown.exit_code == 0, shown.stderr
    assert "; Gaussian step kept; Gaussian mixture kept)" in shown.stdout, shown.stdout
    with np.load(tmp_path / "m.npz", allow_pickle=False) as saved:
        meta = json.loads(str(saved["meta"]))
    for key in ("gaussian", "mixture"):
        assert meta["graph"][key] == summary["graph"][key]
    # predict reads none of it: the same labels as the fit
    again = run_process(["predict", "m.npz", "varied.csv"], cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    np.testing.assert_array_equal(labels_of(again.stdout),
                                  KernelKMeans(3, random_state=0).fit(X).labels_)


def fitted_model_arrays(tmp_path):
    """(arrays, meta) of the model ``kkmeans fit`` writes for the varied blobs (seed 4) with
    only ``-k 3``, in ``tmp_path`` beside its CSV ``varied.csv``."""
    import json

    write_csv(tmp_path / "varied.csv", _varied()[0], fmt="%.6f")
    assert run(["fit", tmp_path / "varied.csv", "-k", "3", "-o", tmp_path / "m.npz"]
               ).exit_code == 0
    with np.load(tmp_path / "m.npz") as z:
        arrays = {name: z[name] for name in z.files}
    return arrays, json.loads(str(arrays["meta"]))


def test_a_model_whose_records_are_damaged_is_refused(tmp_path):
    """The records are informational, but info shows them: a record that is not an object
    of numbers with a true/false 'kept' is refused by every reader, in one line."""
    import json

    from helpers import assert_one_error_line, listing

    arrays, meta = fitted_model_arrays(tmp_path)
    assert {"whitening", "gaussian", "mixture"} <= set(meta["graph"])
    for key in ("whitening", "gaussian", "mixture"):
        for bad in ("oops", {"criterion": -1.0}, {"kept": "yes"}, {"kept": True, "x": "y"},
                    *([{"kept": False, "turned_down_by": bad} for bad in (5, -1, 2.0, True)]
                      if key == "whitening" else [])):
            path = tmp_path / "bad.npz"
            np.savez(path, **{**arrays, "meta": np.array(json.dumps(
                {**meta, "graph": {**meta["graph"], key: bad}}))})
            before = listing(tmp_path)
            for args in (["info", path], ["predict", path, tmp_path / "varied.csv"]):
                result = run(args)
                assert_one_error_line(result, str(path), f"meta 'graph.{key}", code=1)
            assert listing(tmp_path) == before
    # a record written before the refit's tests were recorded is shown without the reason
    record = {key: value for key, value in meta["graph"]["whitening"].items()
              if key not in ("turned_down_by", "first_ncut")}
    path = tmp_path / "old.npz"
    np.savez(path, **{**arrays, "meta": np.array(json.dumps(
        {**meta, "graph": {**meta["graph"], "whitening": dict(record, kept=False)}}))})
    shown = run(["info", path])
    assert shown.exit_code == 0, shown.stderr
    assert "; whitened refit not kept" in shown.stdout and "not kept:" not in shown.stdout


def test_a_column_constant_but_for_rounding_is_dropped_and_small_clusters_give_no_labels():
    from kkmeans_cli.kernels.graph_fit import CONSTANT_SPREAD, classification_criterion

    X, y = _varied()
    start = _moved_labels(X, y)
    rng = np.random.default_rng(0)
    noise = 0.3 + rng.integers(-2, 3, len(X)) * np.spacing(0.3)      # 0.3 ± 2 ulp
    assert 0 < noise.std() / 0.3 <= CONSTANT_SPREAD
    with_noise = np.c_[X, noise]
    by_noise = (noise > 0.3).astype(int) + (noise < 0.3)               # labels it would favour
    for labels in (start, by_noise):
        assert classification_criterion(with_noise, labels, 3) == pytest.approx(
            classification_criterion(X, labels, 3), rel=1e-9)
    np.testing.assert_array_equal(gaussian_classification(with_noise, start, 3),
                                  gaussian_classification(X, start, 3))
    # a pass that leaves a cluster of d' points or fewer, even the last one: no labels
    Xb, _ = make_blobs(300, centers=3, random_state=4)
    for trial in range(300):
        labels = np.random.default_rng(trial).integers(0, 6, 300)
        for passes in (1, 2, 3):
            out = gaussian_classification(Xb, labels, 6, max_iter=passes)
            assert out is None or np.bincount(out, minlength=6).min() > 2, (trial, passes)
