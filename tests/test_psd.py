"""Precomputed kernels, distance matrices, the PSD check and repairs, the embedding solver.

The worked example is the 6-point non-Euclidean distance matrix of R. Kłopotek, M. Kłopotek
and S. Wierzchoń, "A feasible k-means kernel trick under non-Euclidean feature space"; the
Cailliez constant is computed here as a test-only reference (the package does not offer it: it does
not keep the clustering).
"""
import contextlib
import itertools
import os
import subprocess
import warnings

import numpy as np
import pytest

from helpers import blobs, kkmeans_command, labels_of, run, square_grid
from kkmeans_cli import KernelKMeans
from kkmeans_cli.engine import embed
from kkmeans_cli.kernels import psd
from kkmeans_cli.errors import ModelFileError
from kkmeans_cli.errors import KKMeansWarning
from kkmeans_cli.model.model_file import load_model, model_meta, save_model
from kkmeans_cli.io.scaling import Scaler
from reference import objective

# Seed 002, Section 3: a non-Euclidean dissimilarity matrix of 6 points.
D6 = np.array([[0, 12, 24, 24, 48, 48],
               [12, 0, 48, 48, 24, 48],
               [24, 48, 0, 48, 48, 24],
               [24, 48, 48, 0, 24, 12],
               [48, 24, 48, 24, 0, 48],
               [48, 48, 24, 12, 48, 0]], dtype=float)
# The paper's kernel nE F = −½ J D∘² J.
F6 = np.array([[384, 456, 276, 96, -588, -624],
               [456, 672, -444, -624, 420, -480],
               [276, -444, 744, -588, -408, 420],
               [96, -624, -588, 384, 276, 456],
               [-588, 420, -408, 276, 744, -444],
               [-624, -480, 420, 456, -444, 672]], dtype=float)
FAST = dict(n_init=5, random_state=0, n_threads=1)


def centring(n):
    return np.eye(n) - np.ones((n, n)) / n


def gower(D):
    J = centring(D.shape[0])
    return -0.5 * J @ (D ** 2) @ J


def partition(labels):
    """A labelling as a set of frozensets (label names do not matter)."""
    return frozenset(frozenset(np.flatnonzero(labels == c).tolist()) for c in np.unique(labels))


def optimal_partitions(K, k, weights=None):
    """Every partition into k non-empty clusters with the smallest objective (brute force)."""
    n = K.shape[0]
    scored = []
    for labels in itertools.product(range(k), repeat=n - 1):
        labels = np.array((0,) + labels)
        if len(np.unique(labels)) == k:
            scored.append((objective(K, labels, weights), partition(labels)))
    best = min(s for s, _ in scored)
    return best, {p for s, p in scored if s <= best + 1e-9 * abs(best)}


def paper_labels(one_based):
    return np.array(one_based) - 1


def fit(K_or_D, k=2, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KKMeansWarning)
        return KernelKMeans(k, **{"kernel": "rbf", **FAST, **kw}).fit(K_or_D)


def lingoes(K, sigma):
    n = K.shape[0]
    return K + sigma * centring(n)


# -- the paper's worked example ---------------------------------------------------------------
def test_gower_kernel_of_the_example_is_the_papers():
    assert np.allclose(psd.gower_kernel(D6), F6)
    lam, scale, method = psd.smallest_eigenvalue(F6)
    assert method == "eigvalsh"
    assert lam == pytest.approx(-1090.376, abs=1e-3)


def test_example_before_repair_warns_and_finds_the_papers_objective():
    # The optimum is asserted on the embedding solver, which scores all 31 partitions (Lloyd
    # from random starts reaches a local optimum that depends on the seed).
    with pytest.warns(KKMeansWarning, match="not positive semidefinite.*lingoes"):
        model = KernelKMeans(2, **FAST).set_params(kernel="precomputed-distance",
                                                   solver="embed").fit(D6)
    # The paper's clustering [1, 2, 1, 1, 2, 1] with cost 1908; no partition does better.
    assert objective(F6, paper_labels([1, 2, 1, 1, 2, 1])) == pytest.approx(1908)
    best, optima = optimal_partitions(F6, 2)
    assert best == pytest.approx(1908)
    assert partition(paper_labels([1, 2, 1, 1, 2, 1])) in optima
    assert partition(model.labels_) in optima
    assert model.fit_stats_["objective_used"] == pytest.approx(1908)
    assert model.fit_stats_["psd"] is False
    # Theorem 1: weighted centres [10, 1, 1, 10, 1, 1] of [1,1,1,2,2,2] give a lower cost, 1692.
    assert _weighted_centre_cost(F6, [0, 0, 0, 1, 1, 1], [10, 1, 1, 10, 1, 1]) == \
        pytest.approx(1692)


