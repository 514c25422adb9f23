"""What the commands share: the option groups, the merged options (flags over a YAML config
over the defaults), the estimator's keyword arguments, and the checks of the options made
before any work (the parameters' rules and the memory plan, by the estimator's own code).

Adding a command that fits: decorate it with :func:`fit_options`, :func:`data_options` and
:func:`run_options`, get the merged options with :func:`effective_options`, the data with
``inputs.prepare_fit_data`` and the estimator's keyword arguments with
:func:`estimator_kwargs`.
The allowed values and defaults come from ``kkmeans_cli._options`` (shared with the estimator).
"""
import math

import click

from .. import _options
from .._options import DEFAULTS
from ..errors import UsageError

# The choices and defaults come from the one table the estimator's parameter constraints use
# (_options.py, which imports nothing: ``kkmeans --help`` loads neither NumPy nor sklearn).


KERNEL_CHOICES = _options.KERNELS
PRECOMPUTED_KERNELS = _options.PRECOMPUTED_KERNELS  # DATA is an n×n matrix
PSD_REPAIR_CHOICES = _options.PSD_REPAIRS
SOLVER_CHOICES = _options.SOLVERS
SCALE_CHOICES = _options.SCALES
ALGORITHM_CHOICES = _options.ALGORITHMS
STORAGE_CHOICES = _options.STORAGES
DTYPE_CHOICES = _options.DTYPES
DEFAULT_N_INIT = DEFAULTS["n_init"]
INIT_CHOICES = _options.INITS
OBJECTIVE_CHOICES = _options.OBJECTIVES
REFINE_CHOICES = _options.REFINES
WEIGHTING_CHOICES = _options.WEIGHTINGS
NEIGHBOR_SEARCH_CHOICES = _options.NEIGHBOR_SEARCHES


class AutoFlag(click.Option):
    """An on/off flag (``--whiten/--no-whiten``) that a config may also set to ``auto``
    (``io.config.convert_value``); not given, it is None: the API's default."""

    config_words = ("auto",)


class GammaType(click.ParamType):
    """``--gamma``: a positive number, ``median`` or ``scale``."""

    name = "gamma"

    def convert(self, value, param, ctx):
        if isinstance(value, str) and value in ("median", "scale"):
            return value
        if isinstance(value, bool):
            self.fail(f"{value!r} is not a positive number, 'median' or 'scale'", param, ctx)
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a positive number, 'median' or 'scale'", param, ctx)
        if not (number > 0 and math.isfinite(number)):
            self.fail(f"must be a positive number (or 'median' or 'scale'); got {value}",
                      param, ctx)
        return number

    def get_metavar(self, param, ctx=None):
        return "FLOAT|median|scale"


class FiniteFloat(click.FloatRange):
    """A finite number (``inf`` and ``nan`` refused), at least ``min`` when given."""

    name = "float"

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number

    def _describe_range(self):
        # click would show "x<=None" for a range without bounds (--coef0).
        if self.min is None and self.max is None:
            return ""
        return super()._describe_range()


class Integer(click.IntRange):
    """A whole number within bounds. click names an ``IntRange`` "integer range" in its message
    for a value that is no integer ("'2.5' is not a valid integer range"); this one says
    "'2.5' is not a valid integer"."""

    name = "integer"


class AtMost(Integer):
    """An integer range whose upper bound is stated on its own (the lower bound keeps click's
    wording, ``x>=1``)."""

    def __init__(self, most, min=None):
        super().__init__(min=min)
        self.most = most

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if number > self.most:
            self.fail(f"{number} is more than {self.most:,}", param, ctx)
        return number


SEED_MAX = 2 ** 32 - 1
# Restarts are listed before they run (their start methods): a bound keeps a typo such as
# --n-init 99999999999999 a usage error instead of a failed allocation.
MAX_N_INIT = 1_000_000


