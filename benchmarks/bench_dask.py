#!/usr/bin/env python
"""The Dask route against the in-process route on the same data: 10⁷ × 20 points.

    python benchmarks/bench_dask.py                       # n = 10⁷, workers 1 and 2
    python benchmarks/bench_dask.py --n 2000000 --workers 2
    python benchmarks/bench_dask.py --out-of-core         # 4 GB of data, 1 GB per worker

Data: seeded blobs (k centres in [−10, 10]^d, unit noise), written once to an .npy file
(``--data``; float64, 1.6 GB at 10⁷ × 20) and memory-mapped by whoever reads it. Each case
runs in its own Python subprocess, so its peak RSS is its own:

- ``in-process``: ``KernelKMeans(k, approx='nystroem', n_landmarks=m)`` on the whole array
  (2 threads); then, for seconds per iteration, the same feature map's features built again
  and ``features.assign`` (one Lloyd pass over all points) timed three times (median);
- ``dask-N``: ``KernelKMeans(..., cluster=client).fit`` on a ``LocalCluster`` of N single-threaded worker
  processes on 127.0.0.1 reading the .npy file in chunks; seconds per iteration is the median
  wall time of the Lloyd passes on all data (the client's view: tasks sent, partial sums of
  every block of 2048 rows received and reduced in row order), bytes per pass are those
  partial sums.

Every case uses the same seed, so the labels must be identical: the script checks it.
``--out-of-core``: 2.5·10⁷ × 20 (4 GB) with ``--worker-memory 1G`` and 2 workers: the
features do not fit in the workers' memory, so they are recomputed from the file at every
pass; peak RSS of the client, the scheduler and each worker is reported (VmHWM).
The machine may be shared (2 cores, other jobs): note the load printed with the results.
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


def peak_rss():
    """VmHWM of this process in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def make_data(path, n, d, k, seed=0, block=1_000_000):
    import numpy as np

    if os.path.exists(path):
        X = np.load(path, mmap_mode="r")
        if X.shape == (n, d):
            return
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-10, 10, size=(k, d))
    out = np.lib.format.open_memmap(path + ".tmp", mode="w+", dtype=np.float64, shape=(n, d))
    for i0 in range(0, n, block):
        i1 = min(n, i0 + block)
        y = rng.integers(0, k, size=i1 - i0)
        out[i0:i1] = centres[y] + rng.normal(size=(i1 - i0, d))
    out.flush()
    del out
    os.replace(path + ".tmp", path)


def case_in_process(args):
    import numpy as np

    from kkmeans_cli.engine import features as F
    from kkmeans_cli import KernelKMeans

    X = np.array(np.load(args.data, mmap_mode="r"))
    # memory_limit: the memory plan counts m float64 features (16 GB here), the engine holds
    # s float32 ones; the peak RSS below is what it took.
    est = KernelKMeans(args.k, approx="nystroem", n_landmarks=args.landmarks,
                       n_init=args.n_init, random_state=args.seed, n_threads=2,
                       memory_limit="64G")
    t0 = time.perf_counter()
    est.fit(X)
    total = time.perf_counter() - t0
    np.save(args.labels, est.labels_)
    stats = est.nystroem_stats_
    fmap = F.FeatureMap(kernel=est.kernel_, landmarks=est.landmarks_,
                        projection=est.nystroem_transform_, eigenvalues=np.empty(0),
                        dtype=np.float32)
    Phi, x_sq = F.build_features(fmap, X, 2)
    del X
    centres = F.centres_from(est.centers_, Phi.dtype)
    w, labels, dist = np.ones(Phi.shape[0]), np.full(Phi.shape[0], -1, np.int32), \
        np.empty(Phi.shape[0])
    times = []
    for _ in range(3):
        t = time.perf_counter()
        F.assign(Phi, x_sq, w, centres, labels, dist, 2)
        times.append(time.perf_counter() - t)
    return {"total": total, "stages": stats["stage_seconds"], "n_iter": int(est.n_iter_),
            "inertia": float(est.inertia_), "pass": float(np.median(times)),
            "rank": int(est.nystroem_rank_), "peak_rss": {"process": peak_rss()}}