def _weighted_centre_cost(K, labels, w):
    """Eq. (4) with the weighted centres of Eq. (8): Σ_i min_c ‖φ(i) − μ_w(C_c)‖²."""
    labels, w = np.asarray(labels), np.asarray(w, dtype=float)
    dist = []
    for c in np.unique(labels):
        m = labels == c
        wc = w[m] / w[m].sum()
        dist.append(np.diag(K) - 2 * K[:, m] @ wc + wc @ K[np.ix_(m, m)] @ wc)
    return float(np.min(dist, axis=0).sum())


def test_example_after_lingoes_keeps_the_clustering_and_shifts_the_objective():
    model = fit(D6, kernel="precomputed-distance", psd_repair="lingoes", solver="embed")
    sigma = model.fit_stats_["psd_sigma"]
    assert sigma == pytest.approx(1090.376, abs=1e-3)
    K2 = lingoes(F6, sigma)
    assert np.linalg.eigvalsh(K2)[0] > -1e-9 * 2050
    # The paper: [2, 1, 2, 2, 1, 2] costs 6269.502; [1,1,1,2,2,2] costs 6377.502, and with
    # weighted centres 8506.847 — in a Euclidean space no weighted centre beats kernel k-means.
    assert objective(K2, paper_labels([2, 1, 2, 2, 1, 2])) == pytest.approx(6269.502, abs=1e-3)
    assert objective(K2, paper_labels([1, 1, 1, 2, 2, 2])) == pytest.approx(6377.502, abs=1e-3)
    assert _weighted_centre_cost(K2, [0, 0, 0, 1, 1, 1], [10, 1, 1, 10, 1, 1]) == \
        pytest.approx(8506.847, abs=1e-3)
    assert model.fit_stats_["objective_used"] == pytest.approx(6269.502, abs=1e-3)
    assert model.fit_stats_["objective_original"] == pytest.approx(1908)
    assert model.fit_stats_["objective_used"] - model.fit_stats_["objective_original"] == \
        pytest.approx(sigma * (6 - 2))
    # Theorem 7: the optimal partitions before and after the repair are the same.
    _, before = optimal_partitions(F6, 2)
    _, after = optimal_partitions(K2, 2)
    assert before == after
    assert partition(model.labels_) in after
    # Lloyd from random starts: guaranteed only a valid fixed point no better than the
    # optimum, with the repair's exact shift.
    for seed in range(3):
        lloyd = fit(D6, kernel="precomputed-distance", psd_repair="lingoes", random_state=seed)
        assert lloyd.converged_ and lloyd.fit_stats_["objective_used"] >= 6269.502 - 1e-3
        assert lloyd.fit_stats_["objective_used"] - lloyd.fit_stats_["objective_original"] == \
            pytest.approx(sigma * (6 - 2))
        np.testing.assert_array_equal(lloyd.predict(D6), lloyd.labels_)


def test_example_after_cailliez_constant_changes_the_clustering():
    # Test-only reference: Cailliez's additive constant κ is the largest real eigenvalue of
    # [[0, 2 F_L], [−I, −4 F_C]], F_L = −½ J D∘² J, F_C = −½ J D J; then d' = d + κ.
    n = 6
    J = centring(n)
    F_C = -0.5 * J @ D6 @ J
    M = np.block([[np.zeros((n, n)), 2 * F6], [-np.eye(n), -4 * F_C]])
    w = np.linalg.eigvals(M)
    kappa = float(np.max(w[np.abs(w.imag) < 1e-9].real))
    assert kappa == pytest.approx(69.134, abs=1e-3)
    D_c = D6 + kappa * (1 - np.eye(n))
    K_c = gower(D_c)
    assert np.linalg.eigvalsh(K_c)[0] > -1e-6  # Euclidean now
    model = fit(D_c, kernel="precomputed-distance", solver="embed")  # exhaustive: the optimum
    assert model.fit_stats_["psd"] is True
    # The paper: [1, 1, 2, 2, 1, 2] with cost 19317.864 — not the original clustering.
    assert objective(K_c, paper_labels([1, 1, 2, 2, 1, 2])) == pytest.approx(19317.864,
                                                                             abs=1e-3)
    best, after = optimal_partitions(K_c, 2)
    assert best == pytest.approx(19317.864, abs=1e-3)
    assert model.fit_stats_["objective_used"] == pytest.approx(best)
    assert partition(model.labels_) in after
    _, before = optimal_partitions(F6, 2)
    assert not before & after