class KsType(click.ParamType):
    """``sweep --k``: a text of ranges and lists (``2..10``, ``2,3,5``, ``2..4,8``), read by
    ``model.sweep.parse_k_ranges`` once the rows are known. A config may also give one
    whole number or a YAML list of numbers and texts (``k: [2, 3, 5]``, ``k: [2..4, 8]``),
    read as that text."""
    name = "text"
    #: a config's YAML list is this option's value too (``io.config.convert_value``)
    accepts_list = True

    def convert(self, value, param, ctx):
        if isinstance(value, str):
            return value
        items = value if isinstance(value, list) else [value]
        bad = [v for v in items if isinstance(v, bool) or not isinstance(v, (int, str))]
        if bad or not items:
            got = "an empty list" if not items else f"{str(bad[0])[:40]!r} ({type(bad[0]).__name__})"
            self.fail(f"must be a text such as 2..10 or 2,3,5, a whole number, or a list of "
                      f"them; got {got}", param, ctx)
        return ",".join(str(v) for v in items)

    @staticmethod
    def check_config(text):
        """A config's ks read as ``--k`` reads them (``io.config.convert_value`` checks them so
        even when a flag overrides the key): ``click.BadParameter`` with what is wrong."""
        from ..model.sweep import parse_k_ranges

        try:
            parse_k_ranges(text, minimum=2)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None


class SizeType(click.ParamType):
    """``--memory-limit``: bytes, or a size such as ``8G``, ``500M``, ``1.5GB``."""

    name = "size"

    def convert(self, value, param, ctx):
        from ..memory import parse_size

        try:
            return parse_size(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)

    def get_metavar(self, param, ctx=None):
        return "SIZE"


APPROX_CHOICES = _options.APPROXES


class WhereType(click.ParamType):
    """``--cluster`` (``local`` or ``local:N``) and ``--scheduler`` (``tcp://HOST:PORT`` or a
    scheduler file), checked when parsed by the parser of ``distributed/cluster.py`` (a
    config's value too): a malformed value is a usage error at once, not a cluster that
    cannot start or a connection that times out."""

    def __init__(self, name):
        self.name = name

    def convert(self, value, param, ctx):
        from ..distributed import cluster

        parse = cluster.parse_local if self.name == "cluster" else cluster.parse_scheduler
        try:
            parse(value)
        except UsageError as exc:
            self.fail(str(exc).removeprefix(f"--{self.name} "), param, ctx)
        return str(value).strip()


class DelimiterType(click.ParamType):
    """``--delimiter``: one character, 'tab' or 'whitespace', checked when parsed (before
    DATA is opened; a config's value too, ``_text.delimiter_problem``)."""

    name = "text"

    def convert(self, value, param, ctx):
        from .._text import delimiter_problem

        problem = delimiter_problem(str(value))
        if problem is not None:
            self.fail(problem, param, ctx)
        return str(value)


class CheckedLater(click.ParamType):
    """A text the command reads when it runs (its flag taken as given); a config's value is
    checked at once by ``check_config`` (``io.config.convert_value``), also one a flag
    overrides or one of another command."""

    name = "text"

    def convert(self, value, param, ctx):
        return str(value)


class OutputPath(CheckedLater):
    """An output's PATH (the command checks it when it writes); a config's: not empty, and
    for ``plot`` of a plot format."""

    name = "path"

    def __init__(self, plot=False):
        self.plot = plot

    def check_config(self, value):
        if value == "":
            raise click.BadParameter("the path is empty")
        if self.plot:
            from .plotting import plot_format

            try:
                plot_format(value)
            except UsageError as exc:
                raise click.BadParameter(str(exc).removeprefix(f"--plot {value}: ")) from None


class ColumnsType(CheckedLater):
    """``--columns``, read when DATA is; a config's parsed at once
    (``io.readers.parse_columns``)."""

    @staticmethod
    def check_config(value):
        from ..io.readers import parse_columns

        try:
            parse_columns(value)
        except UsageError as exc:
            raise click.BadParameter(str(exc).removeprefix("--columns ")) from None


