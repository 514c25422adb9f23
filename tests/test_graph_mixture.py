"""The mixture step of the default graph fit (``whiten='auto'``): the EM of a Gaussian
mixture with a covariance and a weight per component (Dempster, Laird & Rubin 1977) beside a
uniform component (Banfield & Raftery 1993), started from the labels the Gaussian step left,
its labels kept only where their normalized cut of the fit's graph stays within 10 times the
fit's; predict then labels new points by the
mixture. Checked against scikit-learn's ``GaussianMixture`` from the same start (without the
uniform component) and a dense NumPy EM (with it), SciPy's densities, the rule replayed by
hand where it is kept, turned down and skipped, one and two threads, the model file and its
damaged arrays."""
import json

import numpy as np
import pytest
from sklearn.datasets import make_blobs, make_circles, make_moons

from helpers import (assert_one_error_line, labels_of, listing, run, run_process, three_rings,
                     write_csv)
from test_graph_gaussian import (fitted_model_arrays, reference_mixture, reference_noise_mixture,
                                 replayed_mixture)
from kkmeans_cli import KernelKMeans
from kkmeans_cli.engine.graph import normalized_cut
from kkmeans_cli.kernels import graph_fit
from kkmeans_cli.kernels.graph_fit import (MIXTURE_DISCRETE_MAX, MIXTURE_MIN_POINTS,
                                           MIXTURE_MIN_VARIANCE, MIXTURE_NCUT_RATIO,
                                           MIXTURE_NOISE, MIXTURE_NOISE_MAX, MIXTURE_TOL,
                                           covariance_choice, distinct_values, fit_graph,
                                           gaussian_mixture, gaussian_step, mixture_step)


def _varied(seed=4, n=1500):
    """Blobs of spreads 1, 2.5 and 0.5 (scikit-learn's clustering gallery, 'varied'),
    standardized."""
    X, y = make_blobs(n, centers=3, cluster_std=[1.0, 2.5, 0.5], random_state=seed)
    return (X - X.mean(axis=0)) / X.std(axis=0), y


def _standard(X):
    return (X - X.mean(axis=0)) / X.std(axis=0)


@pytest.mark.parametrize("seed", [4, 5, 0])
def test_the_em_is_scikit_learns_gaussian_mixture(seed, monkeypatch):
    """The same passes, labels and mean log-likelihood as ``GaussianMixture`` started from
    the same labels; in blocks of 7 rows the same labels and passes (sums in another order),
    and on 1, 2 and 4 threads the same mixture to the bit."""
    X, _ = _varied(seed)
    start = fit_graph(X, 3, random_state=seed, n_threads=1, whiten=False).labels
    mixture, info = gaussian_mixture(X, start, 3)
    labels, _ = mixture.labels(X)
    want, want_passes, want_log_likelihood = reference_mixture(X, start, 3)
    assert info["n_iter"] == want_passes > 1 and info["converged"] is True
    np.testing.assert_array_equal(labels, want)
    assert info["log_likelihood"] == pytest.approx(want_log_likelihood, rel=1e-9, abs=1e-12)
    assert not np.array_equal(labels, start)            # it moved points
    # the least variance is that of the covariances the maps hold
    assert info["min_variance"] == pytest.approx(min(
        1 / np.linalg.eigvalsh(m @ m.T).max() for m in mixture.maps), rel=1e-9)
    monkeypatch.setattr(graph_fit, "SCATTER_BLOCK_ROWS", 7)
    small, small_info = gaussian_mixture(X, start, 3)
    assert small_info["n_iter"] == info["n_iter"]
    assert small_info["log_likelihood"] == pytest.approx(info["log_likelihood"], rel=1e-12)
    np.testing.assert_array_equal(small.labels(X)[0], labels)
    for threads in (2, 4):
        again, again_info = gaussian_mixture(X, start, 3, n_threads=threads)
        assert again_info == small_info
        for name, value in small.arrays().items():
            np.testing.assert_array_equal(again.arrays()[name], value)


def _brute_force_pass(Z, means, covariances, weights, log_noise):
    """One E-step and the M-step's sums by dense NumPy: every point's log densities under
    each Gaussian (by ``numpy.linalg`` inverses and determinants), their log-sum-exp beside
    the uniform component's, the posteriors and the weighted moments about the means."""
    k, d = means.shape
    logp = np.empty((Z.shape[0], k))
    for c in range(k):
        D = Z - means[c]
        maha = np.einsum("ij,jk,ik->i", D, np.linalg.inv(covariances[c]), D)
        logp[:, c] = (np.log(weights[c]) - 0.5 * np.linalg.slogdet(covariances[c])[1]
                      - 0.5 * d * np.log(2 * np.pi) - 0.5 * maha)
    every = np.c_[logp, np.full(Z.shape[0], log_noise)]
    top = every.max(axis=1, keepdims=True)
    density = np.exp(every - top).sum(axis=1)
    r = np.exp(every - top) / density[:, None]
    first = np.stack([r[:, c] @ (Z - means[c]) for c in range(k)])
    second = np.stack([(Z - means[c]).T @ ((Z - means[c]) * r[:, c:c + 1])
                       for c in range(k)])
    return (r[:, :k].sum(axis=0), first, second, float((np.log(density) + top[:, 0]).sum()),
            float(r[:, k].sum()))