# -- Lingoes on random non-PSD matrices -----------------------------------------------------
def random_non_psd(n, seed):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(n, n))
    return (A + A.T) / 2


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lingoes_objective_is_original_plus_sigma_n_minus_k(seed):
    n, k = 30, 3
    K = random_non_psd(n, seed)
    model = fit(K, k, kernel="precomputed", psd_repair="lingoes")
    sigma = model.fit_stats_["psd_sigma"]
    assert sigma > 0
    assert sigma == pytest.approx(-np.linalg.eigvalsh(centring(n) @ K @ centring(n))[0],
                                  rel=1e-6)
    original = objective(K, model.labels_)
    repaired = objective(lingoes(K, sigma), model.labels_)
    assert model.fit_stats_["objective_original"] == pytest.approx(original, abs=1e-8)
    assert model.fit_stats_["objective_used"] == pytest.approx(repaired, abs=1e-8)
    assert repaired == pytest.approx(original + sigma * (n - k))
    # ... for every labelling, not only the fitted one.
    rng = np.random.default_rng(seed)
    for _ in range(5):
        labels = rng.integers(0, k, n)
        kk = len(np.unique(labels))
        assert objective(lingoes(K, sigma), labels) == \
            pytest.approx(objective(K, labels) + sigma * (n - kk))


def test_lingoes_keeps_the_optimal_partitions_of_a_random_matrix():
    K = random_non_psd(8, 5)
    sigma = -np.linalg.eigvalsh(centring(8) @ K @ centring(8))[0]
    assert optimal_partitions(K, 2)[1] == optimal_partitions(lingoes(K, sigma), 2)[1]


def test_weighted_lingoes_shift_is_documented_formula():
    n, k = 20, 3
    K = random_non_psd(n, 3)
    w = np.random.default_rng(3).uniform(0.5, 2.0, n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KKMeansWarning)
        model = KernelKMeans(k, kernel="precomputed", psd_repair="lingoes", **FAST).fit(
            K, sample_weight=w)
    sigma = model.fit_stats_["psd_sigma"]
    assert model.fit_stats_["objective_original"] == pytest.approx(
        objective(K, model.labels_, w), abs=1e-8)
    assert model.fit_stats_["objective_used"] == pytest.approx(
        objective(lingoes(K, sigma), model.labels_, w), abs=1e-8)


def test_psd_kernel_is_not_repaired_and_not_warned():
    X, _ = blobs(40)
    K = X @ X.T
    with warnings.catch_warnings():
        warnings.simplefilter("error", KKMeansWarning)
        model = KernelKMeans(3, kernel="precomputed", psd_repair="lingoes", **FAST).fit(K)
    assert model.fit_stats_["psd"] is True and model.fit_stats_["psd_sigma"] == 0.0


def test_lanczos_route_agrees_with_eigvalsh(monkeypatch):
    K = random_non_psd(60, 7)
    exact, scale, _ = psd.smallest_eigenvalue(K)
    monkeypatch.setattr(psd, "EXACT_EIG_MAX_N", 10)
    lam, big, method = psd.smallest_eigenvalue(K)
    assert method == "lanczos"
    assert lam == pytest.approx(exact, rel=1e-6) and big == pytest.approx(scale, rel=1e-6)


def test_sigmoid_fit_is_checked_and_repaired():
    X, _ = blobs(50, d=3)
    with pytest.warns(KKMeansWarning, match="not positive semidefinite"):
        KernelKMeans(3, kernel="sigmoid", gamma=0.5, **FAST).fit(X)
    model = fit(X, 3, kernel="sigmoid", gamma=0.5, psd_repair="lingoes")
    assert model.fit_stats_["psd_sigma"] > 0
    assert np.array_equal(model.predict(X), model.labels_)