class InitType(CheckedLater):
    """``--init``: a start method or a file of labels, read when DATA is; a config's checked
    at once (``cli.inputs.init_is_file``: a method, or a path; a path-like one that does not
    exist is said when it is read, with the key it came from)."""

    @staticmethod
    def check_config(value):
        from ..errors import DataError
        from .inputs import init_is_file

        try:
            init_is_file(value)
        except UsageError as exc:
            raise click.BadParameter(str(exc).removeprefix(f"--init {value}: ")) from None
        except DataError:
            pass


# -- shared option groups ------------------------------------------------------------------
def _apply(options, f):
    for option in reversed(options):
        f = option(f)
    return f


def fit_options(f, kernel=DEFAULTS["kernel"]):
    """The options of fitting a model (everything but k and the outputs), shared by the
    commands that fit; ``kernel`` is the command's default kernel."""
    return _apply([
        click.option("--kernel", type=click.Choice(KERNEL_CHOICES), default=kernel,
                     show_default=True,
                     help="Kernel; knn: the normalized cut of the k-nearest-neighbour graph "
                          "of DATA (--n-neighbors, --weighting); 'precomputed': DATA is the "
                          "n×n kernel matrix, or a sparse affinity graph (.npz of "
                          "scipy.sparse.save_npz, or Matrix Market .mtx); 'precomputed-distance': DATA is the n×n "
                          "dissimilarity matrix (kernel by Gower double centering)."),
        click.option("--n-neighbors", type=Integer(min=1), default=None, metavar="INT",
                     help="knn: neighbours of each point, itself included (fewer than the "
                          "rows)  [default: 20 other points, at most distinct rows/k - 1]"),
        click.option("--weighting", type=click.Choice(WEIGHTING_CHOICES),
                     default=DEFAULTS["weighting"], show_default=True,
                     help="knn: edge weights; connectivity: 1 on every edge; self-tuning: "
                          "exp(-d²/(σ_i σ_j)), σ_i the distance to the 7th nearest other "
                          "point (Zelnik-Manor & Perona 2004)."),
        click.option("--neighbor-search", type=click.Choice(NEIGHBOR_SEARCH_CHOICES),
                     default=DEFAULTS["neighbor_search"], show_default=True,
                     help="knn above 15 features: exact (quadratic) or approximate "
                          "(pynndescent, pip install 'kkmeans-cli[ann]'); auto: approximate "
                          "from 100,000 points when installed."),
        click.option("--whiten/--no-whiten", cls=AutoFlag, default=None,
                     help="knn: fit, whiten DATA by the within-cluster covariance of the "
                          "clusters found, and fit again (overlapping ellipsoidal groups; "
                          "twice the time); --no-whiten: one fit. Neither: fit keeps the "
                          "refit where it lowers the clusters' Gaussian criterion and moves "
                          "more than a few points, then a Gaussian step and a Gaussian "
                          "mixture where they keep nearly the same cut (2 to 64 features), "
                          "all undone where BIC prefers 2k Gaussians to k (the clusters "
                          "are not Gaussian); sweep fits each k once."),
        click.option("--gamma", type=GammaType(), default=DEFAULTS["gamma"], show_default=True,
                     help="Kernel width. median: 1/(2·median squared pair distance); "
                          "scale: 1/(n_features·Var(X))."),
        click.option("--degree", type=Integer(min=1), default=DEFAULTS["degree"],
                     show_default=True,
                     help="Degree of the poly kernel."),
        click.option("--coef0", type=FiniteFloat(), default=DEFAULTS["coef0"], show_default=True,
                     help="Offset of the poly and sigmoid kernels."),
        click.option("--scale", type=click.Choice(SCALE_CHOICES), default=DEFAULTS["scale"],
                     show_default=True,
                     help="Feature scaling fitted on DATA, stored in the model."),
        click.option("--init", type=InitType(), default=DEFAULTS["init"], show_default=True,
                     metavar="k-means++|spectral|random|PATH",
                     help="Starting centres, or a file with one initial label per row. "
                          "spectral: k-means on the leading eigenvectors of K. With "
                          "k-means++ and several restarts, restart 1 is spectral."),
        click.option("--n-init", type=AtMost(MAX_N_INIT, min=1),
                     default=DEFAULT_N_INIT, show_default=True,
                     help="Restarts (at most 1,000,000); the lowest inertia wins (knn: "
                          "its default Gaussian step or mixture, where kept, instead)."),
        click.option("--max-iter", type=Integer(min=1), default=DEFAULTS["max_iter"],
                     show_default=True,
                     help="Iterations per restart at most."),
        click.option("--tol", type=FiniteFloat(min=0), default=DEFAULTS["tol"],
                     show_default=True,
                     help="Stop when the relative objective change is at most this."),
        click.option("--objective", type=click.Choice(OBJECTIVE_CHOICES),
                     default=DEFAULTS["objective"],
                     show_default=True,
                     help="kmeans: within-cluster scatter in feature space; ncut: the "
                          "normalized cut (degree-weighted kernel k-means)."),
        click.option("--refine", type=click.Choice(REFINE_CHOICES), default=DEFAULTS["refine"],
                     show_default=True,
                     help="Hartigan single-point moves after Lloyd; auto: on unless --init "
                          "is a labels file."),
        click.option("--algorithm", type=click.Choice(ALGORITHM_CHOICES),
                     default=DEFAULTS["algorithm"],
                     show_default=True,
                     help="Iteration scheme; all give the same labels from the same start. "
                          "elkan skips distances with bounds (positive semidefinite kernels); "
                          "auto: elkan with --storage blocked or --approx nystroem where "
                          "measured faster (fewer than 32 features; blocked also with "
                          "k >= 20), else lloyd."),
        click.option("--psd-repair", type=click.Choice(PSD_REPAIR_CHOICES),
                     default=DEFAULTS["psd_repair"],
                     show_default=True,
                     help="For a kernel that is not positive semidefinite (sigmoid, "
                          "precomputed): lingoes adds sigma(I - 11'/n) and keeps the optimal "
                          "clustering; clip zeroes negative eigenvalues (changes it)."),
        click.option("--solver", type=click.Choice(SOLVER_CHOICES), default=DEFAULTS["solver"],
                     show_default=True,
                     help="lloyd: iterations on K; embed: k-means on the eigen-embedding "
                          "V Lambda^1/2 of K (a cross-check)."),
        click.option("--weights", default=None, metavar="PATH",
                     help="File with one non-negative sample weight per row."),
        click.option("--seed", type=Integer(0, SEED_MAX), default=0, show_default=True,
                     help="Seed of all randomness (same seed, same labels)."),
        click.option("--dtype", type=click.Choice(DTYPE_CHOICES), default=DEFAULTS["dtype"],
                     show_default=True, help="Storage of the kernel matrix."),
        click.option("--threads", type=Integer(min=1), default=None,
                     help="OpenMP and BLAS threads  [default: all cores]"),
        click.option("--memory-limit", type=SizeType(), default=None,
                     help="Refuse before allocating more than this (8G, 500M, 1.5GB or "
                          "bytes; binary units: 1G = 1024³ bytes = 1 GiB)  [default: 80% of "
                          "the available RAM]"),
        click.option("--approx", type=click.Choice(APPROX_CHOICES), default=DEFAULTS["approx"],
                     show_default=True,
                     help="nystroem: k-means on Nyström features of --landmarks points "
                          "(O(n·m) memory instead of the n×n kernel matrix)."),
        click.option("--storage", type=click.Choice(STORAGE_CHOICES),
                     default=DEFAULTS["storage"],
                     show_default=True,
                     help="matrix: compute the n×n kernel matrix once and hold it. blocked: "
                          "never hold it; recompute kernel values in blocks when needed "
                          "(exact, slower per pass). auto: blocked when the matrix does not fit "
                          "--memory-limit; with restarts screenable on a sample (more than "
                          "twice its points) the faster route by a cost model (the report's "
                          "route row); else matrix, except a fit with one start "
                          "(--n-init 1) of 4096+ points on a positive semidefinite kernel: it "
                          "starts blocked and builds the matrix only if needed (same result)."),
        click.option("--landmarks", type=Integer(min=1), default=None, metavar="INT",
                     help="Nyström landmarks m (seeded uniform sample of the rows)  "
                          "[default: min(n, max(300, 20·k), 1000)]"),
        click.option("--rank", type=Integer(min=1), default=None, metavar="INT",
                     help="Nyström rank s: features on the top s eigenvectors of the "
                          "landmarks' kernel matrix (rank-restricted Nyström)  "
                          "[default: min(m, 5·k)]"),
    ], f)