def case_dask(args, workers):
    import numpy as np

    from kkmeans_cli.distributed.cluster import open_client
    from kkmeans_cli.distributed.readers import open_data
    from kkmeans_cli import KernelKMeans

    with open_client(f"local:{workers}", worker_memory=args.worker_memory) as client:
        t0 = time.perf_counter()
        data = open_data(client, args.data)
        est = KernelKMeans(args.k, approx="nystroem", n_landmarks=args.landmarks,
                           n_init=args.n_init, random_state=args.seed, cluster=client)
        est.fit(data)
        total = time.perf_counter() - t0
        rss = {"client": peak_rss()}
        if client.run_on_scheduler(os.getpid) != os.getpid():   # a LocalCluster's runs here
            rss["scheduler"] = client.run_on_scheduler(peak_rss)
        for i, (addr, value) in enumerate(sorted(client.run(peak_rss).items())):
            rss[f"worker {i + 1}"] = value
        limits = [w.get("memory_limit") for w in client.scheduler_info()["workers"].values()]
    np.save(args.labels, est.labels_)
    cl = est.fit_stats_["cluster"]
    return {"total": total, "stages": est.nystroem_stats_["stage_seconds"],
            "n_iter": int(est.n_iter_), "inertia": float(est.inertia_),
            "pass": float(np.median(cl["pass_seconds"])), "passes": len(cl["pass_seconds"]),
            "bytes_per_pass": cl["bytes_per_pass"], "chunks": cl["chunks"],
            "storage": est.fit_stats_["storage"], "peak_rss": rss,
            "worker_memory_limit": limits}


def run_child(args, case):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", case, "--data", args.data,
           "--k", str(args.k), "--landmarks", str(args.landmarks), "--n-init",
           str(args.n_init), "--seed", str(args.seed), "--labels",
           f"{args.data}.{case}.labels.npy"]
    if args.worker_memory:
        cmd += ["--worker-memory", str(args.worker_memory)]
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise SystemExit(f"{case} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def gb(b):
    return f"{b / 1e9:.2f} GB"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=10_000_000)
    p.add_argument("--d", type=int, default=20)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--landmarks", type=int, default=200)
    p.add_argument("--n-init", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", default="1,2")
    p.add_argument("--no-in-process", action="store_true")
    p.add_argument("--out-of-core", action="store_true")
    p.add_argument("--worker-memory", type=int, default=None)
    p.add_argument("--data", default="/tmp/kkmeans_bench_dask.npy")
    p.add_argument("--child", default=None)
    p.add_argument("--labels", default=None)
    args = p.parse_args()
    if args.child:
        result = (case_in_process(args) if args.child == "in-process"
                  else case_dask(args, int(args.child.split("-")[1])))
        print(json.dumps(result))
        return
    if args.out_of_core:
        args.n, args.workers, args.no_in_process = 25_000_000, "2", True
        args.worker_memory = args.worker_memory or 2**30
        args.k, args.landmarks = 5, 50
        if args.data == "/tmp/kkmeans_bench_dask.npy":
            args.data = "/tmp/kkmeans_bench_dask_4gb.npy"
    t = time.perf_counter()
    make_data(args.data, args.n, args.d, args.k, args.seed)
    print(f"data {args.data}: {args.n:,} × {args.d} float64 "
          f"({gb(8 * args.n * args.d)}), made in {time.perf_counter() - t:.1f} s; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    cases = ([] if args.no_in_process else ["in-process"]) + \
        [f"dask-{w}" for w in args.workers.split(",")]
    results = {}
    for case in cases:
        results[case] = run_child(args, case)
        print(f"{case}: {json.dumps(results[case])}", file=sys.stderr)
    import numpy as np

    labels = {c: np.load(f"{args.data}.{c}.labels.npy") for c in cases}
    same = all(np.array_equal(labels[cases[0]], labels[c]) for c in cases)
    print(f"\nk = {args.k}, m = {args.landmarks} landmarks, n_init = {args.n_init}, seed "
          f"{args.seed}; labels identical in every case: {same}; load average now "
          f"{os.getloadavg()[0]:.1f}\n")
    print("| route | total s | features s | restarts s | s / iteration | points / s "
          "| partial sums / pass | peak RSS |")
    print("|---|---|---|---|---|---|---|---|")
    for case in cases:
        r = results[case]
        st = r["stages"]
        rss = ", ".join(f"{name} {gb(v)}" for name, v in r["peak_rss"].items())
        moved = f"{r['bytes_per_pass'] / 1e6:.1f} MB ({r['chunks']} chunks)" \
            if "bytes_per_pass" in r else "—"
        print(f"| {case} | {r['total']:.1f} | {st.get('features', 0):.1f} | "
              f"{st.get('restarts', 0):.1f} | {r['pass']:.3f} | {args.n / r['pass']:.3g} | "
              f"{moved} | {rss} |")
    for case in cases:
        if "storage" in results[case]:
            print(f"\n{case}: {results[case]['storage']}; worker memory limits "
                  f"{[gb(v) for v in results[case]['worker_memory_limit']]}")


if __name__ == "__main__":
    main()