def test_clip_changes_the_kernel_and_predicts_its_training_rows():
    model = fit(D6, kernel="precomputed-distance", psd_repair="clip")
    assert model.fit_stats_["psd_repair"] == "clip"
    assert model.fit_stats_["objective_original"] == pytest.approx(
        objective(F6, model.labels_))
    assert np.array_equal(model.predict(D6), model.labels_)
    K = random_non_psd(25, 4)
    model = fit(K, 3, kernel="precomputed", psd_repair="clip")
    assert np.array_equal(model.predict(K), model.labels_)


def test_clip_refuses_large_n(monkeypatch):
    monkeypatch.setattr(psd, "CLIP_MAX_N", 5)
    with pytest.raises(ValueError, match="clip.*limited to n <= 5"):
        fit(D6, kernel="precomputed-distance", psd_repair="clip")


# -- the embedding solver -------------------------------------------------------------------
@pytest.mark.parametrize("kernel,gamma", [("rbf", 0.1), ("linear", "median")])
def test_embed_solver_reaches_lloyds_optimum_on_easy_data(kernel, gamma):
    X, _ = blobs(90, k=3, seed=1)
    lloyd = fit(X, 3, kernel=kernel, gamma=gamma)
    emb = fit(X, 3, kernel=kernel, gamma=gamma, solver="embed")
    assert partition(emb.labels_) == partition(lloyd.labels_)
    assert emb.inertia_ == pytest.approx(lloyd.inertia_, rel=1e-9)
    assert np.array_equal(emb.predict(X), emb.labels_)


def test_embed_solver_truncated_route(monkeypatch):
    monkeypatch.setattr(embed, "EXACT_MAX_N", 10)
    X, _ = blobs(90, k=3, seed=2)
    lloyd = fit(X, 3, kernel="rbf", gamma=0.1)
    emb = fit(X, 3, kernel="rbf", gamma=0.1, solver="embed")
    assert partition(emb.labels_) == partition(lloyd.labels_)
    assert emb.inertia_ == pytest.approx(lloyd.inertia_, rel=1e-6)


def test_embed_solver_on_the_repaired_example():
    # Five random restarts found 6377.502 (a local optimum) with OPENBLAS_CORETYPE=Haswell and
    # 6269.502 without: the 6-point example is so symmetric that its embedding distances tie
    # in exact arithmetic and BLAS rounding broke the ties. Six points into two clusters are
    # 31 partitions: the solver scores them all.
    model = fit(D6, kernel="precomputed-distance", psd_repair="lingoes", solver="embed")
    assert model.fit_stats_["objective_used"] == pytest.approx(6269.502, abs=1e-3)
    K2 = lingoes(F6, model.fit_stats_["psd_sigma"])
    best, optima = optimal_partitions(K2, 2)
    assert model.fit_stats_["objective_used"] == pytest.approx(best, rel=1e-12)
    assert partition(model.labels_) in optima
    assert model.fit_stats_["restart_inertias"] == [model.inertia_]
    assert model.converged_ and np.array_equal(model.predict(D6), model.labels_)


@pytest.mark.parametrize("n,k", [(1, 1), (5, 1), (5, 5), (6, 2), (7, 3), (8, 4), (10, 3)])
def test_partitions_are_every_partition_once(n, k):
    P = embed.partitions(n, k)
    assert P.shape == (embed.stirling2(n, k), n)
    assert len({partition(p) for p in P}) == P.shape[0]
    assert all(len(np.unique(p)) == k for p in P)


@pytest.mark.parametrize("seed", range(4))
def test_embed_exhaustive_search_finds_the_brute_force_optimum(seed):
    rng = np.random.default_rng(seed)
    n, k = 8, 3
    Y = rng.normal(size=(n, 3))
    K = Y @ Y.T if seed % 2 else Y @ Y.T - 2.0 * np.eye(n)  # PSD, and not PSD
    w = rng.uniform(0.5, 2.0, size=n)
    model = fit(K, k, kernel="precomputed", solver="embed", n_init=1)
    best, optima = optimal_partitions(K, k)
    assert model.inertia_ == pytest.approx(best, rel=1e-12)
    assert partition(model.labels_) in optima
    psd_check = (contextlib.nullcontext() if seed % 2 else
                 pytest.warns(KKMeansWarning, match="not positive semidefinite"))
    with psd_check:
        weighted = KernelKMeans(k, kernel="precomputed", solver="embed", n_init=1,
                                random_state=0).fit(K, sample_weight=w)
    wbest, woptima = optimal_partitions(K, k, w)
    assert weighted.inertia_ == pytest.approx(wbest, rel=1e-12)
    assert partition(weighted.labels_) in woptima