@pytest.mark.parametrize("log_noise", [-np.inf, -6.0])
def test_the_compiled_pass_is_a_brute_force_e_step(log_noise):
    """``engine._mixture``: the inverses of lower-triangular factors are NumPy's (zero above
    the diagonal), and a pass over points in pieces of 37 rows, 40 Gaussians in 3 coordinates
    (most points' posteriors under far Gaussians underflow to 0), gives dense NumPy's sums,
    piece by piece; on 1, 2 and 3 threads the same sums to the bit."""
    from kkmeans_cli.engine import _mixture

    rng = np.random.default_rng(7)
    k, d, n, piece = 40, 3, 500, 37
    means = rng.uniform(-60, 60, (k, d))
    A = rng.normal(size=(k, d, d))
    covariances = A @ A.transpose(0, 2, 1) + 0.5 * np.eye(d)
    weights = rng.dirichlet(np.ones(k))
    Z = means[rng.integers(0, k, n)] + rng.normal(0, 2, (n, d))
    L = np.linalg.cholesky(covariances)
    inverses = _mixture.triangular_inverses(L)
    np.testing.assert_allclose(inverses, np.linalg.inv(L), rtol=1e-12, atol=1e-14)
    assert np.all(np.triu(inverses, 1) == 0)
    consts = (2 * np.log(np.diagonal(L, axis1=1, axis2=2)).sum(axis=1) - 2 * np.log(weights)
              + d * np.log(2 * np.pi))
    got = _mixture.mixture_sums(Z, means, inverses, consts, log_noise, piece, 1)
    assert got[0].shape == (14, k) and got[2].shape == (14, k, d, d)
    for t in range(14):
        rows = Z[t * piece:(t + 1) * piece]
        want = _brute_force_pass(rows, means, covariances, weights, log_noise)
        for have, expected in zip(got, want):
            np.testing.assert_allclose(have[t], expected, rtol=1e-9, atol=1e-9)
    assert np.count_nonzero(got[0] == 0) > 0                  # pieces far from a Gaussian
    for threads in (2, 3):
        again = _mixture.mixture_sums(Z, means, inverses, consts, log_noise, piece, threads)
        for have, expected in zip(again, got):
            np.testing.assert_array_equal(have, expected)