def data_options(f):
    """The options of reading DATA."""
    return _apply([
        click.option("--header/--no-header", default=None,
                     help="Whether text DATA starts with a header line  [default: detect: "
                          "a first line with no number in it]. Lines starting with # are "
                          "comments."),
        click.option("--delimiter", type=DelimiterType(), default=None, metavar="CHAR",
                     help="Field separator of text DATA ('tab', 'whitespace')  "
                          "[default: detect , tab ; or whitespace]"),
        click.option("--columns", type=ColumnsType(), default=None, metavar="A,B,...",
                     help="Columns to use, by header (or Parquet/Feather) name or 0-based "
                          "index (a name with a comma in double quotes: '\"a,b\",c')."),
        click.option("--dataset", default=None, metavar="/PATH",
                     help="HDF5 dataset (same as DATA given as file.h5:/PATH)."),
        click.option("--missing", type=click.Choice(_options.MISSING),
                     default=DEFAULTS["missing"],
                     show_default=True,
                     help="Rows with an empty cell or NaN: stop with an error, or drop them "
                          "(their label is printed as -1)."),
    ], f)


def cluster_options(f):
    """Where to run: one process (the default), a local Dask cluster or a running one (see
    ``distributed/``; Dask is imported only when one of these is given)."""
    return _apply([
        click.option("--cluster", type=WhereType("cluster"), default=None, metavar="local[:N]",
                     help="Run on a Dask LocalCluster of N worker processes on 127.0.0.1 "
                          "(needs kkmeans-cli[dask]; with --approx nystroem).  [default: one "
                          "process]"),
        click.option("--scheduler", type=WhereType("scheduler"), default=None,
                     metavar="tcp://HOST:PORT|FILE",
                     help="Run on a running Dask cluster: its scheduler's address or "
                          "scheduler file."),
        click.option("--worker-memory", type=SizeType(), default=None, metavar="SIZE",
                     help="Memory limit of each local worker (Dask's memory_limit)  "
                          "[default: RAM / N]"),
        click.option("--chunk-rows", type=Integer(min=1), default=None, metavar="INT",
                     help="Rows per chunk of a worker, rounded up to a multiple of 2048  "
                          "[default: about 64 MB of data]"),
    ], f)