def test_embed_solver_breaks_ties_the_same_way_with_any_blas(tmp_path):
    # A 6×6 grid (36 points, too many to enumerate): distances tie everywhere, so rounding of
    # the BLAS kernels chose between optima; the result must not depend on them, nor on the
    # thread count (a subprocess per environment).
    path = tmp_path / "grid.csv"
    np.savetxt(path, square_grid(6), delimiter=",", fmt="%g")
    d6 = tmp_path / "d6.csv"
    np.savetxt(d6, D6, delimiter=",", fmt="%g")
    outputs = {}
    for env in ({"OPENBLAS_CORETYPE": "Haswell"}, {"OPENBLAS_CORETYPE": None},
                {"OMP_NUM_THREADS": "1"}, {"OMP_NUM_THREADS": "2"}):
        full = {k: v for k, v in os.environ.items() if k not in env and k != "OPENBLAS_L2_SIZE"}
        full.update({k: v for k, v in env.items() if v is not None})
        grid = subprocess.run(kkmeans_command() + [
            "fit", str(path), "-k", "4", "--kernel", "linear", "--solver", "embed",
            "--n-init", "5", "--no-model", "-q"], capture_output=True, text=True, env=full,
            timeout=120)
        small = subprocess.run(kkmeans_command() + [
            "fit", str(d6), "-k", "2", "--kernel", "precomputed-distance", "--psd-repair",
            "lingoes", "--solver", "embed", "--n-init", "5", "--no-model", "-q"],
            capture_output=True, text=True, env=full, timeout=120)
        assert grid.returncode == 0 and small.returncode == 0, grid.stderr + small.stderr
        outputs[str(env)] = (grid.stdout, small.stdout)
    assert len(set(outputs.values())) == 1, outputs
    grid_labels, small_labels = next(iter(outputs.values()))
    X = square_grid(6)
    labels = labels_of(grid_labels)
    lloyd = fit(X, 4, kernel="linear", n_init=10)
    assert objective(X @ X.T, labels) == pytest.approx(lloyd.inertia_, rel=1e-12)  # 4 squares
    sigma = -psd.smallest_eigenvalue(F6)[0]
    assert objective(lingoes(F6, sigma), labels_of(small_labels)) == \
        pytest.approx(6269.502, abs=1e-3)


def test_embed_solver_first_start_is_deterministic():
    # Restart 0 is a farthest-point start: one start gives the same fit for every seed.
    X, _ = blobs(60, k=3, seed=5)
    fits = [fit(X, 3, kernel="rbf", gamma=0.1, solver="embed", n_init=1, random_state=seed)
            for seed in (0, 1, 2)]
    assert all(np.array_equal(f.labels_, fits[0].labels_) for f in fits)
    assert fits[0].converged_ and np.array_equal(fits[0].predict(X), fits[0].labels_)


# -- precomputed matrices give the labels of the kernel they came from -------------------------
def test_precomputed_linear_kernel_gives_the_linear_labels():
    X, _ = blobs(60, d=3, seed=3)
    linear = fit(X, 3, kernel="linear")
    pre = fit(X @ X.T, 3, kernel="precomputed")
    assert partition(pre.labels_) == partition(linear.labels_)
    assert pre.inertia_ == pytest.approx(linear.inertia_, rel=1e-9)


def test_precomputed_euclidean_distances_give_the_linear_labels():
    X, _ = blobs(60, d=3, seed=4)
    D = np.sqrt(np.maximum(((X[:, None, :] - X[None, :, :]) ** 2).sum(-1), 0))
    assert np.allclose(psd.gower_kernel(D), centring(60) @ X @ X.T @ centring(60))
    linear = fit(X, 3, kernel="linear")
    dist = fit(D, 3, kernel="precomputed-distance")
    assert dist.fit_stats_["psd"] is True
    assert partition(dist.labels_) == partition(linear.labels_)
    assert dist.inertia_ == pytest.approx(linear.inertia_, rel=1e-8)
    # New points: distance rows give the labels the linear model gives their features.
    Y = X[:10] + 0.3
    DY = np.sqrt(((Y[:, None, :] - X[None, :, :]) ** 2).sum(-1))
    assert partition(dist.predict(DY)) == partition(linear.predict(Y))
    assert np.allclose(dist.transform(DY, kernel_diag=None), linear.transform(Y))


