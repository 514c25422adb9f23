#!/usr/bin/env python
"""Reading benchmark: the compiled CSV parsers kkmeans could read text DATA with, and
kkmeans' own reader (NumPy's parser in blocks, io/text.py), on one numeric CSV file.

    python benchmarks/bench_read.py                          # 10⁶ × 20 (191 MB) in /tmp
    python benchmarks/bench_read.py --n 200000 --repeats 5
    python benchmarks/bench_read.py --cases kkmeans,kkmeans-stdin,numpy-loadtxt
    python benchmarks/bench_read.py --path my.csv --cases kkmeans   # an existing file

The file (made once, in ``--dir``, never in the repository): a header line ``f0,...`` and
``--n`` rows of ``--d`` seeded normal values written with ``%.6f`` (about 9.5 bytes a value).
Each case runs in its own Python subprocess (so its peak RSS, ``VmHWM``, is its own; it
includes the interpreter and the result, 8·n·d bytes), ``--repeats`` times, the cases taking
turns (round r runs each case once); the median time is reported. Every case must give the
same float64 matrix, bit for bit (``same`` column: the SHA-256 of its bytes against the first
case's).

Cases:

- ``kkmeans``: ``read_data(path)`` — blocks of 8 MiB through ``numpy.loadtxt``, the rules of
  docs/cli.md checked, one result array grown in place;
- ``kkmeans-stdin``: the same through standard input (``read_data('-')``, a pipe);
- ``kkmeans-reference``: the cell-by-cell reference reader alone (``text.FAST = False``): the
  reader before this one, for the record (slow: about 24 s for 10⁶ × 20 on a quiet machine);
- ``numpy-loadtxt``: ``numpy.loadtxt(path, delimiter=',', skiprows=1)`` (C since NumPy 1.23);
- ``pandas-c``: ``pandas.read_csv(path, engine='c').to_numpy(float64)``;
- ``pyarrow-csv``: ``pyarrow.csv.read_csv`` (multithreaded) and the columns copied into one
  array;
- ``polars``: ``polars.read_csv(path).to_numpy()``.

With ``--fit``, the command this is for, in process (``kkmeans fit DATA -k 20 --kernel rbf
--approx nystroem --no-model``; the ``same`` column compares the labels): ``fit-npy`` from the
same values saved as ``.npy`` (made once beside the CSV file), ``fit-csv``, ``fit-stdin`` (the
CSV file on standard input), ``fit-bad`` (the CSV file with a bad cell 1,000 lines before the
end: the error, its line and column, and how long it takes to come), ``fit-parquet`` and
``fit-feather`` (the same values written by pyarrow, when it is installed).

With ``--startup`` only: ``kkmeans predict model.npz few.csv`` of 10 rows against the start of
``python -c "import numpy"``, the median of ``--repeats`` fresh processes each.

A case whose library is not installed is listed as such. With each library the installed
size of its distribution is printed (from its RECORD). Prints Markdown. The machine may be shared: note its load (``uptime``) with the numbers.
"""
import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_scale import peak_rss_bytes  # noqa: E402

LIBRARIES = {"numpy-loadtxt": "numpy", "pandas-c": "pandas", "pyarrow-csv": "pyarrow",
             "polars": "polars", "kkmeans": "numpy", "kkmeans-stdin": "numpy",
             "kkmeans-reference": "numpy", "fit-npy": "numpy", "fit-csv": "numpy",
             "fit-stdin": "numpy", "fit-bad": "numpy", "fit-parquet": "pyarrow",
             "fit-feather": "pyarrow"}
FIT_CASES = "fit-npy,fit-csv,fit-stdin,fit-bad,fit-parquet,fit-feather"
# The distributions a library installs (polars keeps its compiled part in a second one).
DISTRIBUTIONS = {"polars": ("polars", "polars-runtime-32", "polars-runtime-64")}


