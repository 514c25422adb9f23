"""Brute-force NumPy references for the engine tests: small and obviously right, no speed."""
import numpy as np


def kernel_matrix(X, Y, name, gamma=None, degree=3, coef0=1.0):
    """K(X, Y) straight from the formulas (scikit-learn's ``pairwise_kernels`` conventions)."""
    X = np.asarray(X, float)
    Y = np.asarray(Y, float)
    dot = X @ Y.T
    if name == "linear":
        return dot
    if name == "poly":
        return (gamma * dot + coef0) ** degree
    if name == "sigmoid":
        return np.tanh(gamma * dot + coef0)
    if name == "cosine":
        nx = np.linalg.norm(X, axis=1)[:, None]
        ny = np.linalg.norm(Y, axis=1)[None, :]
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where((nx > 0) & (ny > 0), dot / (nx * ny), 0.0)
    diff = X[:, None, :] - Y[None, :, :]
    if name == "rbf":
        return np.exp(-gamma * (diff ** 2).sum(-1))
    if name == "laplacian":
        return np.exp(-gamma * np.abs(diff).sum(-1))
    if name == "chi2":
        tot = X[:, None, :] + Y[None, :, :]
        with np.errstate(invalid="ignore", divide="ignore"):
            terms = np.where(tot != 0, diff ** 2 / tot, 0.0)
        return np.exp(-gamma * terms.sum(-1))
    raise ValueError(name)


def distances(K, labels, weights, k):
    """d(i, c) = K_ii − 2 Σ_{j∈c} w_j K_ij / W_c + Σ_{j,l∈c} w_j w_l K_jl / W_c², clamped at 0,
    +inf for clusters of zero weight; shape (n, k)."""
    n = K.shape[0]
    D = np.full((n, k), np.inf)
    for c in range(k):
        m = labels == c
        Wc = weights[m].sum()
        if Wc <= 0:
            continue
        Fc = K[:, m] @ weights[m]
        gc = weights[m] @ K[np.ix_(m, m)] @ weights[m]
        D[:, c] = np.maximum(np.diag(K) - 2 * Fc / Wc + gc / Wc ** 2, 0.0)
    return D


def relocate(labels, dist_own, weights, k):
    """Fill zero-weight clusters with the farthest points (ties by index), donors keep one."""
    W = np.array([weights[labels == c].sum() for c in range(k)])
    empty = [c for c in range(k) if W[c] <= 0]
    members = np.array([np.sum((labels == c) & (weights > 0)) for c in range(k)])
    for i in sorted(range(len(labels)), key=lambda i: (-dist_own[i], i)):
        if not empty:
            break
        if weights[i] > 0 and members[labels[i]] >= 2:
            members[labels[i]] -= 1
            labels[i] = empty.pop(0)
    return labels


def kernel_kmeans(K, labels, k, weights=None, max_iter=300):
    """Lloyd's kernel k-means from ``labels`` until the labels stop changing.

    Returns labels, inertia Σ w_i d(i, label_i), number of assignment steps.
    """
    n = K.shape[0]
    weights = np.ones(n) if weights is None else np.asarray(weights, float)
    labels = np.array(labels)
    n_iter = 0
    for n_iter in range(1, max_iter + 1):
        D = distances(K, labels, weights, k)
        new = np.argmin(D, axis=1)
        new = relocate(new, D[np.arange(n), new], weights, k)
        if np.array_equal(new, labels):
            break
        labels = new
    D = distances(K, labels, weights, k)
    return labels, float(weights @ D[np.arange(n), labels]), n_iter


def kmeans_plusplus_labels(K, k, rng):
    """Plain (non-greedy) k-means++ in feature space; labels of the nearest chosen point."""
    n = K.shape[0]
    diag = np.diag(K)
    centres = [rng.integers(n)]
    d2 = np.maximum(diag - 2 * K[:, centres[0]] + diag[centres[0]], 0)
    for _ in range(1, k):
        p = d2 / d2.sum()
        c = rng.choice(n, p=p)
        centres.append(c)
        d2 = np.minimum(d2, np.maximum(diag - 2 * K[:, c] + diag[c], 0))
    D = np.stack([np.maximum(diag - 2 * K[:, c] + diag[c], 0) for c in centres], axis=1)
    return np.argmin(D, axis=1)


def objective(K, labels, weights=None):
    """Σ_i w_i K_ii − Σ_c (Σ_{i,j∈c} w_i w_j K_ij) / W_c."""
    weights = np.ones(K.shape[0]) if weights is None else weights
    total = weights @ np.diag(K)
    for c in np.unique(labels):
        m = labels == c
        total -= weights[m] @ K[np.ix_(m, m)] @ weights[m] / weights[m].sum()
    return float(total)


def total_whitened(X):
    """X centred and whitened by its total covariance's Cholesky factor: Z with cov(Z) = I
    (the coordinates of the Gaussian classification criterion, by another route)."""
    X = np.asarray(X, float)
    L = np.linalg.cholesky(np.cov(X.T, bias=True))
    return np.linalg.solve(L, (X - X.mean(axis=0)).T).T


def gaussian_cluster_terms(Z, labels, c, ridge=1e-3):
    """(points, covariance + ridge·I, its log-determinant) of cluster c of whitened Z."""
    Zc = Z[labels == c]
    S = np.cov(Zc.T, bias=True).reshape(Z.shape[1], Z.shape[1]) + ridge * np.eye(Z.shape[1])
    return Zc, S, np.log(np.linalg.det(S))
