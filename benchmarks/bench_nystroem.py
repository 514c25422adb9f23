#!/usr/bin/env python
"""Nyström at a million points: kkmeans against scikit-learn, the engine's iterations, the
rank table, thread independence.

    python benchmarks/bench_nystroem.py                       # every case (~15 min on 2 cores)
    python benchmarks/bench_nystroem.py --cases cli,pipeline --n 200000
    python benchmarks/bench_nystroem.py --cases ranks --rank-n 200000

Data: the seeded blobs of ``bench_scale.py`` (d = 20, k = 20, std 2), saved once as .npy.
Each measurement runs in its own Python process (peak RSS from ``wait4``: its own).

Cases
- ``cli``: ``kkmeans fit big.npy -k 20 --approx nystroem`` with the default settings (wall
  time of the command, peak RSS, ARI of the printed labels against the generating blobs);
- ``pipeline``: scikit-learn's ``Nystroem(n_components=m, gamma=γ) + KMeans(n_init)`` (KMeans
  on the features in float32, as ours: float64 needs 6.7 GB at 10⁶ points), the
  same γ (our median rule), m (our default) and number of restarts, in one process; then the
  *exact* kernel k-means objective Σ K_ii − Σ_c Σ_{i,j∈c} K_ij / n_c of both final labellings
  on one seeded sample of ``--sample`` points (the same for both);
- ``iterations``: on our own features (float32, rank s) and the same starting centres (k rows
  drawn at random), our Lloyd (``engine/features.lloyd``, with and without Hamerly's
  bounds) against scikit-learn's
  ``KMeans(init=centres, n_init=1, algorithm='lloyd', tol=0)`` (both stop when no label
  changes), alternating, median of ``--repeats``;
- ``restarts``: the sampled restarts of the estimator against ``n_init`` full Lloyd runs from
  k-means++ starts on all the data (objective on the Nyström features);
- ``ranks``: the estimator at each rank s of ``--ranks`` (``m`` = full rank): seconds, the
  Nyström objective, the exact objective on the sample, ARI;
- ``threads``: the estimator with 1 and 2 threads: identical labels, centres and inertia?
- ``predict``: a model fitted on the n points (default settings, saved by ``kkmeans fit``),
  then ``kkmeans predict model.npz new.npy`` on n new points (blobs drawn with another seed;
  wall time of the command, which loads the model and the data and prints n labels), and
  ``KernelKMeans.predict`` in process (memory warmed by a first call on 20,000 points), each
  against the limit of the work, measured in the same process: n·m exponentials at NumPy's
  one-core rate over 2 cores, plus the products n×d by d×m (distances to the landmarks), n×m
  by m×s (the features) and n×s by s×k (distances to the centres) by BLAS on 2 threads;
  median of ``--repeats``.

Prints Markdown. The machine may be shared: the load average is printed with the results.
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

K = 20


def data_path(args, n):
    return os.path.join(args.workdir, f"blobs_{n}.npy")


def ensure_data(args, n):
    import numpy as np

    from bench_scale import blobs

    path = data_path(args, n)
    if not os.path.exists(path):
        X, y = blobs(n, 20, K)
        np.save(path, X)
        np.save(path.replace(".npy", "_y.npy"), y)
    return path


def load(args, n):
    import numpy as np

    path = data_path(args, n)
    return np.load(path), np.load(path.replace(".npy", "_y.npy"))


def resolved_gamma(X, seed=0):
    """γ of our default (median rule, the estimator's seeded gamma sample)."""
    from kkmeans_cli.kernels.functions import resolve_gamma
    from kkmeans_cli.model.params import fit_rngs

    return resolve_gamma("rbf", "median", X, fit_rngs(seed)[0])


def exact_objective_on_sample(X, labels, gamma, size, seed=12345):
    """Σ K_ii − Σ_c Σ_{i,j∈c} K_ij / n_c on a seeded sample (rbf, exact, in row blocks)."""
    import numpy as np

    from kkmeans_cli.kernels.functions import Kernel

    rng = np.random.default_rng(seed)
    idx = np.sort(rng.choice(X.shape[0], size=min(size, X.shape[0]), replace=False))
    Xs, ls = X[idx], np.asarray(labels)[idx]
    codes = np.unique(ls, return_inverse=True)[1]
    k = codes.max() + 1
    onehot = np.zeros((len(idx), k))
    onehot[np.arange(len(idx)), codes] = 1.0
    kernel = Kernel("rbf", gamma)
    within = 0.0
    for i0 in range(0, len(idx), 2000):
        Kb = kernel.cross(Xs[i0:i0 + 2000], Xs, n_threads=os.cpu_count())
        within += float(np.sum((Kb @ onehot)[np.arange(Kb.shape[0]), codes[i0:i0 + 2000]]
                               / np.bincount(codes, minlength=k)[codes[i0:i0 + 2000]]))
    return float(len(idx) - within)


# -- child cases -------------------------------------------------------------------------------
def child_ours(args):
    import numpy as np

    from kkmeans_cli import KernelKMeans

    X, y = load(args, args.n)
    t0 = time.perf_counter()
    est = KernelKMeans(K, approx="nystroem", random_state=0, n_init=args.n_init,
                       n_threads=args.threads, nystroem_rank=args.rank).fit(X)
    seconds = time.perf_counter() - t0
    np.save(os.path.join(args.workdir, f"labels_{args.tag}.npy"), est.labels_)
    st = est.nystroem_stats_
    out = {"seconds": seconds, "rank": est.nystroem_rank_, "m": est.n_landmarks_,
           "inertia": est.inertia_, "stages": st["stage_seconds"],
           "approx_error": st["approximation_error"], "gamma": est.gamma_}
    if args.tag.startswith("threads"):
        import hashlib

        out["centres_hash"] = hashlib.sha1(est.centers_.tobytes()).hexdigest()
    return out


def child_pipeline(args):
    import numpy as np
    from sklearn.cluster import KMeans
    from sklearn.kernel_approximation import Nystroem

    from kkmeans_cli.memory import default_landmarks

    X, _ = load(args, args.n)
    gamma = resolved_gamma(X)
    m = default_landmarks(args.n, K)
    t0 = time.perf_counter()
    Phi = Nystroem(kernel="rbf", gamma=gamma, n_components=m, random_state=0).fit_transform(X)
    # float32 for KMeans (as ours): half the memory (float64 took 6.7 GB at 10⁶ points) and
    # faster for scikit-learn too
    Phi = Phi.astype(np.float32)
    t1 = time.perf_counter()
    km = KMeans(K, n_init=args.n_init, random_state=0).fit(Phi)
    t2 = time.perf_counter()
    np.save(os.path.join(args.workdir, f"labels_{args.tag}.npy"), km.labels_)
    return {"seconds": t2 - t0, "features_seconds": t1 - t0, "kmeans_seconds": t2 - t1,
            "m": m, "gamma": gamma}


def child_iterations(args):
    import numpy as np
    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_limits

    from kkmeans_cli import KernelKMeans
    from kkmeans_cli.engine import features as F

    from kkmeans_cli.kernels.nystroem import choose_landmarks, landmark_rng

    X, _ = load(args, args.n)
    gamma = resolved_gamma(X)
    from kkmeans_cli.kernels.functions import Kernel
    from kkmeans_cli.memory import default_landmarks

    m = default_landmarks(args.n, K)
    idx = choose_landmarks(args.n, m, landmark_rng(0))
    fmap = F.feature_map(Kernel("rbf", gamma), X[idx], F.default_rank(K, m))
    Phi, x_sq = F.build_features(fmap, X, args.threads)
    del X
    w = np.ones(Phi.shape[0])
    ours, plain, theirs, iters = [], [], [], None
    rng = np.random.default_rng(0)
    for r in range(args.repeats):
        starts = Phi[np.sort(rng.choice(Phi.shape[0], K, replace=False))].astype(np.float64)
        with threadpool_limits(1, user_api="blas"):
            t0 = time.perf_counter()
            a = F.lloyd(Phi, x_sq, w, starts, n_threads=args.threads)
            ours.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            F.lloyd(Phi, x_sq, w, starts, n_threads=args.threads, bounds=False)
            plain.append(time.perf_counter() - t0)
        with threadpool_limits(args.threads):
            t0 = time.perf_counter()
            b = KMeans(K, init=starts.astype(np.float32), n_init=1, algorithm="lloyd", tol=0,
                       max_iter=300).fit(Phi)
            theirs.append(time.perf_counter() - t0)
        iters = (a.n_iter, int(b.n_iter_))
        agree = float(np.mean(a.labels == b.labels_))
    return {"ours": float(np.median(ours)), "sklearn": float(np.median(theirs)),
            "plain": float(np.median(plain)),
            "ours_all": ours, "sklearn_all": theirs, "n_iter": iters, "agree": agree,
            "rank": fmap.rank}


def child_restarts(args):
    import numpy as np

    from kkmeans_cli import KernelKMeans
    from kkmeans_cli.engine import features as F
    from kkmeans_cli.engine.starts import kmeans_plusplus
    from kkmeans_cli.kernels.nystroem import FeatureEngine

    X, _ = load(args, args.n)
    est = KernelKMeans(K, approx="nystroem", random_state=0, n_init=args.n_init,
                       n_threads=args.threads)
    t0 = time.perf_counter()
    est.fit(X)
    sampled_seconds = time.perf_counter() - t0
    # the same features, n_init full runs from k-means++ on all the data
    fmap = F.FeatureMap(est.kernel_, est.landmarks_, est.nystroem_transform_, np.empty(0))
    Phi, x_sq = F.build_features(fmap, X, args.threads)
    w = np.ones(Phi.shape[0])
    rng = np.random.default_rng(1)
    best, t0 = np.inf, time.perf_counter()
    from kkmeans_cli.engine.threads import blas_threads

    class Src:  # k-means++ on the features (rows of Φ Φᵀ)
        n, diag = Phi.shape[0], x_sq

        @staticmethod
        def rows(i):
            return Phi[np.asarray(i)].astype(np.float64) @ Phi.T.astype(np.float64)

    objs = []
    with blas_threads(1):
        for r in range(args.n_init):
            _, centres = kmeans_plusplus(Src, w, K, rng)
            res = F.lloyd(Phi, x_sq, w, Phi[centres].astype(np.float64),
                          n_threads=args.threads)
            objs.append(res.inertia)
    full_seconds = time.perf_counter() - t0
    assert isinstance(FeatureEngine, type)
    return {"sampled": est.inertia_, "sampled_seconds": sampled_seconds,
            "full_best": float(min(objs)), "full_all": objs, "full_seconds": full_seconds}


def child_predict(args):
    import numpy as np
    from threadpoolctl import threadpool_limits

    from bench_scale import exp_seconds_per_value
    from kkmeans_cli.model.model_file import load_model

    est = load_model(args.model).estimator  # the default scaling is none
    new = np.load(args.new)
    n, d = new.shape
    m, s, k = est.n_landmarks_, est.nystroem_rank_, est.n_clusters
    est.predict(new[:20_000])                               # warm-up
    t0 = time.perf_counter()
    labels = est.predict(new)
    seconds = time.perf_counter() - t0
    # the limit of the same work on this machine, now
    rng = np.random.default_rng(0)
    exp_seconds = exp_seconds_per_value(rng) * n * m / 2
    rows = 8192
    A, L = rng.normal(size=(rows, d)), rng.normal(size=(m, d))
    Kb, P = rng.normal(size=(rows, m)), rng.normal(size=(m, s))
    Phi, C = rng.normal(size=(rows, s)).astype(np.float32), rng.normal(size=(k, s)).astype(
        np.float32)
    with threadpool_limits(2):
        A @ L.T, Kb @ P, Phi @ C.T
        t0 = time.perf_counter()
        for _ in range(5):
            A @ L.T, Kb @ P, Phi @ C.T
        gemm_seconds = (time.perf_counter() - t0) / (5 * rows) * n
    return {"seconds": seconds, "exp_seconds": exp_seconds, "gemm_seconds": gemm_seconds,
            "labels_head": labels[:5].tolist(), "m": int(m), "s": int(s)}


CHILDREN = {"predict": child_predict, "ours": child_ours, "pipeline": child_pipeline, "iterations": child_iterations,
            "restarts": child_restarts}


def run_child(args, case, **kw):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", case,
           "--workdir", args.workdir, "--threads", str(args.threads),
           "--repeats", str(args.repeats), "--n-init", str(args.n_init)]
    for key, value in kw.items():
        cmd += [f"--{key.replace('_', '-')}", str(value)]
    return _run(cmd, args.timeout, json_out=True)