# -- predict -----------------------------------------------------------------------------------
@pytest.mark.parametrize("repair", ["none", "lingoes", "clip"])
def test_predict_training_rows_reproduces_labels(repair):
    K = random_non_psd(40, 9)
    model = fit(K, 4, kernel="precomputed", psd_repair=repair)
    assert np.array_equal(model.predict(K, kernel_diag=np.diag(K)), model.labels_)
    if repair != "none":
        # Unrepaired, negative squared distances are clamped to 0 by the assignment, which
        # needs K(x, x): without kernel_diag only repaired (or PSD) models reproduce labels_.
        assert np.array_equal(model.predict(K), model.labels_)
    X, _ = blobs(40, d=3, seed=9)
    model = fit(X @ X.T, 4, kernel="precomputed", psd_repair=repair)
    assert np.array_equal(model.predict(X @ X.T), model.labels_)
    D = np.abs(random_non_psd(40, 10)) + 1
    np.fill_diagonal(D, 0)
    model = fit(D, 4, kernel="precomputed-distance", psd_repair=repair)
    assert np.array_equal(model.predict(D), model.labels_)


def test_lingoes_distances_of_a_new_point_follow_the_corrected_distances():
    # A new point x is at squared distance d²(x, j) + 2σ from every training point j; its squared
    # distance to the centre of c is mean_j d'²(x, j) − ½ mean_jl d'²(j, l) over c.
    rng = np.random.default_rng(11)
    D = np.abs(random_non_psd(12, 12)) + 1
    np.fill_diagonal(D, 0)
    model = fit(D, 3, kernel="precomputed-distance", psd_repair="lingoes")
    sigma = model.fit_stats_["psd_sigma"]
    x = rng.uniform(1, 3, size=(2, 12))
    got = model.transform(x)
    D2 = D ** 2 + 2 * sigma * (1 - np.eye(12))
    x2 = x ** 2 + 2 * sigma
    for c in range(3):
        m = model.labels_ == c
        ref = x2[:, m].mean(1) - 0.5 * D2[np.ix_(m, m)].mean()
        assert np.allclose(got[:, c], ref)


def test_model_file_round_trip_keeps_the_repair(tmp_path):
    for kernel, data in (("precomputed-distance", D6), ("precomputed", F6)):
        for repair in ("none", "lingoes", "clip"):
            model = fit(data, kernel=kernel, psd_repair=repair)
            path = tmp_path / f"{kernel}-{repair}.npz"
            with open(path, "wb") as f:
                save_model(f, model, Scaler("none"), model_meta(model, Scaler("none")))
            loaded = load_model(str(path))
            assert loaded.meta["psd_repair"] == repair
            assert np.array_equal(loaded.estimator.predict(data), model.labels_)
            assert np.allclose(loaded.estimator.transform(data, kernel_diag=np.diag(F6))
                               if kernel == "precomputed" else loaded.estimator.transform(data),
                               model.transform(data, kernel_diag=np.diag(F6))
                               if kernel == "precomputed" else model.transform(data))


def test_model_file_without_the_distance_state_is_refused(tmp_path):
    model = fit(D6, kernel="precomputed-distance")
    path = tmp_path / "m.npz"
    with open(path, "wb") as f:
        save_model(f, model, Scaler("none"), model_meta(model, Scaler("none")))
    arrays = dict(np.load(path))
    del arrays["psd_train_diag"]
    np.savez(path, **arrays)
    with pytest.raises(ModelFileError, match="psd_train_diag"):
        load_model(str(path))


# -- malformed matrices ------------------------------------------------------------------------
def malformed():
    asym = D6.copy()
    asym[0, 1] = 13
    nan = D6.copy()
    nan[2, 3] = np.nan
    diag = D6.copy()
    diag[4, 4] = 1
    neg = D6.copy()
    neg[1, 2] = neg[2, 1] = -5
    return [
        ("precomputed", D6[:, :5], "must be square.*\\(6, 5\\)"),
        ("precomputed-distance", D6[:5], "must be square"),
        ("precomputed-distance", asym, "not symmetric: max \\|A - A\\^T\\| = 1 at row 0, column 1"),
        ("precomputed", asym, "not symmetric"),
        ("precomputed-distance", nan, "NaN or infinity.*row 2, column 3"),
        ("precomputed-distance", diag, "zero diagonal.*row 4"),
        ("precomputed-distance", neg, "negative entries.*row 1, column 2"),
    ]