def on_cluster(opts):
    """Whether the command runs on a Dask cluster (``--cluster`` or ``--scheduler``)."""
    return opts.get("cluster") is not None or opts.get("scheduler") is not None


def warn_unused_options(opts, reporter):
    """Warn about options given (as flags or in the config) where they do not apply, rather
    than ignore them silently: the Nyström sizes without --approx nystroem, the cluster's
    settings without a cluster (or --worker-memory with a running one), and the one-process
    settings on a cluster."""
    from ..io.config import origin_note

    cluster, local = on_cluster(opts), opts.get("cluster") is not None
    notes = []
    if opts.get("approx", "nystroem") != "nystroem":
        notes += [f"{flag} applies with --approx nystroem only; ignored"
                  for key, flag in (("landmarks", "--landmarks"), ("rank", "--rank"))
                  if opts.get(key) is not None]
    if opts.get("worker_memory") is not None and not local:
        notes.append("--worker-memory sets the memory of the workers of --cluster local[:N]"
                     + ("; the workers of a running cluster keep their own"
                        if opts.get("scheduler") else "") + "; ignored")
    if opts.get("chunk_rows") is not None and not cluster:
        notes.append("--chunk-rows applies on a cluster (--cluster or --scheduler) only; "
                     "ignored")
    if cluster and opts.get("memory_limit") is not None:
        notes.append("--memory-limit plans the memory of a run in one process; on a cluster "
                     "each worker has --worker-memory; ignored")
    graph = False                   # a sparse graph as DATA (--kernel precomputed)
    if opts.get("kernel") in _options.PRECOMPUTED_KERNELS:
        from ..io.graphs import is_graph_file

        graph = isinstance(opts.get("data"), str) and is_graph_file(opts["data"])
    if opts.get("kernel") in _options.GRAPH_KERNELS or graph:
        route = "a sparse graph as DATA" if graph else f"--kernel {opts['kernel']}"
        if opts.get("n_init", DEFAULT_N_INIT) != DEFAULT_N_INIT and opts.get("init") != \
                "spectral":
            notes.append(f"--n-init counts the starts of --init spectral; {route} starts "
                         f"from a fixed set of its own; ignored")
        if opts.get("tol", DEFAULTS["tol"]) != DEFAULTS["tol"]:
            notes.append(f"--tol applies to the dense kernels; {route} iterates until no "
                         f"point moves; ignored")
    if opts.get("kernel") in _options.PRECOMPUTED_KERNELS:
        # a sparse graph as DATA refuses --degree and --coef0 (model/params.py); --gamma is
        # ignored by every precomputed route
        matrix = "kernel" if opts["kernel"] == "precomputed" else "distance"
        notes += [f"{flag} is a setting of the kernels computed from the data; with --kernel "
                  f"{opts['kernel']} DATA is the {'graph' if graph else matrix + ' matrix'}; "
                  f"ignored"
                  for key, flag in (("gamma", "--gamma"), ("degree", "--degree"),
                                    ("coef0", "--coef0"))
                  if opts.get(key, DEFAULTS[key]) != DEFAULTS[key]
                  and (key == "gamma" or not graph)]
    given = [flag for flag, value in (("--header" if opts.get("header") else "--no-header",
                                       opts.get("header")),
                                      ("--delimiter", opts.get("delimiter")))
             if value is not None]
    if given and isinstance(opts.get("data"), str):
        from ..io.readers import binary_format

        kind = binary_format(opts["data"], opts.get("dataset"))
        if kind is not None:
            notes.append(f"{' and '.join(given)} appl{'y' if len(given) > 1 else 'ies'} to "
                         f"text DATA; {opts['data']} is not text ({kind}); ignored")
    if cluster and opts.get("threads") is not None:
        notes.append("--threads sets the threads of a run in one process; a cluster's workers "
                     "run one thread each; ignored")
    for note in notes:
        reporter.warn(note + origin_note(note))