def make_csv(path, n, d, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".part"
    with open(tmp, "w") as f:
        f.write(",".join(f"f{j}" for j in range(d)) + "\n")
        for i0 in range(0, n, 100_000):
            np.savetxt(f, rng.standard_normal((min(n, i0 + 100_000) - i0, d)), fmt="%.6f",
                       delimiter=",")
    os.replace(tmp, path)


def read(case, path):
    import numpy as np

    if case == "numpy-loadtxt":
        return np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float64, ndmin=2)
    if case == "pandas-c":
        import pandas as pd

        return pd.read_csv(path, engine="c").to_numpy(np.float64)
    if case == "pyarrow-csv":
        import pyarrow.csv as pc

        table = pc.read_csv(path)
        X = np.empty((table.num_rows, table.num_columns))
        for j, column in enumerate(table.columns):
            X[:, j] = column.to_numpy()
        return X
    if case == "polars":
        import polars as pl

        return pl.read_csv(path).to_numpy()
    from kkmeans_cli.io import readers, text

    if case == "kkmeans-reference":
        text.FAST = False
    if case == "kkmeans-stdin":
        return readers.read_data("-", stdin=sys.stdin).X
    return readers.read_data(path).X


def fit_child(case, path):
    """``kkmeans fit`` in this process; the labels' SHA-256, or the error line."""
    import contextlib
    import io

    from kkmeans_cli.cli import cli

    data = {"fit-npy": path[:-4] + ".npy", "fit-stdin": "-",
            "fit-bad": path[:-4] + "-bad.csv", "fit-parquet": path[:-4] + ".parquet",
            "fit-feather": path[:-4] + ".feather"}.get(case, path)
    out, err = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["fit", data, "-k", "20", "--kernel", "rbf", "--approx", "nystroem",
                         "--no-model", "-q"],
                        standalone_mode=False)
    seconds = time.perf_counter() - t0
    sha = (hashlib.sha256(out.getvalue().encode()).hexdigest()[:16] if code == 0
           else err.getvalue().strip())
    print(json.dumps({"seconds": seconds, "peak": peak_rss_bytes(), "sha": sha}))


def make_fit_inputs(path):
    """The .npy of the CSV file's values, the same values as Parquet and Feather files (when
    pyarrow is installed) and the CSV file with a bad cell near the end."""
    import importlib.util

    import numpy as np

    from kkmeans_cli.io.readers import read_data

    if not os.path.exists(path[:-4] + ".npy"):
        np.save(path[:-4] + ".npy", read_data(path).X)
    if importlib.util.find_spec("pyarrow") and not os.path.exists(path[:-4] + ".feather"):
        import pyarrow as pa
        import pyarrow.feather as feather
        import pyarrow.parquet as pq

        X = np.load(path[:-4] + ".npy")
        table = pa.table({f"f{j}": X[:, j] for j in range(X.shape[1])})
        pq.write_table(table, path[:-4] + ".parquet")
        feather.write_feather(table, path[:-4] + ".feather")
    bad = path[:-4] + "-bad.csv"
    if not os.path.exists(bad):
        with open(path) as f:
            lines = f.readlines()
        cells = lines[-1000].split(",")
        cells[1] = "1.2.3"
        lines[-1000] = ",".join(cells)
        with open(bad, "w") as f:
            f.writelines(lines)


def child(case, path):
    import numpy as np

    if case.startswith("fit-"):
        return fit_child(case, path)
    t0 = time.perf_counter()
    X = read(case, path)
    seconds = time.perf_counter() - t0
    X = np.ascontiguousarray(X, dtype=np.float64)
    print(json.dumps({"seconds": seconds, "peak": peak_rss_bytes(), "shape": list(X.shape),
                      "sha": hashlib.sha256(X.tobytes()).hexdigest()[:16]}))


def installed_mb(dist):
    """Installed size of a distribution (MB), from its RECORD; None when not installed."""
    from importlib import metadata

    try:
        files = metadata.files(dist) or []
    except metadata.PackageNotFoundError:
        return None
    total = 0
    for f in files:
        try:
            total += os.path.getsize(f.locate())
        except OSError:
            pass
    return total / 1e6


def available(case):
    import importlib.util

    return importlib.util.find_spec(LIBRARIES[case]) is not None