@pytest.mark.parametrize("kernel,data,message", malformed())
def test_malformed_matrices_are_refused_by_the_api(kernel, data, message):
    with pytest.raises(ValueError, match=message):
        KernelKMeans(2, kernel=kernel, **FAST).fit(data)


@pytest.mark.parametrize("kernel,data,message", malformed())
def test_malformed_matrices_are_refused_by_the_cli(tmp_path, kernel, data, message):
    path = tmp_path / "matrix.csv"
    np.savetxt(path, data, delimiter=",", fmt="%g")
    model = tmp_path / "m.npz"
    result = run(["fit", path, "-k", 2, "--kernel", kernel, "-o", model, "--threads", 1])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kkmeans: error: ")
    assert str(path) in lines[0]
    assert not model.exists()


def test_tiny_asymmetry_is_rounding_and_accepted():
    D = D6.copy()
    D[0, 1] += 1e-9
    model = fit(D, kernel="precomputed-distance")
    assert partition(model.labels_) in optimal_partitions(F6, 2)[1]


def test_bad_parameters():
    with pytest.raises(ValueError, match="'psd_repair' parameter of KernelKMeans must be"):
        KernelKMeans(2, kernel="precomputed", psd_repair="higham").fit(F6)
    with pytest.raises(ValueError, match="'solver' parameter of KernelKMeans must be"):
        KernelKMeans(2, kernel="precomputed", solver="spectral").fit(F6)
    with pytest.raises(ValueError, match="distance rows must be >= 0"):
        fit(D6, kernel="precomputed-distance").predict(-D6)


# -- command line ------------------------------------------------------------------------------
def test_cli_fit_predict_info_with_lingoes(tmp_path):
    path = tmp_path / "d.csv"
    np.savetxt(path, D6, delimiter=",", fmt="%g")
    model = tmp_path / "m.npz"
    result = run(["fit", path, "-k", 2, "--kernel", "precomputed-distance", "--psd-repair",
                  "lingoes", "-o", model, "--threads", 1, "--n-init", 5, "--solver", "embed"])
    assert result.exit_code == 0, result.stderr
    labels = labels_of(result.stdout)
    assert "psd check" in result.stderr and "not PSD" in result.stderr
    assert "lingoes, sigma = 1090.38" in result.stderr
    assert "6269.5 repaired, 1908 on the original kernel" in result.stderr
    predicted = run(["predict", model, path, "-q"])
    assert predicted.exit_code == 0, predicted.stderr
    assert np.array_equal(labels_of(predicted.stdout), labels)
    info = run(["info", model])
    assert "psd repair:" in info.stdout and "1090.38" in info.stdout
    assert "precomputed-distance" in info.stdout


def test_cli_warns_without_repair_and_embed_solver(tmp_path):
    path = tmp_path / "d.csv"
    np.savetxt(path, D6, delimiter=",", fmt="%g")
    result = run(["fit", path, "-k", 2, "--kernel", "precomputed-distance", "--no-model",
                  "--solver", "embed", "--threads", 1])
    assert result.exit_code == 0, result.stderr
    assert "not positive semidefinite" in result.stderr and "--psd-repair lingoes" in \
        result.stderr
    assert "solver" in result.stderr and "embed" in result.stderr


def test_cli_sweep_with_distances(tmp_path):
    X, _ = blobs(30, k=3)
    D = np.sqrt(((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))
    path = tmp_path / "d.npy"
    np.save(path, D)
    result = run(["sweep", path, "--k", "2..4", "--kernel", "precomputed-distance",
                  "--psd-repair", "lingoes", "--threads", 1, "--n-init", 3, "-q"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("k,")


def test_cli_help_says_what_data_is():
    fit_help = run(["fit", "--help"]).stdout
    assert "--psd-repair" in fit_help and "--solver" in fit_help
    assert "precomputed-distance" in fit_help
    predict_help = " ".join(run(["predict", "--help"]).stdout.split())
    assert "kernel rows K(new, train)" in predict_help
    assert "distance rows D(new, train)" in predict_help
    assert os.path.basename(__file__) == "test_psd.py"