def test_the_compiled_and_the_numpy_passes_give_the_same_em(monkeypatch):
    """In few coordinates the EM's passes run in C (``_compiled_sums``), in many by NumPy
    (``_pieces_sums``): on the same 2-D points, forced through either, the same passes,
    labels and mean log-likelihood, with and without the uniform component."""
    X, _ = _varied(4)
    start = fit_graph(X, 3, random_state=4, n_threads=1, whiten=False).labels
    for noise in (0.0, MIXTURE_NOISE):
        compiled, info = gaussian_mixture(X, start, 3, noise=noise)
        with monkeypatch.context() as patch:
            patch.setattr(graph_fit, "MIXTURE_COMPILED_MAX_DIM", 1)
            numpy_route, numpy_info = gaussian_mixture(X, start, 3, noise=noise)
        assert numpy_info["n_iter"] == info["n_iter"] > 1
        assert numpy_info["log_likelihood"] == pytest.approx(info["log_likelihood"],
                                                             rel=1e-12)
        np.testing.assert_array_equal(numpy_route.labels(X)[0], compiled.labels(X)[0])
        np.testing.assert_allclose(numpy_route.means, compiled.means, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("seed", [4, 5])
def test_the_uniform_component_is_a_brute_force_em(seed, monkeypatch):
    """With a uniform component (Banfield & Raftery 1993): the same passes, labels, mean
    log-likelihood and uniform weight as a dense NumPy EM over the box of the points'
    principal whitened coordinates, from the same start; the same mixture to the bit in
    blocks of 7 rows and on 1, 2 and 4 threads."""
    X, _ = _varied(seed)
    start = fit_graph(X, 3, random_state=seed, n_threads=1, whiten=False).labels
    mixture, info = gaussian_mixture(X, start, 3, noise=MIXTURE_NOISE)
    want, passes, log_likelihood, noise = reference_noise_mixture(X, start, 3)
    np.testing.assert_array_equal(mixture.labels(X)[0], want)
    assert info["n_iter"] == passes > 1 and info["converged"] is True
    assert info["log_likelihood"] == pytest.approx(log_likelihood, rel=1e-9)
    assert info["noise_weight"] == pytest.approx(noise, rel=1e-6, abs=1e-12)
    assert 0.0 < info["noise_weight"] < MIXTURE_NOISE      # clean blobs: it fades
    assert gaussian_mixture(X, start, 3)[1]["noise_weight"] == 0.0
    monkeypatch.setattr(graph_fit, "SCATTER_BLOCK_ROWS", 7)
    small, small_info = gaussian_mixture(X, start, 3, noise=MIXTURE_NOISE)
    assert small_info["n_iter"] == info["n_iter"]
    assert small_info["noise_weight"] == pytest.approx(info["noise_weight"], rel=1e-12)
    np.testing.assert_array_equal(small.labels(X)[0], want)
    for threads in (2, 4):
        again, again_info = gaussian_mixture(X, start, 3, n_threads=threads,
                                             noise=MIXTURE_NOISE)
        assert again_info == small_info
        for name, value in small.arrays().items():
            np.testing.assert_array_equal(again.arrays()[name], value)


def test_with_the_uniform_component_shifted_scaled_or_reordered_columns_give_the_same_mixture():
    """The box is taken along the principal axes of the points' correlation matrix, which
    shifts, scales and orders of the columns leave as they are: the same labels, passes,
    log-likelihood and uniform weight. A starting weight outside [0, 1) is refused."""
    rng = np.random.default_rng(9)
    X, _ = make_blobs(1500, centers=4, random_state=9)
    X = np.vstack([X, rng.uniform(X.min(axis=0), X.max(axis=0), (105, 2))])
    start = fit_graph(X, 4, random_state=9, n_threads=1, whiten=False).labels
    mixture, info = gaussian_mixture(X, start, 4, noise=MIXTURE_NOISE)
    labels = mixture.labels(X)[0]
    assert info["noise_weight"] > 0.02
    for Y in (X * [1e3, 0.5] + [-7.0, 40.0], X[:, ::-1]):
        moved, moved_info = gaussian_mixture(Y, start, 4, noise=MIXTURE_NOISE)
        np.testing.assert_array_equal(moved.labels(Y)[0], labels)
        assert moved_info["n_iter"] == info["n_iter"]
        assert moved_info["log_likelihood"] == pytest.approx(info["log_likelihood"], rel=1e-7)
        assert moved_info["noise_weight"] == pytest.approx(info["noise_weight"], rel=1e-7)
    for bad in (1.0, -0.01, float("nan")):
        with pytest.raises(ValueError, match=r"noise must be in \[0, 1\)"):
            gaussian_mixture(X, start, 4, noise=bad)


@pytest.mark.parametrize("seed", [9, 1])
def test_scattered_outliers_go_to_the_uniform_component(seed):
    """Four blobs among 7 % points drawn uniformly over their box: without the uniform
    component one Gaussian widens to take the outliers in and the blobs' labels suffer; with
    it the uniform weight comes out near the outliers' share, the four Gaussians stay as
    alike as the blobs are, and the blobs' labels agree with the truth better."""
    from sklearn.metrics import adjusted_rand_score

    rng = np.random.default_rng(seed)
    X, y = make_blobs(1500, centers=4, random_state=seed)
    X = np.vstack([X, rng.uniform(X.min(axis=0), X.max(axis=0), (105, 2))])
    start = fit_graph(X, 4, random_state=seed, n_threads=1, whiten=False).labels
    got = {}
    for noise in (0.0, MIXTURE_NOISE):
        mixture, info = gaussian_mixture(X, start, 4, noise=noise)
        spread = [np.linalg.det(np.linalg.inv(m @ m.T)) for m in mixture.maps]
        got[noise] = (adjusted_rand_score(y, mixture.labels(X)[0][:1500]),
                      max(spread) / min(spread), info["noise_weight"])
    (plain, plain_spread, _), (kept, spread, weight) = got[0.0], got[MIXTURE_NOISE]
    assert 0.02 < weight < 0.1
    assert spread < 2.0 < 4.0 < plain_spread
    assert kept > plain + 0.05


def _rings(n=501, noise=0.05, seed=29):
    return three_rings(n, noise, seed)[0]


def test_a_mixture_whose_uniform_component_takes_a_quarter_of_the_points_is_turned_down(
        monkeypatch):
    """On three rings of 500 points, which three Gaussians do not explain, the uniform
    component takes over half of the points: the mixture is turned down by that rule alone
    (every other rule passes: it is kept with the rule lifted), and the Gaussian step's
    labels stand."""
    X = _rings()
    step = gaussian_step(X, fit_graph(X, 3, random_state=29, n_threads=1, whiten=False), 3)
    got = mixture_step(X, step, 3)
    record = got.mixture
    assert record["kept"] is False and record["noise_weight"] > 2 * MIXTURE_NOISE_MAX
    assert record["ncut_ratio"] <= MIXTURE_NCUT_RATIO
    assert record["min_points"] >= MIXTURE_MIN_POINTS
    assert record["min_variance"] > MIXTURE_MIN_VARIANCE
    np.testing.assert_array_equal(got.labels, step.labels)
    monkeypatch.setattr(graph_fit, "MIXTURE_NOISE_MAX", 1.0)
    lifted = mixture_step(X, step, 3)
    assert lifted.mixture == dict(record, kept=True)
    assert not np.array_equal(lifted.labels, step.labels)


def test_the_mixture_is_affine_invariant_and_its_costs_are_scipys_densities():
    """Without the uniform component X·A + b gives the same labels; a component's cost is
    −2 ln(w_c N(z; μ_c, S_c)), SciPy's density in the mixture's coordinates."""
    from scipy.stats import multivariate_normal

    X, y = _varied(5)
    start = fit_graph(X, 3, random_state=5, n_threads=1, whiten=False).labels
    mixture, _ = gaussian_mixture(X, start, 3)
    labels, costs = mixture.labels(X, want_costs=True)
    A = np.array([[3.0, 1.0], [-2.0, 0.5]])
    moved, _ = gaussian_mixture(X @ A + [7.0, -4.0], start, 3)
    np.testing.assert_array_equal(moved.labels(X @ A + [7.0, -4.0])[0], labels)
    Z = mixture.coordinates(X)
    for c in range(3):
        precision = mixture.maps[c] @ mixture.maps[c].T
        S = np.linalg.inv(precision)
        log_weight = (np.linalg.slogdet(S)[1] + 2 * np.log(2 * np.pi) - mixture.consts[c]) / 2
        density = multivariate_normal(mixture.means[c], S).logpdf(Z)
        np.testing.assert_allclose(costs[:, c], -2 * (log_weight + density), rtol=1e-9,
                                   atol=1e-9)
    np.testing.assert_array_equal(labels, np.argmin(costs, axis=1))
    weights = np.exp([(np.linalg.slogdet(np.linalg.inv(m @ m.T))[1] + 2 * np.log(2 * np.pi)
                       - k) / 2 for m, k in zip(mixture.maps, mixture.consts)])
    assert weights.sum() == pytest.approx(1.0, rel=1e-9)


def test_the_step_is_kept_exactly_where_the_cut_allows():
    """Replayed by hand: kept on overlapping blobs (its cut within 10 times the fit's, its
    sums, cut and objective those of its labels on the graph), turned down on two moons
    (the ellipsoids cut through both, here at 14 times the fit's cut; where they cut less,
    the split test undoes them: ``test_graph_split``), on two rings the tied mixture (the
    full one's components each swallow both rings: a cluster of d points or fewer), which
    halves both rings at about twice their cut and is kept, and the split test then undoes
    it; not tried on a cut of zero."""
    X, _ = _varied()
    fit = gaussian_step(X, fit_graph(X, 3, random_state=4, n_threads=1, whiten=False), 3)
    want, keep, ratio = replayed_mixture(X, fit.graph, fit.labels, fit.ncut, 3)
    got = mixture_step(X, fit, 3)
    assert keep and got.mixture["kept"] is True and got.mixture_model is not None
    np.testing.assert_array_equal(got.labels, want)
    assert got.mixture["ncut_ratio"] == pytest.approx(ratio, rel=1e-9)
    assert 1.0 < ratio <= MIXTURE_NCUT_RATIO
    assert got.ncut == pytest.approx(normalized_cut(fit.graph.affinity, got.node_labels),
                                     rel=1e-9)
    assert got.objective - got.ncut == pytest.approx(fit.objective - fit.ncut, rel=1e-9)
    np.testing.assert_array_equal(got.sums.vol, np.bincount(
        got.node_labels, weights=fit.kernel.degrees, minlength=3))
    # two moons: turned down, the fit's labels and cut as they were
    M = _standard(make_moons(1500, noise=0.1, random_state=1)[0])
    fit = fit_graph(M, 2, random_state=4, n_threads=1, whiten=False)
    want, keep, ratio = replayed_mixture(M, fit.graph, fit.labels, fit.ncut, 2)
    got = mixture_step(M, fit, 2)
    assert not keep and ratio > 1.2 * MIXTURE_NCUT_RATIO
    assert got.mixture["kept"] is False and got.mixture_model is None
    assert got.mixture["ncut_ratio"] == pytest.approx(ratio, rel=1e-9)
    np.testing.assert_array_equal(got.labels, fit.labels)
    assert got.ncut == fit.ncut
    # two rings: the full mixture's labels leave a cluster empty; the tied one, whose two
    # Gaussians share a covariance and sit side by side, halves both rings
    C = _standard(make_circles(1500, factor=0.5, noise=0.1, random_state=1)[0])
    fit = fit_graph(C, 2, random_state=1, n_threads=1, whiten=False)
    full, _ = gaussian_mixture(C, fit.labels, 2, noise=MIXTURE_NOISE)
    assert np.bincount(full.labels(C)[0], minlength=2).min() == 0
    want, keep, ratio = replayed_mixture(C, fit.graph, fit.labels, fit.ncut, 2)
    assert keep and replayed_mixture.covariance == "tied" and ratio < 3.0
    got = mixture_step(C, fit, 2)
    assert got.mixture["kept"] is True and got.mixture["tied"] is True
    assert got.mixture["agreement"] < 0.1
    np.testing.assert_array_equal(got.labels, want)
    # ... where the whole default's split test finds the rings' clusters not Gaussian
    whole = fit_graph(C, 2, random_state=1, n_threads=1)
    assert whole.split_test["kept"] is False
    np.testing.assert_array_equal(whole.labels, fit_graph(C, 2, random_state=1, n_threads=1,
                                                          whiten=False).labels)
    # a cut of zero: the graph's exact answer
    B, _ = make_blobs(400, centers=[[0, 0], [30, 0]], random_state=0)
    fit = fit_graph(B, 2, random_state=0, n_threads=1, whiten=False)
    assert fit.ncut == 0.0 and mixture_step(B, fit, 2) is fit


def test_repeated_points_share_a_label_and_a_collapsing_component_is_skipped():
    X, _ = _varied()
    Xr = np.r_[X, X[::3]]                               # a third of the points twice
    fit = gaussian_step(Xr, fit_graph(Xr, 3, random_state=4, n_threads=1, whiten=False), 3)
    got = mixture_step(Xr, fit, 3)
    assert got.mixture["kept"] is True
    np.testing.assert_array_equal(got.labels[len(X):], got.labels[:len(X)][::3])
    np.testing.assert_array_equal(got.labels, fit.graph.point_labels(got.node_labels))
    # a start whose cluster has d points: no covariance, no mixture
    labels = fit.labels.copy()
    labels[labels == 2] = 1
    labels[:2] = 2
    assert gaussian_mixture(Xr, labels, 3) is None


def test_the_default_predicts_new_points_by_the_mixture():
    """predict of the training points is labels_; of new points, the reference mixture's
    labels from the same start (the Gaussian step's labels); transform gives the mixture's
    costs, whose least is the label; one and two threads give the same labels."""
    X, _ = _varied()
    est = KernelKMeans(3, random_state=4, n_threads=1).fit(X)
    assert est.fit_stats_["graph"]["mixture"]["kept"] is True
    np.testing.assert_array_equal(est.predict(X), est.labels_)
    np.testing.assert_array_equal(est.predict(X[5::11]), est.labels_[5::11])
    from kkmeans_cli.model.params import fit_rngs

    first = fit_graph(X, 3, random_state=fit_rngs(4)[1], n_threads=1, whiten=False)
    step = gaussian_step(X, first, 3)
    new, _ = _varied(9, n=600)
    want, _, _, _ = reference_noise_mixture(X, step.labels, 3, X_new=new)
    np.testing.assert_array_equal(est.predict(new), want)
    D = est.transform(new)
    np.testing.assert_array_equal(np.argmin(D, axis=1), est.predict(new))
    # 2,400 points: below 2,000 a fit runs on one thread whatever n_threads says
    X2, _ = _varied(4, n=2400)
    one = KernelKMeans(3, random_state=1, n_threads=1).fit(X2)
    two = KernelKMeans(3, random_state=1, n_threads=2).fit(X2)
    assert one.fit_stats_["graph"]["mixture"]["kept"] is True
    np.testing.assert_array_equal(one.labels_, two.labels_)
    np.testing.assert_array_equal(one.predict(new), two.predict(new))


def test_the_model_file_keeps_the_mixture_and_predict_uses_it(tmp_path):
    X, _ = _varied()
    write_csv(tmp_path / "varied.csv", X, fmt="%.6f")
    new, _ = _varied(9, n=600)
    write_csv(tmp_path / "new.csv", new, fmt="%.6f")
    X = np.loadtxt(tmp_path / "varied.csv", delimiter=",", skiprows=1)
    new = np.loadtxt(tmp_path / "new.csv", delimiter=",", skiprows=1)
    est = KernelKMeans(3, random_state=0).fit(X)
    assert est.fit_stats_["graph"]["mixture"]["kept"] is True
    done = run(["fit", tmp_path / "varied.csv", "-k", "3", "-o", tmp_path / "m.npz"])
    assert done.exit_code == 0, done.stderr
    np.testing.assert_array_equal(labels_of(done.stdout), est.labels_)
    with np.load(tmp_path / "m.npz", allow_pickle=False) as saved:
        assert set(graph_fit.GraphModel.MIXTURE_ARRAYS) <= set(saved.files)
    again = run_process(["predict", "m.npz", "new.csv"], cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    np.testing.assert_array_equal(labels_of(again.stdout), est.predict(new))
    same = run_process(["predict", "m.npz", "varied.csv"], cwd=tmp_path)
    assert same.stdout == done.stdout


def test_a_model_whose_mixture_is_damaged_is_refused(tmp_path):
    """Every reader refuses, in one line and writing nothing, a mixture array missing, of
    the wrong shape, not finite or naming a column out of range, and a record that says
    kept without the arrays (or arrays the record does not keep)."""
    arrays, meta = fitted_model_arrays(tmp_path)
    assert meta["graph"]["mixture"]["kept"] is True
    names = graph_fit.GraphModel.MIXTURE_ARRAYS
    nan_maps = arrays["graph_mixture_maps"].copy()
    nan_maps[0, 0, 0] = np.nan
    cases = [({name: None for name in names[:1]}, "must come together"),
             ({"graph_mixture_columns": np.array([0, 2])}, "'graph_mixture_columns'"),
             ({"graph_mixture_columns": np.array([1, 0])}, "'graph_mixture_columns'"),
             ({"graph_mixture_maps": nan_maps}, "'graph_mixture_maps' must hold finite"),
             ({"graph_mixture_projection": np.ones((2, 3))}, "shapes"),
             ({"graph_mixture_scale": -arrays["graph_mixture_scale"]}, "positive"),
             ({"graph_mixture_scale": np.full_like(arrays["graph_mixture_scale"], 1e-320)},
              "not subnormal"),
             ({name: None for name in names}, "meta 'graph.mixture.kept'"),
             ({"meta": np.array(json.dumps({**meta, "format_version": 2}))},
              "need format_version 3")]
    for change, needle in cases:
        damaged = {name: value for name, value in {**arrays, **change}.items()
                   if value is not None}
        path = tmp_path / "bad.npz"
        np.savez(path, **damaged)
        before = listing(tmp_path)
        for args in (["info", path], ["predict", path, tmp_path / "varied.csv"]):
            result = run(args)
            assert_one_error_line(result, str(path), needle, code=1)
        assert listing(tmp_path) == before
    # arrays beside a record that kept no mixture
    path = tmp_path / "bad.npz"
    np.savez(path, **{**arrays, "meta": np.array(json.dumps(
        {**meta, "graph": {**meta["graph"], "mixture": {"kept": False}}}))})
    assert_one_error_line(run(["info", path]), "meta 'graph.mixture.kept'", code=1)
    # finite arrays whose costs overflow: the model loads, predict refuses the rows
    np.savez(path, **{**arrays, "graph_mixture_maps": arrays["graph_mixture_maps"] * 1e300})
    assert run(["info", path]).exit_code == 0
    before = listing(tmp_path)
    result = run(["predict", path, tmp_path / "varied.csv", "--labels", tmp_path / "l.txt"])
    line = assert_one_error_line(result, f"{tmp_path / 'varied.csv'}: row 1, column ",
                                 "Gaussian mixture gives the point no finite cost", code=1)
    # the row of the file (1-based, as every range error of DATA) and its largest value's column
    X = np.loadtxt(tmp_path / "varied.csv", delimiter=",", skiprows=1)
    assert f"row 1, column x{int(np.argmax(np.abs(X[0])))}:" in line
    assert listing(tmp_path) == before


def test_the_mixture_is_the_chosen_run_of_the_fit():
    """A kept mixture is appended to the starts as 'mixture' and chosen: the objective
    reported is its run's, its passes the fit's iterations, its cut its labels' own."""
    X, _ = _varied()
    est = KernelKMeans(3, random_state=4, n_threads=1).fit(X)
    stats, record = est.fit_stats_, est.fit_stats_["graph"]["mixture"]
    assert record["kept"] is True
    assert stats["start_kinds"][-2:] == ["gaussian", "mixture"]
    assert stats["best_start"] == "mixture"
    assert stats["best_restart"] == len(stats["start_kinds"]) - 1
    assert est.inertia_ == pytest.approx(stats["restart_inertias"][stats["best_restart"]],
                                         rel=1e-12)
    assert est.ncut_ == pytest.approx(stats["start_ncuts"][-1], rel=1e-12)
    assert est.n_iter_ == record["n_iter"] and stats["refine_moves"] == 0
    from kkmeans_cli.model.params import fit_rngs

    same = fit_graph(X, 3, random_state=fit_rngs(4)[1], n_threads=1)
    np.testing.assert_array_equal(same.labels, est.labels_)
    assert est.ncut_ == pytest.approx(normalized_cut(same.graph.affinity, same.node_labels),
                                      rel=1e-9)


def _ratings(seed=1000, n=900, d=6, k=3, noise=1.2):
    """Ratings 1–5: rounded, clipped Gaussian clusters."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    centres = rng.uniform(1.5, 4.5, size=(k, d))
    return np.clip(np.round(centres[y] + rng.normal(0, noise, (n, d))), 1, 5), y


def test_no_mixture_on_columns_of_few_values_small_clusters_or_a_collapsed_component(
        monkeypatch):
    """Ratings 1–5 (every column 5 values): no mixture made, the record counts the columns;
    60 points in three blobs: clusters of fewer than 30 points turn it down; a component
    whose points share one value of a column: its variance there is the ridge, turned
    down; each rule the reason (it is kept, or would be, with the rule lifted)."""
    R, _ = _ratings()
    got = fit_graph(R, 3, random_state=0, n_threads=1)
    assert got.mixture == {"kept": False, "discrete_columns": 6}
    monkeypatch.setattr(graph_fit, "MIXTURE_NCUT_RATIO", -1.0)
    np.testing.assert_array_equal(fit_graph(R, 3, random_state=0, n_threads=1).labels,
                                  got.labels)
    monkeypatch.setattr(graph_fit, "MIXTURE_NCUT_RATIO", MIXTURE_NCUT_RATIO)
    monkeypatch.setattr(graph_fit, "MIXTURE_DISCRETE_MAX", 4)     # 5 values: continuous now
    lifted = fit_graph(R, 3, random_state=0, n_threads=1)
    assert lifted.mixture["kept"] is True
    # and the split test skipped: a component of 2k collapses onto one rating
    assert lifted.split_test == {"kept": True, "skipped": True}
    monkeypatch.setattr(graph_fit, "MIXTURE_DISCRETE_MAX", MIXTURE_DISCRETE_MAX)
    # 60 points
    B, _ = make_blobs(60, centers=3, cluster_std=1.5, random_state=101)
    record = fit_graph(B, 3, random_state=0, n_threads=1).mixture
    assert record["kept"] is False and record["min_points"] < MIXTURE_MIN_POINTS
    assert record["ncut_ratio"] <= MIXTURE_NCUT_RATIO and record["agreement"] < 1.0
    monkeypatch.setattr(graph_fit, "MIXTURE_MIN_POINTS", 0)
    assert fit_graph(B, 3, random_state=0, n_threads=1).mixture["kept"] is True
    monkeypatch.setattr(graph_fit, "MIXTURE_MIN_POINTS", MIXTURE_MIN_POINTS)
    # one blob's points all 0 in a third column of noise
    X, y = _varied()
    rng = np.random.default_rng(0)
    Z = np.c_[X, np.where(y == 2, 0.0, rng.normal(size=len(y)))]
    record = fit_graph(Z, 3, random_state=4, n_threads=1).mixture
    assert record["kept"] is False
    assert record["min_variance"] <= MIXTURE_MIN_VARIANCE
    assert record["min_variance"] == pytest.approx(graph_fit.MIXTURE_RIDGE, rel=1e-3)
    assert record["ncut_ratio"] <= MIXTURE_NCUT_RATIO
    assert record["min_points"] >= MIXTURE_MIN_POINTS


def test_distinct_values_counts_as_np_unique_in_any_blocks(monkeypatch):
    rng = np.random.default_rng(0)
    n = 3000
    late = np.r_[np.zeros(2000), np.arange(1000) % 30]         # 30 values, all but one late
    X = np.c_[rng.normal(size=n), rng.integers(0, 5, n), late, np.ones(n),
              rng.integers(0, 2, n), np.r_[np.zeros(n - 1), 7.0]]
    want = [min(np.unique(X[:, j]).size, 21) for j in range(X.shape[1])]
    assert want == [21, 5, 21, 1, 2, 2]
    for block in (graph_fit.SCATTER_BLOCK_ROWS, 7):
        monkeypatch.setattr(graph_fit, "SCATTER_BLOCK_ROWS", block)
        assert distinct_values(X, 20).tolist() == want
    assert distinct_values(X[:1], 20).tolist() == [1] * X.shape[1]


def test_a_mixture_on_a_column_subset_round_trips_through_the_model_file(tmp_path):
    """A 0/1 column (times 0.05) is left out of the mixture's coordinates: the mixture kept
    reads columns 0 and 2, the file keeps them, and predict of new points through a
    process is the estimator's."""
    X, _ = _varied()
    rng = np.random.default_rng(0)
    Z = np.c_[X[:, :1], 0.05 * rng.integers(0, 2, len(X)), X[:, 1:]]
    write_csv(tmp_path / "z.csv", Z, fmt="%.6f")
    Z = np.loadtxt(tmp_path / "z.csv", delimiter=",", skiprows=1)
    new, _ = _varied(9, n=600)
    new = np.c_[new[:, :1], 0.05 * rng.integers(0, 2, len(new)), new[:, 1:]]
    write_csv(tmp_path / "new.csv", new, fmt="%.6f")
    new = np.loadtxt(tmp_path / "new.csv", delimiter=",", skiprows=1)
    est = KernelKMeans(3, random_state=4).fit(Z)
    assert est.fit_stats_["graph"]["mixture"]["kept"] is True
    assert est.graph_model_.mixture.columns.tolist() == [0, 2]
    done = run(["fit", tmp_path / "z.csv", "-k", "3", "--seed", "4", "-o", tmp_path / "m.npz"])
    assert done.exit_code == 0, done.stderr
    np.testing.assert_array_equal(labels_of(done.stdout), est.labels_)
    with np.load(tmp_path / "m.npz", allow_pickle=False) as saved:
        assert saved["graph_mixture_columns"].tolist() == [0, 2]
    again = run_process(["predict", "m.npz", "new.csv"], cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    np.testing.assert_array_equal(labels_of(again.stdout), est.predict(new))


def test_predict_refuses_points_beyond_float64_in_one_line_whatever_the_route():
    """A point whose squared norm overflows is refused as fit refuses it (the graph's
    search, and the mixture's costs, would compare infinities), with or without a
    mixture."""
    from kkmeans_cli.errors import ValueRangeError

    X, _ = _varied()
    for whiten in ("auto", False):
        est = KernelKMeans(3, random_state=4, whiten=whiten).fit(X)
        assert (est.graph_model_.mixture is not None) is (whiten == "auto")
        with pytest.raises(ValueRangeError, match="too large for floating point"):
            est.predict(np.array([[1e200, 0.0]]))


def _aniso(seed=170, n=1500):
    """Blobs drawn round, then stretched by one linear map (scikit-learn's clustering
    gallery, 'aniso'): three clusters of one covariance, standardized."""
    X, y = make_blobs(n, random_state=seed)
    return _standard(X @ np.array([[0.6, -0.6], [-0.4, 0.8]])), y


@pytest.mark.parametrize("seed", [170, 0])
def test_the_tied_em_is_scikit_learns_tied_mixture(seed, monkeypatch):
    """With ``tied``: the same passes, labels and mean log-likelihood as
    ``GaussianMixture(covariance_type='tied')`` started from the same labels (their pooled
    covariance), one covariance in every component; in blocks of 7 rows the same labels and
    passes, on 1, 2 and 4 threads the same mixture to the bit."""
    X, _ = _aniso(seed)
    start = fit_graph(X, 3, random_state=seed, n_threads=1, whiten=False).labels
    mixture, info = gaussian_mixture(X, start, 3, tied=True)
    labels, _ = mixture.labels(X)
    want, want_passes, want_log_likelihood = reference_mixture(X, start, 3,
                                                               covariance_type="tied")
    assert info["n_iter"] == want_passes > 1 and info["converged"] is True
    np.testing.assert_array_equal(labels, want)
    assert info["log_likelihood"] == pytest.approx(want_log_likelihood, rel=1e-9, abs=1e-12)
    precisions = [m @ m.T for m in mixture.maps]
    for other in precisions[1:]:
        np.testing.assert_allclose(other, precisions[0], rtol=1e-12)
    monkeypatch.setattr(graph_fit, "SCATTER_BLOCK_ROWS", 7)
    small, small_info = gaussian_mixture(X, start, 3, tied=True)
    assert small_info["n_iter"] == info["n_iter"]
    np.testing.assert_array_equal(small.labels(X)[0], labels)
    for threads in (2, 4):
        again, again_info = gaussian_mixture(X, start, 3, n_threads=threads, tied=True)
        assert again_info == small_info
        for name, value in small.arrays().items():
            np.testing.assert_array_equal(again.arrays()[name], value)


def test_the_tied_mixture_with_the_uniform_component_is_a_brute_force_em():
    X, _ = _aniso()
    start = fit_graph(X, 3, random_state=170, n_threads=1, whiten=False).labels
    mixture, info = gaussian_mixture(X, start, 3, noise=MIXTURE_NOISE, tied=True)
    want, passes, log_likelihood, noise = reference_noise_mixture(X, start, 3, tied=True)
    np.testing.assert_array_equal(mixture.labels(X)[0], want)
    assert info["n_iter"] == passes > 1 and info["converged"] is True
    assert info["log_likelihood"] == pytest.approx(log_likelihood, rel=1e-9)
    assert info["noise_weight"] == pytest.approx(noise, rel=1e-6, abs=1e-12)
    assert info["min_variance"] == pytest.approx(reference_noise_mixture.min_variance,
                                                 rel=1e-6)


def test_schwarz_criterion_chooses_the_covariance_as_scikit_learn_scores_it():
    """``covariance_choice``'s ratio is 1 + (BIC_tied − BIC_full) / the charge for the full
    mixture's (k − 1) d(d + 1)/2 more parameters, BIC scikit-learn's ``bic`` of the same
    mixtures: above 1 (full) on blobs of three spreads, at most 1 (tied) on blobs of one
    shape; where one mixture is None the other is taken."""
    from sklearn.mixture import GaussianMixture

    for data, want in ((_varied, False), (_aniso, True)):
        X, _ = data()
        n = X.shape[0]
        start = fit_graph(X, 3, random_state=0, n_threads=1, whiten=False).labels
        full, tied = (gaussian_mixture(X, start, 3, tied=t) for t in (False, True))
        assert full[1]["converged"] and tied[1]["converged"]
        chosen, ratio = covariance_choice(full, tied, n, 3)
        assert chosen is want and (ratio <= 1.0) is want
        Z = full[0].coordinates(X)
        bic = {}
        for kind, (mixture, _) in (("full", full), ("tied", tied)):
            covariances = np.array([np.linalg.inv(m @ m.T) for m in mixture.maps])
            gm = GaussianMixture(3, covariance_type=kind)
            gm.weights_ = np.exp([(np.linalg.slogdet(S)[1] + 2 * np.log(2 * np.pi) - c) / 2
                                  for S, c in zip(covariances, mixture.consts)])
            gm.means_ = mixture.means
            gm.covariances_ = covariances if kind == "full" else covariances[0]
            gm.precisions_cholesky_ = (mixture.maps if kind == "full" else mixture.maps[0])
            bic[kind] = gm.bic(Z)
        # the EM's log-likelihood is the last E-step's, under the parameters before the last
        # M-step: converged, they differ by less than the tolerance a point
        charge = 2 * 3 * np.log(n)
        assert ratio == pytest.approx(1 + (bic["tied"] - bic["full"]) / charge,
                                      abs=4 * n * MIXTURE_TOL / charge)
    assert covariance_choice(None, tied, n, 3)[0] is True
    assert covariance_choice(full, None, n, 3)[0] is False
    assert np.isnan(covariance_choice(full, None, n, 3)[1])
    # a log-likelihood that is not finite: the other mixture; one cluster: the tied one
    lost = (tied[0], dict(tied[1], log_likelihood=float("nan")))
    assert covariance_choice(full, lost, n, 3)[0] is False
    assert covariance_choice(full, tied, n, 1)[0] is True


def test_the_mixture_step_takes_the_covariance_schwarz_criterion_prefers(tmp_path):
    """Replayed by hand (the full and the tied reference mixtures, Schwarz's criterion
    between them): on blobs of one shape the tied mixture, kept; on blobs of three spreads
    the full one; the record says which and by what ratio; predict of the training points
    is labels_, of new points the tied reference mixture's labels; the report says the
    covariance was shared."""
    for data, want in ((_aniso, "tied"), (_varied, "full")):
        X, _ = data()
        fit = gaussian_step(X, fit_graph(X, 3, random_state=4, n_threads=1, whiten=False), 3)
        labels, keep, _ = replayed_mixture(X, fit.graph, fit.labels, fit.ncut, 3)
        got = mixture_step(X, fit, 3)
        assert keep and got.mixture["kept"] is True
        assert replayed_mixture.covariance == want
        assert got.mixture["tied"] is (want == "tied")
        assert (got.mixture["covariance_ratio"] <= 1.0) is (want == "tied")
        np.testing.assert_array_equal(got.labels, labels)
    X, _ = _aniso()
    est = KernelKMeans(3, random_state=4, n_threads=1).fit(X)
    record = est.fit_stats_["graph"]["mixture"]
    assert record["kept"] is True and record["tied"] is True
    np.testing.assert_array_equal(est.predict(X), est.labels_)
    from kkmeans_cli.model.params import fit_rngs

    step = gaussian_step(X, fit_graph(X, 3, random_state=fit_rngs(4)[1], n_threads=1,
                                      whiten=False), 3)
    new, _ = _aniso(9, n=600)
    want, _, _, _ = reference_noise_mixture(X, step.labels, 3, X_new=new, tied=True)
    np.testing.assert_array_equal(est.predict(new), want)
    write_csv(tmp_path / "aniso.csv", X)
    done = run(["fit", tmp_path / "aniso.csv", "-k", "3", "--seed", "4"])
    assert done.exit_code == 0, done.stderr
    assert "; Gaussian mixture kept (one covariance shared))" in done.stderr, done.stderr


def test_the_split_test_runs_where_the_mixture_was_skipped():
    """Three rings (.07) of 1,500 points, seed 11 (random_state 2): the Gaussian step cuts
    through them (kept by its rule), the mixture chosen empties a cluster (skipped); the
    split test still asks whether the step's clusters are Gaussian, finds them not, and
    undoes the step: the first fit's labels."""
    X = _rings(1500, 0.07, 11)
    got = fit_graph(X, 3, random_state=2, n_threads=1)
    assert got.mixture == {"kept": False, "skipped": True}
    # both EMs made a mixture: the one chosen left a cluster of d points or fewer
    step = gaussian_step(X, fit_graph(X, 3, random_state=2, n_threads=1, whiten=False), 3)
    made = [gaussian_mixture(X, step.labels, 3, noise=MIXTURE_NOISE, tied=t)
            for t in (False, True)]
    assert all(m is not None for m in made)
    assert min(np.bincount(m[0].labels(X)[0], minlength=3).min() for m in made) <= 2
    assert got.split_test["kept"] is False and got.split_test["ratio"] > 1.0
    assert got.gaussian["kept"] is False and got.gaussian["undone"] is True
    first = fit_graph(X, 3, random_state=2, n_threads=1, whiten=False)
    np.testing.assert_array_equal(got.labels, first.labels)