def run_case(case, path, args):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", case, "--path", path]
    stdin = open(path, "rb") if case in ("kkmeans-stdin", "fit-stdin") else subprocess.DEVNULL
    try:
        proc = subprocess.run(cmd, stdin=stdin, capture_output=True, text=True,
                              timeout=args.timeout)
    finally:
        if stdin is not subprocess.DEVNULL:
            stdin.close()
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def startup(args):
    """``kkmeans predict model.npz few.csv`` on 10 rows against ``python -c "import numpy"``:
    the median wall time of ``args.repeats`` fresh processes each (a model of 1,000 points)."""
    import shutil

    import numpy as np

    folder = os.path.join(args.dir, "startup")
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(0)
    train, few = os.path.join(folder, "train.csv"), os.path.join(folder, "few.csv")
    model = os.path.join(folder, "model.npz")
    np.savetxt(train, rng.standard_normal((1000, 5)), delimiter=",")
    np.savetxt(few, rng.standard_normal((10, 5)), delimiter=",")
    kkmeans = shutil.which("kkmeans")
    command = [kkmeans] if kkmeans else [sys.executable, "-m", "kkmeans_cli"]
    subprocess.run(command + ["fit", train, "-k", "3", "--kernel", "rbf", "-o", model, "-q"],
                   check=True, capture_output=True)
    cases = {"python -c 'import numpy'": [sys.executable, "-c", "import numpy"],
             "kkmeans predict model.npz few.csv": command + ["predict", model, few]}
    print("| command | median s | runs |\n|---|---:|---|")
    medians = {}
    for name, cmd in cases.items():
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True)
            times.append(time.perf_counter() - t0)
        medians[name] = statistics.median(times)
        print(f"| `{name}` | {medians[name]:.3f} | {', '.join(f'{t:.3f}' for t in times)} |")
    ratio = medians["kkmeans predict model.npz few.csv"] / medians["python -c 'import numpy'"]
    print(f"\npredict / numpy import: {ratio:.2f}× (target ≤ 4×); load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--d", type=int, default=20)
    p.add_argument("--dir", default="/tmp/kkmeans-bench-read")
    p.add_argument("--path", default=None, help="read this file instead of making one")
    p.add_argument("--cases", default="kkmeans,kkmeans-stdin,numpy-loadtxt,pandas-c,"
                                      "pyarrow-csv,polars")
    p.add_argument("--fit", action="store_true",
                   help=f"also time the fit from each input ({FIT_CASES})")
    p.add_argument("--startup", action="store_true",
                   help="only time `kkmeans predict` of 10 rows against `import numpy`")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    if args.child:
        return child(args.child, args.path)
    if args.startup:
        return startup(args)
    path = args.path or os.path.join(args.dir, f"X-{args.n}x{args.d}.csv")
    if not os.path.exists(path):
        print(f"making {path} ...", file=sys.stderr)
        make_csv(path, args.n, args.d)
    print(f"{path}: {os.path.getsize(path) / 1e6:.0f} MB; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    cases = [case for case in args.cases.split(",") if case]  # --cases "" --fit: fits only
    if args.fit:
        make_fit_inputs(path)
        cases += FIT_CASES.split(",")
    print("| case | library | installed (MB) | median s | runs | peak RSS (GB) | same |")
    print("|---|---|---:|---:|---|---:|---|")
    first = first_fit = None
    # Round-robin: round r runs every case once, so a change of the machine's load during the
    # run touches every case alike (the same-run ratios are what mean something).
    ready = [case for case in cases if available(case)]
    runs_of = {case: [] for case in ready}
    for _ in range(args.repeats):
        for case in ready:
            runs_of[case].append(run_case(case, path, args))
    for case in cases:
        lib = LIBRARIES[case]
        size = sum(installed_mb(dist) or 0 for dist in DISTRIBUTIONS.get(lib, (lib,)))
        if case not in runs_of:
            print(f"| {case} | {lib} | – | not installed | | | |")
            continue
        runs = runs_of[case]
        errors = [r["error"] for r in runs if "error" in r]
        if errors:
            print(f"| {case} | {lib} | {size:.0f} | error: {errors[0]} | | | |")
            continue
        times = [r["seconds"] for r in runs]
        if case.startswith("fit-"):
            first_fit = first_fit or runs[0]["sha"]
            same = ("yes" if runs[0]["sha"] == first_fit else
                    runs[0]["sha"] if case == "fit-bad" else "NO")
        else:
            first = first or runs[0]["sha"]
            same = "yes" if runs[0]["sha"] == first else "NO"
        print(f"| {case} | {lib} | {size:.0f} | {statistics.median(times):.2f} | "
              f"{', '.join(f'{t:.2f}' for t in times)} | "
              f"{max(r['peak'] for r in runs) / 1e9:.2f} | {same} |", flush=True)
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
