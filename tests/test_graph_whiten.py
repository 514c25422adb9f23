"""The whitened refit of the graph kernel (``whiten=True``, ``--whiten``): fit, whiten the
points by the pooled within-cluster covariance W of the labels found (X·W^{-½}; De la Torre &
Kanade, "Discriminative cluster analysis"), fit the whitened points' graph again; with
``whiten='auto'`` (the default) that refit is kept only where it lowers the Gaussian
classification criterion (Scott & Symons 1971). Checked against NumPy references: the
transform, the criterion, the two fits it chains and the choice between them, predict of the
training points, the model file, one and two threads, the memory plan, and every refusal (one
line, its exit code, nothing written)."""
import json

import numpy as np
import pytest
from scipy import sparse
from sklearn.datasets import make_blobs, make_moons
from sklearn.metrics import adjusted_rand_score

from helpers import assert_one_error_line, labels_of, listing, run, run_process, write_csv
from reference import gaussian_cluster_terms, total_whitened
from kkmeans_cli import KernelKMeans
from kkmeans_cli._options import REFIT_TESTS
from kkmeans_cli.kernels.graph_fit import (AGREEMENT_MAX, MIXTURE_NOISE_MAX, WHITEN_RIDGE,
                                           adjusted_rand, classification_criterion, fit_graph,
                                           predict_graph, whiten_applies, whiten_points,
                                           within_whitening)
from kkmeans_cli.model.model_file import load_model
from kkmeans_cli.errors import DataError, KKMeansWarning
from kkmeans_cli.model.params import InvalidParameterError

ANISO = np.array([[0.6, -0.6], [-0.4, 0.8]])


def _aniso(n=450, seed=3):
    X, y = make_blobs(n, centers=3, random_state=seed)
    return np.round(X @ ANISO, 6), y


def _reference_whitening(X, labels, ridge=WHITEN_RIDGE):
    """W^{-½} by loops over the clusters and SciPy's matrix square root."""
    from scipy.linalg import sqrtm

    n, d = X.shape
    W = np.zeros((d, d))
    for c in np.unique(labels):
        R = X[labels == c] - X[labels == c].mean(axis=0)
        W += R.T @ R
    W /= n
    W += ridge * np.trace(W) / d * np.eye(d)
    return np.linalg.inv(np.real(sqrtm(W)))