def run_options(f):
    """``--config``, ``--quiet``, ``--force`` and ``--debug``."""
    return _apply([
        click.option("--config", default=None, metavar="YAML",
                     help="Run config; keys are long option names with _ (flags win)."),
        click.option("-q", "--quiet", is_flag=True, help="Print nothing on stderr but errors."),
        click.option("--force", is_flag=True,
                     help="Replace output files that are read-only (refused otherwise). "
                          "Outputs are always replaced whole, at the end; a link is followed "
                          "and kept; devices, FIFOs and /dev/stdout are written to directly."),
        click.option("--debug", is_flag=True, help="Show tracebacks of errors."),
    ], f)


def effective_options(ctx):
    """The command's options after merging defaults < ``--config`` < flags.

    Parameters
    ----------
    ctx : click.Context

    Returns
    -------
    dict
        Option name → value.
    """
    from ..io.config import apply_config, read_config

    path = ctx.params.get("config")
    if path:
        return apply_config(ctx, read_config(path), path)
    return dict(ctx.params)


def estimator_kwargs(opts, n_clusters, init):
    """Keyword arguments of ``KernelKMeans`` from the effective options.

    Parameters
    ----------
    opts : dict
        From :func:`effective_options` of a command with :func:`fit_options`.
    n_clusters : int
    init : str or ndarray
        ``'k-means++'``, ``'spectral'``, ``'random'`` or initial labels (already read from
        ``--init PATH``).
    """
    return dict(psd_repair=opts["psd_repair"], solver=opts["solver"],
                n_clusters=n_clusters, kernel=opts["kernel"], gamma=opts["gamma"],
                degree=opts["degree"], coef0=opts["coef0"], init=init, n_init=opts["n_init"],
                max_iter=opts["max_iter"], tol=opts["tol"], algorithm=opts["algorithm"],
                random_state=opts["seed"], dtype=opts["dtype"], n_threads=opts["threads"],
                objective=opts["objective"], refine=opts["refine"],
                approx=opts["approx"], n_landmarks=opts["landmarks"],
                nystroem_rank=opts.get("rank"),
                memory_limit=opts["memory_limit"], storage=opts["storage"],
                n_neighbors=opts.get("n_neighbors"),
                weighting=opts.get("weighting", DEFAULTS["weighting"]),
                neighbor_search=opts.get("neighbor_search", DEFAULTS["neighbor_search"]),
                whiten=whiten_setting(opts))


