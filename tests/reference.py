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


def principal_whitened(X):
    """(Z, to_z): X centred and whitened by its total covariance along the principal axes
    of its correlation matrix, Z = ((X − mean) / sd) V Λ^(−½) with cov(Z) = I, and the map
    of other rows to those coordinates. Unique up to the axes' signs, so the box Z spans is
    that of the graph fit's mixture coordinates."""
    X = np.asarray(X, float)
    mean, sd = X.mean(axis=0), X.std(axis=0)
    lam, V = np.linalg.eigh(np.corrcoef(X.T).reshape(X.shape[1], X.shape[1]))

    def to_z(Y):
        return ((np.asarray(Y, float) - mean) / sd) @ V / np.sqrt(lam)

    return to_z(X), to_z


def noise_mixture_em(Z, labels, k, noise, ridge, tol, max_iter=200, tied=False):
    """EM, dense and in one piece, of k full-covariance Gaussians beside a uniform component
    over the box Z spans (Banfield & Raftery 1993), started from the clusters of ``labels``
    (shares × (1 − noise), means, covariances + ridge·I) and the uniform weight ``noise``;
    each pass an E-step (the mean log-likelihood under the current parameters), then an
    M-step; it stops once the mean log-likelihood rises by less than ``tol``. Returns
    ``label`` (of rows in Z's coordinates: their likeliest Gaussian of the last M-step), the
    passes, the last mean log-likelihood, the uniform weight and the least eigenvalue of the
    covariances. With ``tied`` the Gaussians share one covariance: the labels' pooled one
    (+ ridge·I) to start, then Σ_c Σ_i r_ic (z_i − μ_c)(z_i − μ_c)ᵀ / Σ_c Σ_i r_ic
    (+ ridge·I) each pass."""
    from scipy.special import logsumexp

    n, d = Z.shape
    w = np.bincount(labels, minlength=k) / n * (1 - noise)
    mu = np.array([Z[labels == c].mean(axis=0) for c in range(k)])
    S = np.array([np.cov(Z[labels == c].T, bias=True).reshape(d, d) + ridge * np.eye(d)
                  for c in range(k)])
    if tied:
        pooled = sum((Z[labels == c] - mu[c]).T @ (Z[labels == c] - mu[c]) for c in range(k))
        S = np.array([pooled / n + ridge * np.eye(d)] * k)
    log_volume = np.log(Z.max(axis=0) - Z.min(axis=0)).sum()

    def log_densities(Y=Z):
        out = np.empty((Y.shape[0], k + 1))
        for c in range(k):
            D = Y - mu[c]
            out[:, c] = (np.log(w[c]) - 0.5 * np.einsum("ij,ij->i", D @ np.linalg.inv(S[c]), D)
                         - 0.5 * np.linalg.slogdet(S[c])[1] - 0.5 * d * np.log(2 * np.pi))
        out[:, k] = np.log(noise) - log_volume if noise > 0 else -np.inf
        return out

    previous = -np.inf
    for passes in range(1, max_iter + 1):
        L = log_densities()
        total = logsumexp(L, axis=1)
        R = np.exp(L - total[:, None])
        log_likelihood = total.mean()
        mass = R.sum(axis=0)
        w, noise = mass[:k] / n, mass[k] / n
        for c in range(k):
            mu[c] = R[:, c] @ Z / mass[c]
            D = Z - mu[c]
            S[c] = (D * R[:, c:c + 1]).T @ D / mass[c] + ridge * np.eye(d)
        if tied:
            pooled = sum(mass[c] * (S[c] - ridge * np.eye(d)) for c in range(k)) / mass[:k].sum()
            S[:] = pooled + ridge * np.eye(d)
        if log_likelihood - previous < tol:
            break
        previous = log_likelihood

    def label(Y):
        return np.argmax(log_densities(Y)[:, :k], axis=1)

    return label, passes, log_likelihood, noise, float(np.linalg.eigvalsh(S).min())