def _run(cmd, timeout, json_out=False, stdout_path=None):
    """Run ``cmd`` under /usr/bin/time (its own peak RSS); wall time from here."""
    out = open(stdout_path, "w") if stdout_path else subprocess.PIPE
    t0 = time.perf_counter()
    proc = subprocess.Popen(["/usr/bin/time", "-f", "PEAK_RSS_KB %M %U %S"] + cmd, stdout=out,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": ROOT})
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return {"error": "timeout"}
    wall = time.perf_counter() - t0
    lines = stderr.strip().splitlines()
    stats = [line.split()[1:] for line in lines if line.startswith("PEAK_RSS_KB")]
    rss = [int(v[0]) * 1024 for v in stats]
    cpu = [float(v[1]) + float(v[2]) for v in stats]
    if proc.returncode != 0:
        lines = [line for line in lines if not line.startswith(("PEAK_RSS_KB", "Command"))]
        return {"error": (lines or ["?"])[-1], "wall": wall}
    res = json.loads(stdout.strip().splitlines()[-1]) if json_out else {}
    res.update(wall=wall, peak_rss=rss[-1] if rss else 0, cpu=cpu[-1] if cpu else 0.0)
    return res


def peak_rss_of(result):
    return result.get("peak_rss", 0) / 1e9


def load_avg():
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cases",
                   default="cli,pipeline,iterations,restarts,ranks,threads,predict")
    p.add_argument("--n", default="200000,1000000", help="sizes of cli/pipeline/iterations")
    p.add_argument("--rank-n", type=int, default=200_000)
    p.add_argument("--ranks", default="20,40,60,100,200,m")
    p.add_argument("--restart-n", type=int, default=200_000)
    p.add_argument("--sample", type=int, default=20_000, help="exact objective sample")
    p.add_argument("--n-init", type=int, default=20)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--timeout", type=float, default=3600)
    p.add_argument("--workdir", default=os.path.join(ROOT, "bench_results", "nystroem"))
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--tag", default="x", help=argparse.SUPPRESS)
    p.add_argument("--rank", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--model", default=None, help=argparse.SUPPRESS)
    p.add_argument("--new", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        args.n = int(args.n)
        print(json.dumps(CHILDREN[args.child](args)))
        return
    os.makedirs(args.workdir, exist_ok=True)
    cases = args.cases.split(",")
    sizes = [int(v) for v in args.n.split(",")]
    print(f"machine: {os.cpu_count()} cores, load average {load_avg()} at start (shared); "
          f"{args.threads} threads, n_init = {args.n_init}\n")
    import numpy as np
    from sklearn.metrics import adjusted_rand_score

    if "cli" in cases or "pipeline" in cases:
        print("| n | tool | wall s | CPU s (user + sys) | peak RSS GB | ARI vs blobs | exact "
              "objective (sample) | load |")
        print("|---|---|---|---|---|---|---|---|")
        for n in sizes:
            path = ensure_data(args, n)
            X, y = load(args, n)
            gamma = resolved_gamma(X)
            objs = {}
            if "cli" in cases:
                lab = os.path.join(args.workdir, f"cli_{n}.txt")
                cmd = [sys.executable, "-m", "kkmeans_cli", "fit", path, "-k", str(K),
                       "--approx", "nystroem", "--no-model", "--threads", str(args.threads)]
                r = _run(cmd, args.timeout, stdout_path=lab)
                labels = np.loadtxt(lab, dtype=np.int64) if "error" not in r else None
                objs["kkmeans"] = (r, labels)
            if "pipeline" in cases:
                r = run_child(args, "pipeline", n=n, tag=f"pipe_{n}")
                labels = (np.load(os.path.join(args.workdir, f"labels_pipe_{n}.npy"))
                          if "error" not in r else None)
                objs["sklearn Nystroem+KMeans"] = (r, labels)
            for name, (r, labels) in objs.items():
                if labels is None:
                    print(f"| {n:,} | {name} | failed: {r.get('error')} ||||||")
                    continue
                ex = exact_objective_on_sample(X, labels, gamma, args.sample)
                print(f"| {n:,} | {name} | {r['wall']:.1f} | {r['cpu']:.1f} | "
                      f"{peak_rss_of(r):.2f} | "
                      f"{adjusted_rand_score(y, labels):.4f} | {ex:.2f} | {load_avg()} |",
                      flush=True)
            del X
        print()
    if "iterations" in cases:
        print("| n | rank | our Lloyd s (median; bounds) | ours without bounds | sklearn "
              "KMeans s (median) | sklearn / ours | iterations (ours, sklearn) | label "
              "agreement | load |")
        print("|---|---|---|---|---|---|---|---|---|")
        for n in sizes:
            ensure_data(args, n)
            r = run_child(args, "iterations", n=n)
            if "error" in r:
                print(f"| {n:,} | failed: {r['error']} |||||||")
                continue
            print(f"| {n:,} | {r['rank']} | {r['ours']:.2f} | {r['plain']:.2f} | "
                  f"{r['sklearn']:.2f} | "
                  f"{r['sklearn'] / r['ours']:.2f}× | {r['n_iter']} | {r['agree']:.4f} | "
                  f"{load_avg()} |", flush=True)
        print()
    if "restarts" in cases:
        ensure_data(args, args.restart_n)
        r = run_child(args, "restarts", n=args.restart_n)
        if "error" in r:
            print(f"restarts failed: {r['error']}")
        else:
            print(f"restarts at n = {args.restart_n:,}: sampled restarts objective "
                  f"{r['sampled']:.6f} (whole fit {r['sampled_seconds']:.1f} s); best of "
                  f"{args.n_init} full k-means++ + Lloyd runs {r['full_best']:.6f} "
                  f"({r['full_seconds']:.1f} s for the runs); load {load_avg()}\n", flush=True)
    if "ranks" in cases:
        n = args.rank_n
        ensure_data(args, n)
        X, y = load(args, n)
        gamma = resolved_gamma(X)
        print(f"| rank s (n = {n:,}) | fit s | features s | restarts s | Nyström objective | "
              f"trace error | exact objective (sample) | vs full rank | ARI vs blobs |")
        print("|---|---|---|---|---|---|---|---|---|")
        rows = []
        for s in args.ranks.split(","):
            kw = {"n": n, "tag": f"rank_{s}"}
            if s != "m":
                kw["rank"] = int(s)
            else:
                from kkmeans_cli.memory import default_landmarks

                kw["rank"] = default_landmarks(n, K)
            r = run_child(args, "ours", **kw)
            if "error" in r:
                print(f"| {s} | failed: {r['error']} ||||||||")
                continue
            labels = np.load(os.path.join(args.workdir, f"labels_rank_{s}.npy"))
            rows.append((s, r, exact_objective_on_sample(X, labels, gamma, args.sample),
                         adjusted_rand_score(y, labels)))
        full = [ex for s, _, ex, _ in rows if s == "m"]
        for s, r, ex, ari in rows:
            rel = f"{100 * (ex / full[0] - 1):+.3f}%" if full else "—"
            print(f"| {r['rank']} | {r['seconds']:.1f} | {r['stages']['features']:.1f} | "
                  f"{r['stages']['restarts']:.1f} | {r['inertia']:.2f} | "
                  f"{r['approx_error']:.4f} | {ex:.2f} | {rel} | {ari:.4f} |")
        print(f"\n(load {load_avg()})\n")
        del X
    if "predict" in cases:
        import statistics

        from bench_scale import blobs

        n = sizes[-1]
        path = ensure_data(args, n)
        model = os.path.join(args.workdir, f"model_{n}.npz")
        new_path = os.path.join(args.workdir, f"new_{n}.npy")
        if not os.path.exists(new_path):
            np.save(new_path, blobs(n, 20, K, seed=1)[0])
        r = _run([sys.executable, "-m", "kkmeans_cli", "fit", path, "-k", str(K), "--approx",
                  "nystroem", "-o", model, "--threads", str(args.threads), "--quiet"],
                 args.timeout, stdout_path=os.devnull)
        if "error" in r:
            print(f"predict: the fit failed: {r['error']}")
        else:
            cli, inproc = [], []
            for _ in range(args.repeats):
                lab = os.path.join(args.workdir, f"predict_{n}.txt")
                cli.append(_run([sys.executable, "-m", "kkmeans_cli", "predict", model,
                                 new_path, "--threads", str(args.threads)], args.timeout,
                                stdout_path=lab))
                inproc.append(run_child(args, "predict", n=n, model=model, new=new_path))
            bad = [x for x in cli + inproc if "error" in x]
            if bad:
                print(f"predict failed: {bad}")
            else:
                pred = statistics.median(x["seconds"] for x in inproc)
                lim = statistics.median(x["exp_seconds"] + x["gemm_seconds"] for x in inproc)
                wall = statistics.median(x["wall"] for x in cli)
                runs = ", ".join(f"{x['wall']:.2f}" for x in cli)
                agree = np.array_equal(np.loadtxt(lab, dtype=np.int64)[:5],
                                       inproc[-1]["labels_head"])
                print(f"predict {n:,} new points (m = {inproc[0]['m']}, s = {inproc[0]['s']}): "
                      f"`kkmeans predict model.npz new.npy` {wall:.2f} s wall (runs "
                      f"{runs}"
                      f"; peak RSS {peak_rss_of(cli[-1]):.2f} GB); in process "
                      f"{pred:.2f} s against a limit of {lim:.2f} s (exponentials "
                      f"{statistics.median(x['exp_seconds'] for x in inproc):.2f} s + products "
                      f"{statistics.median(x['gemm_seconds'] for x in inproc):.2f} s): "
                      f"{pred / lim:.2f}× the limit; labels of the command and in process "
                      f"agree: {agree}; load {load_avg()}\n", flush=True)
    if "threads" in cases:
        n = args.rank_n
        ensure_data(args, n)
        res = {}
        for t in (1, 2):
            args_t = argparse.Namespace(**{**vars(args), "threads": t})
            res[t] = run_child(args_t, "ours", n=n, tag=f"threads{t}")
        if any("error" in r for r in res.values()):
            print(f"threads failed: {res}")
        else:
            a = np.load(os.path.join(args.workdir, "labels_threads1.npy"))
            b = np.load(os.path.join(args.workdir, "labels_threads2.npy"))
            print(f"threads at n = {n:,}: labels identical {bool(np.array_equal(a, b))}, "
                  f"centres identical {res[1]['centres_hash'] == res[2]['centres_hash']}, "
                  f"inertia {res[1]['inertia']!r} vs {res[2]['inertia']!r}; seconds "
                  f"{res[1]['seconds']:.1f} (1 thread) / {res[2]['seconds']:.1f} (2 threads)")


if __name__ == "__main__":
    main()