def whiten_setting(opts):
    """``whiten`` of ``KernelKMeans`` from the effective options: --whiten True, --no-whiten
    False, a config's ``auto`` 'auto', neither the default."""
    value = opts.get("whiten")
    return DEFAULTS["whiten"] if value is None else value


def require_matplotlib(path):
    """Fail early, before any work, when the plot's format is unknown or matplotlib is
    missing."""
    from .plotting import figure, plot_format

    plot_format(path)
    figure()


def check_graph_where(opts):
    """A graph kernel runs in one process: with --cluster/--scheduler a usage error that says
    so (before the cluster route's own checks, whose remedies do not apply to it)."""
    if opts["kernel"] in _options.GRAPH_KERNELS and on_cluster(opts):
        where = "--cluster" if opts.get("cluster") is not None else "--scheduler"
        raise UsageError(f"{where}: --kernel {opts['kernel']} (the normalized cut of a "
                         f"neighbour graph) runs in one process; a cluster runs --approx "
                         f"nystroem fits of the dense kernels (add --kernel rbf --approx "
                         f"nystroem, or drop {where})")


def check_option_combination(opts, k):
    """Options the estimator refuses together (e.g. --storage blocked with --psd-repair) are
    found before DATA is read: ``InvalidParameterError`` is a ``UsageError`` (exit 2)."""
    from ..model.estimator import KernelKMeans
    from ..model.params import validate_params

    check_graph_where(opts)
    if opts["kernel"] in _options.GRAPH_KERNELS and opts["init"] not in ("k-means++",
                                                                          "spectral"):
        raise UsageError(f"--init {opts['init']}: --kernel {opts['kernel']} starts from the "
                         f"graph's components, multilevel coarsening and a spectral embedding "
                         f"(--init spectral: spectral starts only); drop --init")
    validate_params(KernelKMeans(**estimator_kwargs(opts, k, "k-means++")))


def check_memory_plan(opts, n, ks, silhouette, blocked_silhouette=False, sweep=False):
    """Refuse (exit 1) before any large allocation when the command's fits (of the largest
    k), with the silhouette when asked, would need more than ``--memory-limit``: the plan of
    ``model/planning.py`` (``check_command_memory``), the one the estimator makes."""
    from ..model.planning import check_command_memory

    check_command_memory(estimator_kwargs(opts, max(ks), "k-means++"), n, ks, silhouette,
                         blocked_silhouette=blocked_silhouette, sweep=sweep)


def stored_options(opts):
    """The effective options as they go into the model's meta."""
    return {key: value for key, value in opts.items() if key not in ("debug", "quiet", "force")}