def test_within_whitening_is_the_inverse_square_root_of_the_pooled_covariance():
    X, y = _aniso()
    T = within_whitening(X, y, 3)
    np.testing.assert_allclose(T, _reference_whitening(X, y), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(T, T.T, atol=1e-14)
    # in X·T the clusters found are round: their pooled covariance is I less the ridge's
    # share, I − ε(W + εI)⁻¹ = I − εT²
    def pooled(Z):
        return sum((Z[y == c] - Z[y == c].mean(0)).T @ (Z[y == c] - Z[y == c].mean(0))
                   for c in range(3)) / X.shape[0]

    eps = WHITEN_RIDGE * np.trace(pooled(X)) / 2
    np.testing.assert_allclose(pooled(X @ T), np.eye(2) - eps * T @ T, atol=1e-12)
    assert np.all(np.linalg.eigvalsh(pooled(X @ T)) > 0.98)


def test_within_whitening_of_single_point_clusters_is_the_identity():
    X = np.array([[0.0, 1.0], [2.0, 3.0], [5.0, -1.0]])
    np.testing.assert_array_equal(within_whitening(X, np.array([0, 1, 2]), 3), np.eye(2))


def test_whiten_points_is_the_product_and_the_same_for_a_row_in_any_company():
    rng = np.random.default_rng(0)
    X, T = rng.normal(size=(1001, 7)), rng.normal(size=(7, 7))
    Z = whiten_points(X, T)
    np.testing.assert_allclose(Z, X @ T, rtol=1e-12, atol=1e-12)
    for rows in (np.arange(1), np.arange(3, 40), rng.permutation(1001)[:257]):
        np.testing.assert_array_equal(whiten_points(X[rows], T), Z[rows])


def test_fit_graph_whiten_is_a_fit_on_the_points_its_first_fit_whitens():
    """The two fits it chains, replayed by hand with the same generator."""
    X, _ = _aniso()
    got = fit_graph(X, 3, random_state=np.random.default_rng(5), n_threads=1, whiten=True)
    rng = np.random.default_rng(5)
    first = fit_graph(X, 3, random_state=rng, n_threads=1, whiten=False)
    T = _reference_whitening(X, first.labels)
    np.testing.assert_allclose(got.transform, T, rtol=1e-10, atol=1e-12)
    second = fit_graph(whiten_points(X, got.transform), 3, random_state=rng, n_threads=1,
                       whiten=False)
    np.testing.assert_array_equal(got.labels, second.labels)
    assert got.ncut == second.ncut
    assert fit_graph(X, 3, random_state=1, n_threads=1, whiten=False).transform is None


def test_predict_of_the_training_points_is_the_labels_and_threads_agree():
    X, _ = _aniso(600, seed=11)
    one = KernelKMeans(3, whiten=True, random_state=2, n_threads=1).fit(X)
    two = KernelKMeans(3, whiten=True, random_state=2, n_threads=2).fit(X)
    np.testing.assert_array_equal(one.labels_, two.labels_)
    np.testing.assert_array_equal(one.predict(X), one.labels_)
    np.testing.assert_array_equal(one.predict(X[5::9]), one.labels_[5::9])
    assert one.graph_info_["whitened"] is True
    model = one.graph_model_
    assert model.transform.shape == (2, 2)
    # new points: the rule of the unwhitened model on the whitened points
    new = X[:40] + 0.01
    plain = model.__class__(**{**vars(model), "nodes": model.nodes, "transform": None})
    np.testing.assert_array_equal(predict_graph(model, new),
                                  predict_graph(plain, whiten_points(new, model.transform)))


def test_the_api_refuses_whiten_without_points():
    X, _ = _aniso(90)
    with pytest.raises(InvalidParameterError, match=r"whiten=True sets the whitened refit .* "
                                                    r"the rbf kernel builds no neighbour graph"):
        KernelKMeans(3, kernel="rbf", whiten=True).fit(X)
    A = sparse.random(30, 30, density=0.3, random_state=0)
    with pytest.raises(InvalidParameterError, match="the precomputed kernel builds no"):
        KernelKMeans(2, kernel="precomputed", whiten=True).fit(A + A.T)
    with pytest.raises(ValueError, match="whiten needs the points X"):
        fit_graph(None, 2, affinity=(A + A.T).tocsr(), whiten=True)
    from kkmeans_cli.model.sweep import graph_sweep
    with pytest.raises(InvalidParameterError, match="whiten=True is not swept"):
        graph_sweep(X, [2, 3], whiten=True)


# -- the command line ---------------------------------------------------------------------------
@pytest.fixture
def aniso_csv(tmp_path):
    X, _ = _aniso()
    write_csv(tmp_path / "aniso.csv", X, fmt="%.6f")
    return tmp_path


def test_cli_fit_whiten_predict_info_and_config(aniso_csv):
    folder = aniso_csv
    X = np.loadtxt(folder / "aniso.csv", delimiter=",", skiprows=1)
    fit = run(["fit", folder / "aniso.csv", "-k", "3", "--whiten", "--seed", "4",
               "-o", folder / "m.npz"])
    assert fit.exit_code == 0, fit.stderr
    est = KernelKMeans(3, whiten=True, random_state=4).fit(X)
    np.testing.assert_array_equal(labels_of(fit.stdout), est.labels_)
    assert "(connectivity; whitened)" in fit.stderr
    predicted = run(["predict", folder / "m.npz", folder / "aniso.csv"])
    assert predicted.exit_code == 0, predicted.stderr
    assert predicted.stdout == fit.stdout
    loaded = load_model(folder / "m.npz")
    np.testing.assert_array_equal(loaded.result.graph.model.transform,
                                  est.graph_model_.transform)
    info = run(["info", folder / "m.npz"])
    assert "(connectivity; whitened)" in info.stdout
    options = next(line for line in info.stdout.splitlines() if "--seed" in line)
    assert "--whiten" in options.split() and "--whiten=True" not in options, options
    assert json.loads(run(["info", folder / "m.npz", "--json"]).stdout)["graph"]["whitened"]
    (folder / "run.yaml").write_text("whiten: true\nseed: 4\n")
    configured = run(["fit", folder / "aniso.csv", "-k", "3", "--config", folder / "run.yaml",
                      "--no-model"])
    assert configured.exit_code == 0, configured.stderr
    assert configured.stdout == fit.stdout
    process = run_process(["fit", "aniso.csv", "-k", "3", "--whiten", "--seed", "4",
                           "--no-model"], cwd=folder)
    assert process.returncode == 0, process.stderr
    assert process.stdout == fit.stdout


@pytest.mark.parametrize("args, needles", [
    (["--kernel", "rbf"], ["--whiten sets the whitened refit", "the rbf kernel builds no "
                           "neighbour graph", "drop --whiten)"]),
    (["--kernel", "linear"], ["the linear kernel builds no neighbour graph"]),
])
def test_cli_refuses_whiten_with_a_dense_kernel(aniso_csv, args, needles):
    folder = aniso_csv
    before = listing(folder)
    result = run_process(["fit", "aniso.csv", "-k", "3", "--whiten", *args, "-o", "m.npz",
                          "--summary", "s.json"], cwd=folder)
    assert_one_error_line(result, *needles, code=2)
    assert listing(folder) == before


def test_cli_refuses_whiten_on_a_graph_given_as_data_and_in_a_sweep(aniso_csv):
    folder = aniso_csv
    X, _ = make_moons(120, noise=0.05, random_state=0)
    from sklearn.neighbors import kneighbors_graph
    A = kneighbors_graph(X, 8, include_self=False)
    sparse.save_npz(folder / "g.npz", ((A + A.T) > 0).astype(float).tocsr())
    before = listing(folder)
    given = run(["fit", folder / "g.npz", "--kernel", "precomputed", "-k", "2", "--whiten",
                 "-o", folder / "m.npz"])
    assert_one_error_line(given, "--whiten sets the whitened refit",
                          "the precomputed kernel builds no neighbour graph", code=2)
    swept = run_process(["sweep", "aniso.csv", "--k", "2..4", "--whiten", "-o", "m.npz",
                         "--table", "t.csv"], cwd=folder)
    assert_one_error_line(swept, "--whiten is not swept", "fit the chosen k with --whiten",
                          code=2)
    assert listing(folder) == before


def test_a_model_whose_whitening_is_damaged_is_refused(aniso_csv, tmp_path):
    folder = aniso_csv
    assert run(["fit", folder / "aniso.csv", "-k", "3", "--whiten", "-o",
                folder / "m.npz"]).exit_code == 0
    with np.load(folder / "m.npz") as z:
        arrays = {name: z[name] for name in z.files}
    meta = json.loads(str(arrays["meta"]))
    cases = {
        "shape": {**arrays, "graph_transform": np.eye(3)},
        "nan": {**arrays, "graph_transform": np.array([[np.nan, 0.0], [0.0, 1.0]])},
        "missing": {k: v for k, v in arrays.items() if k != "graph_transform"},
        "unsaid": {**arrays, "meta": np.array(json.dumps(
            {**meta, "graph": {**meta["graph"], "whitened": False}}))},
        "not a boolean": {**arrays, "meta": np.array(json.dumps(
            {**meta, "graph": {**meta["graph"], "whitened": 1}}))},
    }
    for name, members in cases.items():
        path = tmp_path / f"{name}.npz"
        np.savez(path, **members)
        result = run(["predict", path, folder / "aniso.csv"])
        assert_one_error_line(result, str(path), code=1)
        assert "graph_transform" in result.stderr, (name, result.stderr)


# -- whiten='auto' (the default): the refit kept where it lowers the Gaussian criterion ------
def _reference_criterion(X, labels, k, ridge=1e-3):
    """Σ_c (n_c/n) ln det S_c / d by another route: the total covariance's Cholesky factor
    whitens, np.cov gives each cluster's covariance, det its determinant."""
    n, d = X.shape
    Z = total_whitened(X)
    total = 0.0
    for c in range(k):
        if np.count_nonzero(labels == c) > 1:
            Zc, _, logdet = gaussian_cluster_terms(Z, labels, c, ridge)
            total += len(Zc) / n * logdet / d
    return total


def test_classification_criterion_is_the_reference_and_affine_invariant():
    X, y = _aniso()
    labels = np.where(np.arange(len(y)) % 17 == 0, (y + 1) % 3, y)   # some points moved
    got = classification_criterion(X, labels, 3)
    assert got == pytest.approx(_reference_criterion(X, labels, 3), rel=1e-10)
    A = np.array([[3.0, 1.0], [-2.0, 0.5]])
    assert classification_criterion(X @ A + [7.0, -4.0], labels, 3) == pytest.approx(got,
                                                                                    rel=1e-9)
    # the true clusters are the tighter ellipsoids: a lower criterion than the moved labels
    assert classification_criterion(X, y, 3) < got
    # a cluster of one point adds nothing; a column that never varies is dropped
    one = labels.copy()
    one[0] = 3
    np.testing.assert_allclose(classification_criterion(np.c_[X, np.ones(len(X))], labels, 3),
                               got, rtol=1e-9)
    assert np.isfinite(classification_criterion(X, one, 4))


def test_two_valued_columns_is_a_count_of_distinct_values(monkeypatch):
    """Against np.unique column by column, with the first rows' test and the blocks made
    small enough that a second value after the first rows and a third after the first
    block are seen."""
    from kkmeans_cli.kernels import graph_fit
    from kkmeans_cli.kernels.graph_fit import two_valued_columns

    monkeypatch.setattr(graph_fit, "TWO_VALUED_PREFIX", 16)
    monkeypatch.setattr(graph_fit, "SCATTER_BLOCK_ROWS", 64)
    rng = np.random.default_rng(0)
    n = 500
    late_second = np.r_[np.zeros(300), np.ones(200)]
    late_third = np.r_[rng.integers(0, 2, n - 1) * 0.1, [0.7]]
    X = np.c_[rng.normal(size=n), rng.integers(0, 2, n) * 0.1, np.full(n, 3.0),
              rng.integers(0, 3, n), late_second, late_third, np.r_[-np.ones(n - 1), [2.0]],
              rng.integers(0, 2, n) * 1e300]
    want = [np.unique(X[:, j]).size == 2 for j in range(X.shape[1])]
    assert two_valued_columns(X).tolist() == want == [False, True, False, False, True, False,
                                                      True, True]
    assert two_valued_columns(X[:1]).tolist() == [False] * X.shape[1]


def test_the_criterion_leaves_out_a_two_valued_column():
    """A 0/1 column beside the data changes nothing for any labels, even those that split the
    points by it (within such a cluster the column is constant, and the Gaussian likelihood is
    bounded by the ridge alone); unless no other column varies."""
    X, y = _aniso()
    b = np.random.default_rng(1).integers(0, 2, len(X)).astype(np.float64)
    for labels, k in ((y, 3), (b.astype(np.int64) + 2 * (y == 2), 4)):
        np.testing.assert_allclose(classification_criterion(np.c_[X, 0.1 * b], labels, k),
                                   classification_criterion(X, labels, k), rtol=1e-9)
    B = np.c_[b, 1.0 - b * (np.arange(len(b)) % 2)]
    assert classification_criterion(B, b.astype(np.int64), 2) < \
        classification_criterion(B, y % 2, 2)
    # nor where the only other column is constant, or constant but for rounding
    for other in (np.ones(len(b)), 5.0 + 1e-15 * np.random.default_rng(2).normal(size=len(b))):
        np.testing.assert_allclose(classification_criterion(np.c_[B, other], b.astype(int), 2),
                                   classification_criterion(B, b.astype(int), 2), rtol=1e-9)


def test_blobs_beside_an_indicator_column_keep_the_first_fit():
    """Four blobs beside one column of {0, 0.1}: the whitening scales the indicator up to
    the blobs' spread and the refit splits the blobs by it; with the indicator in the
    criterion that refit had the far lower criterion and was kept (ARI 0.21), without it the
    first fit stays (ARI 0.83, as one fit)."""
    X, y = make_blobs(3000, centers=4, cluster_std=1.0, random_state=0)
    X = np.c_[X, 0.1 * np.random.default_rng(0).integers(0, 2, (3000, 1))]
    got = fit_graph(X, 4, random_state=0, n_threads=1)
    one = fit_graph(X, 4, random_state=0, n_threads=1, whiten=False)
    forced = fit_graph(X, 4, random_state=0, n_threads=1, whiten=True)
    assert got.whitening["kept"] is False
    assert got.whitening["refit_criterion"] > got.whitening["criterion"]
    assert adjusted_rand_score(y, forced.labels) < 0.3
    assert adjusted_rand_score(y, got.labels) >= adjusted_rand_score(y, one.labels) - 0.025
    assert adjusted_rand_score(y, got.labels) > 0.8


def test_cluster_scatter_in_blocks_is_the_loop_over_clusters(monkeypatch):
    from kkmeans_cli.kernels import graph_fit

    rng = np.random.default_rng(3)
    X = rng.normal(size=(1000, 4)) * [1.0, 10.0, 0.1, 1e3] + 1e4     # far from the origin
    labels = rng.integers(0, 5, 1000)
    labels[labels == 3] = 4                                          # cluster 3 empty
    for block in (graph_fit.SCATTER_BLOCK_ROWS, 7):
        monkeypatch.setattr(graph_fit, "SCATTER_BLOCK_ROWS", block)
        counts, means, scatters = graph_fit.cluster_scatter(X, labels, 5)
        for c in range(5):
            Xc = X[labels == c]
            assert counts[c] == len(Xc)
            if len(Xc):
                np.testing.assert_allclose(means[c], Xc.mean(axis=0), rtol=1e-13)
                R = Xc - Xc.mean(axis=0)
                np.testing.assert_allclose(scatters[c], R.T @ R, rtol=1e-9, atol=1e-9)
            else:
                assert not means[c].any() and not scatters[c].any()


def test_adjusted_rand_is_scikit_learns():
    rng = np.random.default_rng(0)
    for k in (1, 2, 3, 7):
        for moved in (0, 5, 20, 50):
            a = rng.integers(0, k, 50)
            b = a.copy()
            b[rng.integers(0, 50, moved)] = rng.integers(0, k, moved)
            assert adjusted_rand(a, b, k) == pytest.approx(adjusted_rand_score(a, b), abs=1e-12)
    assert adjusted_rand([0, 0, 1], [1, 1, 0], 2) == 1.0
    assert AGREEMENT_MAX == 0.98


def test_a_refit_that_moves_a_few_points_is_not_kept():
    """The bundled moons: the refit moves 1 point of 300 and lowers the criterion a little;
    the first fit is kept."""
    from pathlib import Path

    X = np.loadtxt(Path(__file__).parents[1] / "examples" / "moons.csv", delimiter=",",
                   skiprows=1)
    est = KernelKMeans(2, random_state=0).fit(X)
    tried = est.fit_stats_["graph"]["whitening"]
    refit = KernelKMeans(2, random_state=0, whiten=True).fit(X).labels_
    plain = KernelKMeans(2, random_state=0, whiten=False).fit(X).labels_
    assert tried["refit_criterion"] < tried["criterion"]
    assert tried["agreement"] == pytest.approx(adjusted_rand_score(plain, refit), abs=1e-12)
    assert 0.9 < tried["agreement"] < 1 and tried["agreement"] >= AGREEMENT_MAX
    assert tried["kept"] is False
    np.testing.assert_array_equal(est.labels_, plain)
    report = run(["fit", Path(__file__).parents[1] / "examples" / "moons.csv", "-k", "2",
                  "--no-model"]).stderr
    assert tried["turned_down_by"] == REFIT_TESTS.index("it moved few points")
    assert "(connectivity; whitened refit not kept: it moved few points)" in report, report


def _cut_on(graph, labels):
    """The normalized cut of points' labels on a fit's graph (its nodes' labels)."""
    from kkmeans_cli.engine.graph import normalized_cut

    nodes = np.zeros(graph.info.n_nodes, dtype=np.int64)
    nodes[graph.node_of if graph.node_of is not None else slice(None)] = labels
    return normalized_cut(graph.affinity, nodes)


@pytest.mark.parametrize("case", ["moons", "varied"])
def test_a_refit_that_cuts_its_own_graph_worse_than_the_first_labels_is_not_kept(case):
    """On these two sets — 300 noisy moons (.15), the gallery's varied blobs with random
    centres 99 — the refit lands on a worse cut of its own graph than the first fit's labels
    make of it, with a lower Gaussian criterion, and is turned down (the test ``held``)."""
    from sklearn.datasets import make_blobs, make_moons

    if case == "moons":
        X, y = make_moons(300, noise=0.15, random_state=0)
        k, seed = 2, 0
    else:
        X, y = make_blobs(1500, cluster_std=[1.0, 2.5, 0.5], random_state=99)
        k, seed = 3, 99
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    plain = fit_graph(X, k, random_state=seed, n_threads=1, whiten=False)
    refit = fit_graph(X, k, random_state=seed, n_threads=1, whiten=True)
    held = _cut_on(refit.graph, plain.labels)
    assert refit.ncut > held                        # the refit fell short on its own graph
    assert _reference_criterion(X, refit.labels, k) < _reference_criterion(X, plain.labels, k)
    assert adjusted_rand_score(plain.labels, refit.labels) < AGREEMENT_MAX
    got = fit_graph(X, k, random_state=seed, n_threads=1)
    assert got.whitening["kept"] is False and got.transform is None
    assert got.whitening["turned_down_by"] == 2
    assert got.whitening["first_ncut_on_refit_graph"] == pytest.approx(held, rel=1e-9)
    assert got.whitening["refit_ncut"] == refit.ncut
    want, keep, _, _ = _replayed_auto(X, k, seed)
    assert keep is False
    if case == "moons":     # no k Gaussians make moons: the first fit's labels stand, the
        # mixture turned down (its uniform component takes over a quarter of the points)
        assert got.mixture["kept"] is False
        assert got.mixture["noise_weight"] > MIXTURE_NOISE_MAX
        want = plain.labels
    np.testing.assert_array_equal(got.labels, want)
    # the first fit, or the Gaussian step on it: on both sets the groups stay found
    assert adjusted_rand_score(y, got.labels) > 0.95


def _replayed_auto(X, k, seed):
    """whiten='auto' replayed: the plain fit and the whitened one from the same generator,
    the rule that chooses between them, then the Gaussian step and the mixture on the chosen
    fit (replayed by ``test_graph_gaussian``)."""
    from test_graph_gaussian import replayed_steps

    fresh = seed if callable(seed) else (lambda: seed)     # a generator is used up by a fit
    plain = fit_graph(X, k, random_state=fresh(), n_threads=1, whiten=False)
    refit = fit_graph(X, k, random_state=fresh(), n_threads=1, whiten=True)
    before = _reference_criterion(X, plain.labels, k)
    after = _reference_criterion(X, refit.labels, k)
    keep = bool(after < before and adjusted_rand_score(plain.labels, refit.labels) < 0.98
                and refit.ncut <= _cut_on(refit.graph, plain.labels))
    chosen = refit if keep else plain
    labels, _, _ = replayed_steps(X, chosen, k)
    return labels, keep, before, after


@pytest.mark.parametrize("name", ["aniso", "varied"])
def test_auto_keeps_the_refit_exactly_where_it_lowers_the_criterion(name):
    if name == "aniso":
        X, y = _aniso(600, seed=11)
        state = 4
    else:   # blobs of different spreads (the gallery's 'varied'), where the refit is refused
        X, y = make_blobs(1500, centers=3, cluster_std=[1.0, 2.5, 0.5], random_state=4)
        X = (X - X.mean(0)) / X.std(0)
        state = 5   # (with random_state 4 the refit is kept there)
    want, keep, before, after = _replayed_auto(X, 3, state)
    got = fit_graph(X, 3, random_state=state, n_threads=1, whiten="auto")
    np.testing.assert_array_equal(got.labels, want)
    assert got.whitening["kept"] is keep
    assert got.whitening["criterion"] == pytest.approx(before, rel=1e-9)
    assert got.whitening["refit_criterion"] == pytest.approx(after, rel=1e-9)
    assert (got.transform is not None) is keep
    assert keep is (name == "aniso")        # each case runs the branch it names
    # the estimator (default 'auto'), replayed with its own generator for the fits
    from kkmeans_cli.model.params import fit_rngs

    est = KernelKMeans(3, random_state=state, n_threads=1).fit(X)
    labels, kept, _, _ = _replayed_auto(X, 3, lambda: fit_rngs(state)[1])
    np.testing.assert_array_equal(est.labels_, labels)
    np.testing.assert_array_equal(est.predict(X), est.labels_)
    assert est.fit_stats_["graph"]["whitening"]["kept"] is kept
    assert est.graph_info_.get("whitened", False) is kept


def test_auto_fits_once_where_the_refit_does_not_apply():
    """One column, more than 64, k connected components (a cut of zero), k = 1, a graph
    given without points."""
    rng = np.random.default_rng(0)
    X1 = np.sort(rng.normal(size=(300, 1)), axis=0)                 # one column
    X65 = rng.normal(size=(300, 65)) + np.repeat(np.eye(3, 65) * 20, 100, axis=0)
    Xs, _ = make_blobs(200, centers=[[0, 0], [20, 0]], random_state=0)     # 2 components
    for X, k in ((X1, 2), (X65, 3), (Xs, 2), (Xs, 1)):
        got = fit_graph(X, k, random_state=1, n_threads=1, whiten="auto")
        plain = fit_graph(X, k, random_state=1, n_threads=1, whiten=False)
        np.testing.assert_array_equal(got.labels, plain.labels)
        assert got.whitening is None and got.transform is None
        if X is Xs and k == 2:      # the graph's exact answer
            assert plain.ncut == 0.0 and plain.start == "components"
    assert whiten_applies(Xs, 2) and not whiten_applies(Xs, 1)
    assert not whiten_applies(X1, 2) and not whiten_applies(X65, 3)
    # a given affinity has no coordinates: 'auto' fits it once, True is refused
    A = sparse.random(30, 30, density=0.3, random_state=0)
    assert KernelKMeans(2, kernel="precomputed").fit((A + A.T).tocsr()).graph_info_.get(
        "whitened", False) is False


def test_auto_memory_plan_holds_the_first_graph_beside_the_refit():
    from kkmeans_cli.memory import graph_plan

    plans = {w: graph_plan(100_000, 21, 2, 3, whiten=w) for w in (False, True, "auto")}
    edges = 100_000 * 21
    assert plans[True].total - plans[False].total == 8 * 100_000 * 2 + 8 * 3 * 2 * 2
    assert plans["auto"].items["first fit kept"] == 12 * 2 * edges + 40 * 100_000
    assert plans["auto"].total == (plans[True].total + plans["auto"].items["first fit kept"]
                                   + plans["auto"].items["Gaussian step"])
    # no refit planned where 'auto' tries none: one column, or more than 64
    for d in (1, 65):
        assert "first fit kept" not in graph_plan(1000, 21, d, 3, whiten="auto").items


def test_cli_whiten_auto_default_no_whiten_and_config(aniso_csv):
    folder = aniso_csv
    X = np.loadtxt(folder / "aniso.csv", delimiter=",", skiprows=1)
    default = run(["fit", folder / "aniso.csv", "-k", "3", "--seed", "4", "--no-model"])
    assert default.exit_code == 0, default.stderr
    np.testing.assert_array_equal(labels_of(default.stdout),
                                  KernelKMeans(3, whiten="auto", random_state=4).fit(X).labels_)
    off = run(["fit", folder / "aniso.csv", "-k", "3", "--seed", "4", "--no-whiten",
               "--no-model"])
    assert off.exit_code == 0, off.stderr
    np.testing.assert_array_equal(labels_of(off.stdout),
                                  KernelKMeans(3, whiten=False, random_state=4).fit(X).labels_)
    assert "whitened" not in off.stderr
    # info says --no-whiten (the default, neither flag, is 'auto'), and the line it prints refits
    assert run(["fit", folder / "aniso.csv", "-k", "3", "--seed", "4", "--no-whiten", "-o",
                folder / "off.npz"]).exit_code == 0
    shown = run(["info", folder / "off.npz"]).stdout
    options = next(line for line in shown.splitlines() if "--seed" in line)
    assert "--no-whiten" in options.split(), options
    assert run(["fit", folder / "aniso.csv", "-k", "3", "--seed", "4", "-o",
                folder / "auto.npz"]).exit_code == 0
    shown = run(["info", folder / "auto.npz"]).stdout
    options = next(line for line in shown.splitlines() if "--seed" in line).split()
    assert "--no-whiten" not in options and "--whiten" not in options, options
    (folder / "auto.yaml").write_text("whiten: auto\nseed: 4\n")
    configured = run(["fit", folder / "aniso.csv", "-k", "3", "--config",
                      folder / "auto.yaml", "--no-model"])
    assert configured.exit_code == 0, configured.stderr
    assert configured.stdout == default.stdout
    # --no-whiten asks for no refit: accepted by the dense kernels too
    dense = run_process(["fit", "aniso.csv", "-k", "3", "--kernel", "rbf", "--no-whiten",
                         "--no-model"], cwd=folder)
    assert dense.returncode == 0, dense.stderr
    # a sweep fits every k once on its one graph: the default is no refusal
    swept = run_process(["sweep", "aniso.csv", "--k", "2..4", "--seed", "4", "-o", "s.npz"],
                        cwd=folder)
    assert swept.returncode == 0, swept.stderr
    (folder / "bad.yaml").write_text("whiten: sometimes\n")
    before = listing(folder)
    bad = run_process(["fit", "aniso.csv", "-k", "3", "--config", "bad.yaml", "-o", "m.npz"],
                      cwd=folder)
    assert_one_error_line(bad, "key 'whiten' must be true or false or auto", "sometimes",
                          code=2)
    assert listing(folder) == before


def test_auto_under_a_memory_limit_that_holds_one_graph_fits_once():
    from kkmeans_cli.errors import MemoryPlanError
    from kkmeans_cli.kernels.graph import default_neighbors
    from kkmeans_cli.memory import graph_plan
    from kkmeans_cli.model.planning import check_graph_memory

    X, _ = _aniso(3000, seed=11)
    one = graph_plan(3000, default_neighbors(3000, 3), 2, 3, whiten=False).total
    check_graph_memory(3000, 2, [3], memory_limit=one)
    with pytest.raises(MemoryPlanError):
        check_graph_memory(3000, 2, [3], memory_limit=one, whiten="auto")
    got = KernelKMeans(3, random_state=2, memory_limit=one).fit(X)
    want = KernelKMeans(3, random_state=2, whiten=False).fit(X)
    np.testing.assert_array_equal(got.labels_, want.labels_)
    assert "whitening" not in got.fit_stats_["graph"]
    assert KernelKMeans(3, random_state=2).fit(X).fit_stats_["graph"]["whitening"]
    with pytest.raises(MemoryPlanError):      # a limit below one fit is still refused
        KernelKMeans(3, random_state=2, memory_limit=one - 1).fit(X)
    with pytest.raises(MemoryPlanError):      # and True is never dropped
        KernelKMeans(3, random_state=2, memory_limit=one, whiten=True).fit(X)


def _extreme_scales():
    """82 distinct points whose columns' scales differ by 10¹⁹: X·W^{-½} rounds them into a
    few."""
    small = np.random.default_rng(1).normal(size=80) * 1e-3
    return np.r_[np.c_[np.full(40, -1e16), small[:40]], np.c_[small[40:], np.full(40, 5e15)],
                 np.tile([5e15, -1e16], (40, 1)), np.tile([1e16, 5e15], (80, 1))]


def test_a_refit_that_merges_distinct_points_is_not_kept_or_is_refused(tmp_path):
    X = _extreme_scales()
    assert len(np.unique(X, axis=0)) == 82
    auto = fit_graph(X, 5, random_state=0, n_threads=1, whiten="auto")
    plain = fit_graph(X, 5, random_state=0, n_threads=1, whiten=False)
    np.testing.assert_array_equal(auto.labels, plain.labels)
    assert auto.whitening["kept"] is False and auto.whitening["merged_points"] > 0
    assert auto.transform is None
    with pytest.raises(DataError, match=r"whiten=True merged the 82 distinct points into \d+ "
                                        r".*fewer than n_clusters=5; fit without whiten=True"):
        fit_graph(X, 5, random_state=0, n_threads=1, whiten=True)
    with pytest.warns(KKMeansWarning, match="whiten=True merged the 82 distinct points"):
        fit_graph(X, 2, random_state=0, n_threads=1, whiten=True)
    write_csv(tmp_path / "x.csv", X, fmt="%.17g")
    before = listing(tmp_path)
    result = run_process(["fit", "x.csv", "-k", "5", "--whiten", "-o", "m.npz"], cwd=tmp_path)
    assert_one_error_line(result, "--whiten merged the 82 distinct points into",
                          "fewer than -k 5; fit without --whiten", code=1)
    assert listing(tmp_path) == before
    default = run_process(["fit", "x.csv", "-k", "5", "--no-model"], cwd=tmp_path)
    assert default.returncode == 0, default.stderr
    np.testing.assert_array_equal(labels_of(default.stdout),
                                  KernelKMeans(5, whiten=False, random_state=0).fit(X).labels_)


def _small_sample_rule(monkeypatch, above=2_000, size=1_000):
    """The sample rule of whiten='auto' at a size the tests can run: above ``above`` points
    the refit is tried on ``size`` of them first."""
    from kkmeans_cli.kernels import graph_fit

    monkeypatch.setattr(graph_fit, "REFIT_SAMPLE_ABOVE", above)
    monkeypatch.setattr(graph_fit, "REFIT_SAMPLE", size)
    return graph_fit


@pytest.mark.parametrize("step_ratio", ["product", "never"])
def test_above_the_sample_size_a_refit_that_moves_few_on_a_sample_is_not_made(monkeypatch,
                                                                               step_ratio):
    """Moons: on a sample the refit moves a few points only, so the refit of all the points
    is not made, and the record is the sample's own fit's, replayed by hand from the
    documented draw. The sample's Gaussian step cut through the moons (turned down at
    ``SAMPLE_STEP_RATIO`` times its fit's cut or more), so the result is the first fit; with
    that rule off ('never'), the first fit then the Gaussian step."""
    from dataclasses import replace

    from kkmeans_cli.kernels.graph_fit import gaussian_step, search_seed

    graph_fit = _small_sample_rule(monkeypatch)
    if step_ratio == "never":
        monkeypatch.setattr(graph_fit, "SAMPLE_STEP_RATIO", np.inf)
    X, _ = make_moons(3000, noise=0.1, random_state=0)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    got = fit_graph(X, 2, random_state=5, n_threads=1)
    record = got.whitening
    assert record["sample"] == 1000 and record["kept"] is False
    assert record["sample_agreement"] >= AGREEMENT_MAX and got.transform is None
    # the sample: 1000 rows drawn by a generator seeded from the fit's, its default fit
    draw = np.random.default_rng(search_seed(np.random.default_rng(5)))
    rows = np.sort(draw.choice(3000, 1000, replace=False))
    trial = fit_graph(X[rows], 2, random_state=draw, n_threads=1)
    assert trial.gaussian["kept"] is False
    assert trial.gaussian["ncut_ratio"] >= graph_fit.SAMPLE_STEP_RATIO or step_ratio == "never"
    assert {f"sample_{key}": value for key, value in trial.whitening.items()} | {
        "sample_step_ncut_ratio": trial.gaussian["ncut_ratio"]} == {
        key: value for key, value in record.items() if key.startswith("sample_")}
    # all the points: the first fit (the fit's stream not drawn from), then no step or the step
    first = fit_graph(X, 2, random_state=5, n_threads=1, whiten=False)
    if step_ratio == "never":       # the step, then the mixture (turned down on moons)
        want = gaussian_step(X, replace(first, whitening=record), 2)
        assert got.gaussian == want.gaussian and "ncut_ratio" in got.gaussian
        assert got.mixture["kept"] is False
        assert got.mixture["ncut_ratio"] > graph_fit.MIXTURE_NCUT_RATIO     # 14.2
    else:                           # neither the step nor the mixture is made
        want = first
        assert got.gaussian == {"kept": False, "sample": 1000,
                                "sample_ncut_ratio": trial.gaussian["ncut_ratio"]}
        assert got.mixture is None
    np.testing.assert_array_equal(got.labels, want.labels)
    assert got.ncut == want.ncut
    # at or below the size, and where the refit does not apply, no sample is drawn
    graph_fit.REFIT_SAMPLE_ABOVE = 3000
    assert "sample" not in fit_graph(X, 2, random_state=5, n_threads=1).whitening
    assert fit_graph(X, 2, random_state=5, n_threads=1, whiten=True).whitening is None


def test_above_the_sample_size_a_refit_that_moves_many_on_a_sample_is_made_as_before(
        monkeypatch):
    """Anisotropic blobs: on a sample the refit moves many points, so it is made on all of
    them, with the same labels and record as without the sample rule (the sample's draws
    do not touch the fit's own stream)."""
    X, _ = _aniso(n=3000, seed=0)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    without = fit_graph(X, 3, random_state=2, n_threads=1)
    assert "sample" not in without.whitening
    _small_sample_rule(monkeypatch)
    got = fit_graph(X, 3, random_state=2, n_threads=1)
    assert got.whitening == without.whitening and got.gaussian == without.gaussian
    np.testing.assert_array_equal(got.labels, without.labels)
    assert without.whitening["agreement"] < AGREEMENT_MAX     # made, whatever its choice


def test_the_report_info_and_model_say_the_refit_was_not_made(monkeypatch, tmp_path):
    _small_sample_rule(monkeypatch)
    X, _ = make_moons(3000, noise=0.1, random_state=0)
    write_csv(tmp_path / "moons.csv", X, fmt="%.8f")
    done = run(["fit", tmp_path / "moons.csv", "-k", "2", "-o", tmp_path / "m.npz",
                "--summary", tmp_path / "s.json"])
    assert done.exit_code == 0, done.stderr
    assert "(connectivity; whitened refit not made: a sample's moved few points)" in done.stderr
    summary = json.loads((tmp_path / "s.json").read_text())["graph"]["whitening"]
    assert summary["sample"] == 1000 and summary["kept"] is False
    shown = run(["info", tmp_path / "m.npz"])
    assert shown.exit_code == 0, shown.stderr
    assert "whitened refit not made: a sample's moved few points" in shown.stdout
    predicted = run(["predict", tmp_path / "m.npz", tmp_path / "moons.csv"])
    assert predicted.exit_code == 0, predicted.stderr
    assert predicted.stdout == done.stdout


def test_a_sample_the_fit_refuses_or_warns_about_makes_the_refit_as_before(monkeypatch):
    """The sample's fit is internal: a DataError of the sample (say, too few distinct points
    drawn) makes the refit of all the points as without the sample rule, and a warning about
    the sample is not passed on (warnings are errors in this suite)."""
    import warnings

    X, _ = make_moons(3000, noise=0.1, random_state=0)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    without = fit_graph(X, 2, random_state=5, n_threads=1)
    graph_fit = _small_sample_rule(monkeypatch)
    real = graph_fit.fit_graph
    for trouble in ("refuse", "warn"):
        def sample_fit(X_, *args, trouble=trouble, **kwargs):
            if X_.shape[0] == graph_fit.REFIT_SAMPLE:
                if trouble == "refuse":
                    raise (DataError if X_.shape[1] else ValueError)("the sample's trouble")
                warnings.warn("about the sample", KKMeansWarning)
            return real(X_, *args, **kwargs)

        monkeypatch.setattr(graph_fit, "fit_graph", sample_fit)
        got = real(X, 2, random_state=5, n_threads=1)
        if trouble == "refuse":
            assert got.whitening == without.whitening and got.gaussian == without.gaussian
            np.testing.assert_array_equal(got.labels, without.labels)
        else:
            assert got.whitening["sample"] == 1000


def test_a_sample_of_too_few_distinct_points_for_k_neighbourhoods_decides_nothing(monkeypatch):
    """The sample decides only where it holds k neighbourhoods of the whole graph's size
    (k · n_neighbors distinct points): with k = 60 (21 neighbours: 1260 > 1000 rows drawn)
    the refit is made as without the rule; and the rule counts distinct points, not rows."""
    X = np.random.default_rng(0).normal(size=(3000, 2))
    want = {k: fit_graph(X, k, random_state=1, n_threads=1) for k in (60,)}
    _small_sample_rule(monkeypatch)
    for k, without in want.items():
        got = fit_graph(X, k, random_state=1, n_threads=1)
        assert "sample" not in got.whitening and got.whitening == without.whitening
        np.testing.assert_array_equal(got.labels, without.labels)
    # 3000 rows on 1500 distinct points: not above 2000 nodes, no sample drawn
    Y, _ = make_moons(1500, noise=0.1, random_state=0)
    Y = np.vstack([Y, Y])
    assert "sample" not in fit_graph(Y, 2, random_state=5, n_threads=1).whitening


def shape_beside_noise_columns(shape, noise, columns):
    """3,000 points of make_circles (factor .5) or make_moons at ``noise``, beside
    ``columns`` columns of N(0, 0.1²)."""
    from sklearn.datasets import make_circles

    X, y = (make_circles(3000, noise=noise, factor=0.5, random_state=0) if shape == "circles"
            else make_moons(3000, noise=noise, random_state=0))
    return np.hstack([X, np.random.default_rng(0).normal(scale=0.1, size=(3000, columns))]), y


def default_one_and_forced(X, k):
    """The fits with whiten 'auto', False and True (random_state 0, one thread)."""
    return tuple(fit_graph(X, k, random_state=0, n_threads=1, whiten=whiten)
                 for whiten in ("auto", False, True))


def assert_only_a_cut_test_turned_the_refit_down(fit):
    """The default turned its refit down though the refit lowered the criterion, moved more
    than a few points and cut its own graph no higher than the first labels do."""
    record = fit.whitening
    assert record["kept"] is False and fit.transform is None
    assert record["refit_criterion"] < record["criterion"]
    assert record["agreement"] < AGREEMENT_MAX
    assert record["refit_ncut"] <= record["first_ncut_on_refit_graph"]


@pytest.mark.parametrize("shape", ["circles", "moons"])
def test_a_refit_that_cuts_the_first_graph_like_random_labels_is_not_kept(shape):
    """Rings or moons beside 14 columns of low-variance noise: the whitening blows the noise
    up to the shapes' scale and the refit finds groups of it, lowering the Gaussian
    criterion and cutting its own graph less; but its labels cut the first graph more than
    ``REFIT_FIRST_CUT_MAX`` times the first fit's (computed here from the first fit by
    hand), so the first fit stays: ARI 1, as one fit, where the refit scores 0 or 0.55."""
    from kkmeans_cli.engine.graph import cluster_sums
    from kkmeans_cli.kernels.graph_fit import REFIT_FIRST_CUT_MAX, node_labels

    X, y = shape_beside_noise_columns(shape, 0.03 if shape == "circles" else 0.05, 14)
    got, one, forced = default_one_and_forced(X, 2)
    record = got.whitening
    assert_only_a_cut_test_turned_the_refit_down(got)
    assert record["refit_ncut_on_first_graph"] > REFIT_FIRST_CUT_MAX * one.ncut
    assert record["first_ncut"] == one.ncut
    assert REFIT_TESTS[record["turned_down_by"]] == \
        "it cut the first graph far more than the first fit"
    across = cluster_sums(one.kernel, node_labels(one.graph, forced.labels), 2).ncut()
    assert across == pytest.approx(record["refit_ncut_on_first_graph"], rel=1e-12)
    assert adjusted_rand_score(y, forced.labels) < 0.6
    assert adjusted_rand_score(y, got.labels) == adjusted_rand_score(y, one.labels) == 1.0


@pytest.mark.parametrize("shape, columns", [("circles", 30), ("moons", 46)])
def test_a_refit_whose_own_graph_is_cut_like_noise_is_not_kept(shape, columns):
    """Rings or moons beside dozens of columns of low-variance noise: the whitened points
    are mostly noise, the refit's labels cut the first graph less than
    ``REFIT_FIRST_CUT_MAX`` times the first fit's (the noise reaches into the first graph
    too) and pass every other test, but they cut the refit's own graph at more than
    ``REFIT_NCUT_SHARE_MAX`` of what random labels cut (k − 1) and more than
    ``REFIT_NCUT_RATIO_MAX`` times the first fit's cut: the first fit stays, ARI 1 as one
    fit, where the refit scores 0 (circles) or about 0.56 (moons)."""
    from kkmeans_cli.kernels.graph_fit import (REFIT_FIRST_CUT_MAX, REFIT_NCUT_RATIO_MAX,
                                               REFIT_NCUT_SHARE_MAX)

    X, y = shape_beside_noise_columns(shape, 0.05, columns)
    got, one, forced = default_one_and_forced(X, 2)
    record = got.whitening
    assert_only_a_cut_test_turned_the_refit_down(got)
    assert record["refit_ncut_on_first_graph"] <= REFIT_FIRST_CUT_MAX * one.ncut
    assert REFIT_TESTS[record["turned_down_by"]] == "its own graph held no clear clusters"
    # the share test does: the refit's cut of its own graph, replayed from the forced refit
    assert forced.ncut == pytest.approx(record["refit_ncut"], rel=1e-12)
    assert forced.ncut > max(REFIT_NCUT_SHARE_MAX * (2 - 1), REFIT_NCUT_RATIO_MAX * one.ncut)
    assert adjusted_rand_score(y, forced.labels) < 0.6
    assert adjusted_rand_score(y, got.labels) == adjusted_rand_score(y, one.labels) == 1.0


def test_a_refit_that_cuts_far_more_than_the_first_fit_but_within_the_share_is_kept():
    """Breast cancer, raw: the refit cuts its own graph 10 times as much as the first fit
    cuts the first graph (above ``REFIT_NCUT_RATIO_MAX``) but at 0.125 of k − 1, within
    ``REFIT_NCUT_SHARE_MAX``: its graph still separates its clusters clearly, and it is kept
    (ARI 0.42 → 0.77)."""
    from sklearn.datasets import load_breast_cancer

    from kkmeans_cli.kernels.graph_fit import REFIT_NCUT_RATIO_MAX, REFIT_NCUT_SHARE_MAX

    X, y = load_breast_cancer(return_X_y=True)
    got = fit_graph(X, 2, random_state=0, n_threads=1)
    one = fit_graph(X, 2, random_state=0, n_threads=1, whiten=False)
    record = got.whitening
    assert record["kept"] is True
    assert REFIT_NCUT_RATIO_MAX * one.ncut < record["refit_ncut"] <= \
        REFIT_NCUT_SHARE_MAX * (2 - 1)
    assert adjusted_rand_score(y, got.labels) > adjusted_rand_score(y, one.labels) + 0.2


def elongated_blobs(n=1500, k=3, d=20, condition=200.0, seed=0):
    """k Gaussian clusters sharing one covariance whose axes' variances run from 1 to
    ``condition`` (random orientation), centres drawn with standard deviation 2.5."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    Q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    C = Q @ np.diag(np.geomspace(1.0, condition, d)) @ Q.T
    X = rng.normal(size=(k, d))[y] * 2.5 + rng.multivariate_normal(np.zeros(d), C, n)
    return X, y


@pytest.mark.parametrize("case", ["elongated", "wine columns"])
def test_a_refit_cutting_a_high_share_near_the_first_cut_is_kept(case):
    """Where the clusters overlap, a refit that helps can cut its own graph at well over
    ``REFIT_NCUT_SHARE_MAX`` of k − 1: elongated clusters sharing one covariance in 20
    dimensions (0.40, where one fit finds nothing), raw wine on 4 of its columns (0.22). It
    cuts it close to what the first fit cut the first graph (1.3 and 1.9 times, within
    ``REFIT_NCUT_RATIO_MAX``), unlike the refits that found groups of noise, and is kept."""
    from sklearn.datasets import load_wine

    from kkmeans_cli.kernels.graph_fit import REFIT_NCUT_RATIO_MAX, REFIT_NCUT_SHARE_MAX

    if case == "elongated":
        X, y = elongated_blobs()
    else:
        X, y = load_wine(return_X_y=True)
        X = X[:, [0, 2, 3, 11]]
    got = fit_graph(X, 3, random_state=0, n_threads=1)
    one = fit_graph(X, 3, random_state=0, n_threads=1, whiten=False)
    record = got.whitening
    assert record["kept"] is True
    assert REFIT_NCUT_SHARE_MAX * (3 - 1) < record["refit_ncut"] <= \
        REFIT_NCUT_RATIO_MAX * one.ncut
    assert adjusted_rand_score(y, got.labels) > adjusted_rand_score(y, one.labels) + 0.5
