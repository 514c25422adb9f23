"""The ``kkmeans`` command line: ``fit``, ``predict``, ``sweep``, ``info``.

A thin layer: parse options (flags over a YAML config over defaults), read data, call
:class:`~kkmeans_cli.estimator.KernelKMeans`, write outputs. Errors raised anywhere below are
turned into one line ``kkmeans: error: ...`` and an exit code in :func:`_report_error` only.
NumPy, h5py, rich and the engine are imported inside the commands so ``kkmeans --help`` is quick.

Adding a command that fits (e.g. ``sweep``): decorate it with :func:`fit_options`,
:func:`data_options` and :func:`run_options`, get the merged options with
:func:`effective_options`, the data with :func:`prepare_fit_data` and the estimator's keyword
arguments with :func:`estimator_kwargs`.
"""
import difflib
import errno
import math
import os
import sys
import time
import traceback

import click

from .._text import plural
from .. import _options
from .._options import DEFAULTS
from .._version import __version__
from ..errors import DataError, KKMeansError, UsageError

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
EXIT_INTERRUPTED = 130
INIT_CHOICES = _options.INITS
OBJECTIVE_CHOICES = _options.OBJECTIVES
REFINE_CHOICES = _options.REFINES


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


class SizeType(click.ParamType):
    """``--memory-limit``: bytes, or a size such as ``8G``, ``500M``, ``1.5GB``."""

    name = "size"

    def convert(self, value, param, ctx):
        from ..model.memory import parse_size

        try:
            return parse_size(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)

    def get_metavar(self, param, ctx=None):
        return "SIZE"


APPROX_CHOICES = _options.APPROXES


# -- shared option groups ------------------------------------------------------------------
def _apply(options, f):
    for option in reversed(options):
        f = option(f)
    return f


def fit_options(f):
    """The options of fitting a model (everything but k and the outputs), shared by the
    commands that fit."""
    return _apply([
        click.option("--kernel", type=click.Choice(KERNEL_CHOICES), default=DEFAULTS["kernel"],
                     show_default=True,
                     help="Kernel; 'precomputed': DATA is the n×n kernel matrix; "
                          "'precomputed-distance': DATA is the n×n dissimilarity matrix "
                          "(kernel by Gower double centering)."),
        click.option("--gamma", type=GammaType(), default=DEFAULTS["gamma"], show_default=True,
                     help="Kernel width. median: 1/(2·median squared pair distance); "
                          "scale: 1/(n_features·Var(X))."),
        click.option("--degree", type=click.IntRange(min=1), default=DEFAULTS["degree"],
                     show_default=True,
                     help="Degree of the poly kernel."),
        click.option("--coef0", type=float, default=DEFAULTS["coef0"], show_default=True,
                     help="Offset of the poly and sigmoid kernels."),
        click.option("--scale", type=click.Choice(SCALE_CHOICES), default=DEFAULTS["scale"],
                     show_default=True,
                     help="Feature scaling fitted on DATA, stored in the model."),
        click.option("--init", default=DEFAULTS["init"], show_default=True,
                     metavar="k-means++|spectral|random|PATH",
                     help="Starting centres, or a file with one initial label per row. "
                          "spectral: k-means on the leading eigenvectors of K. With "
                          "k-means++ and several restarts, restart 1 is spectral."),
        click.option("--n-init", type=click.IntRange(min=1), default=DEFAULT_N_INIT,
                     show_default=True, help="Restarts; the lowest inertia wins."),
        click.option("--max-iter", type=click.IntRange(min=1), default=DEFAULTS["max_iter"],
                     show_default=True,
                     help="Iterations per restart at most."),
        click.option("--tol", type=click.FloatRange(min=0), default=DEFAULTS["tol"],
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
        click.option("--seed", type=int, default=0, show_default=True,
                     help="Seed of all randomness (same seed, same labels)."),
        click.option("--dtype", type=click.Choice(DTYPE_CHOICES), default=DEFAULTS["dtype"],
                     show_default=True, help="Storage of the kernel matrix."),
        click.option("--threads", type=click.IntRange(min=1), default=None,
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
                          "(exact, slower per pass). auto: matrix, except a fit with one start "
                          "(--n-init 1) of 4096+ points on a positive semidefinite kernel: it "
                          "starts blocked and builds the matrix only if needed (same result)."),
        click.option("--landmarks", type=click.IntRange(min=1), default=None, metavar="INT",
                     help="Nyström landmarks m (seeded uniform sample of the rows)  "
                          "[default: min(n, max(300, 20·k), 1000)]"),
    ], f)


def data_options(f):
    """The options of reading DATA."""
    return _apply([
        click.option("--header/--no-header", default=None,
                     help="Whether text DATA starts with a header line  [default: detect: "
                          "a first line with no number in it]. Lines starting with # are "
                          "comments."),
        click.option("--delimiter", default=None, metavar="CHAR",
                     help="Field separator of text DATA ('tab', 'whitespace')  "
                          "[default: detect , tab ; or whitespace]"),
        click.option("--columns", default=None, metavar="A,B,...",
                     help="Columns to use, by header name or 0-based index."),
        click.option("--dataset", default=None, metavar="/PATH",
                     help="HDF5 dataset (same as DATA given as file.h5:/PATH)."),
        click.option("--missing", type=click.Choice(_options.MISSING),
                     default=DEFAULTS["missing"],
                     show_default=True,
                     help="Rows with an empty cell or NaN: stop with an error, or drop them "
                          "(their label is printed as -1)."),
    ], f)


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
                memory_limit=opts["memory_limit"], storage=opts["storage"])


def read_input(opts, spec):
    """DATA read with the data options."""
    from ..io.data import read_data

    return read_data(spec, header=opts["header"], delimiter=opts["delimiter"],
                     columns=opts["columns"], dataset=opts["dataset"],
                     missing=opts["missing"], stdin=sys.stdin,
                     announce=None if opts.get("quiet") else
                     lambda text: click.echo(f"kkmeans: {text}", err=True))


def prepare_fit_data(opts):
    """Read DATA, the weights and initial labels, and fit the scaling.

    Returns
    -------
    data : DataSet
    scaler : Scaler
    X : ndarray
        The scaled kept rows.
    weights : ndarray or None
    init : str or ndarray
    """
    import numpy as np

    from ..io.scaling import fit_scaler

    if opts["kernel"] in PRECOMPUTED_KERNELS and opts["scale"] != "none":
        raise UsageError(f"--scale cannot be used with --kernel {opts['kernel']} (DATA is an "
                         f"n×n matrix)")
    data = read_input(opts, opts["data"])
    weights = _per_row(opts["weights"], "--weights", "weights", data)
    if weights is not None:
        negative = np.flatnonzero(weights < 0)
        if negative.size:
            raise DataError(f"--weights {opts['weights']}: weight {negative[0] + 1} is negative "
                            f"({weights[negative[0]]:g}); sample weights must be >= 0")
        from ..model.estimator import weights_too_large

        problem = weights_too_large(weights)
        if problem:
            raise DataError(f"--weights {opts['weights']}: {problem}")
    init = opts["init"]
    if init_is_file(init):
        init = _per_row(init, "--init", "initial labels", data, integer=True)
        k = opts.get("n_clusters")
        outside = np.flatnonzero((init < 0) | (init >= (k or 0)))
        if k is not None and outside.size:
            raise DataError(f"--init {opts['init']}: label {init[outside[0]]} (value "
                            f"{outside[0] + 1}) is outside 0..{k - 1} (-k {k})")
    scaler = fit_scaler(data.X, opts["scale"])
    X = scaler.transform(data.X)
    total = data.X.shape[0] if weights is None else float(weights.sum())
    check_values(data, X, opts["kernel"], total, opts["scale"], objective=opts["objective"])
    return data, scaler, X, weights, init


def _check_distinct(data, X, k, weights, kernel, option="-k"):
    """Refuse (exit 1) a k above the number of distinct points of DATA, before any work."""
    from ..errors import TooFewDistinctPointsError
    from ..kernels.functions import count_distinct

    distinct = count_distinct(X, k, weights, kernel)
    if distinct < k:
        raise DataError(f"{data.source}: {TooFewDistinctPointsError(distinct, k)}; use a "
                        f"smaller {option}")


def check_values(data, X, kernel, total_weight, scale="none", resolved=None,
                 objective="kmeans"):
    """Refuse (exit 1) data whose kernel cannot be computed in floating point, before any
    work: non-finite values after ``--scale``, and the rule of ``kernels.check_range`` (the
    message states it), with the row of DATA (1-based, header not counted) and its column."""
    import numpy as np

    from ..errors import ValueRangeError
    from ..kernels.functions import check_range, data_offset

    rows = np.flatnonzero(data.kept)

    def where(r, c):
        name = data.columns[c] if data.columns else str(c + 1)
        return f"{data.source}: row {int(rows[r]) + 1}, column {name}"

    finite = np.isfinite(X)
    if not finite.all():
        r, c = np.argwhere(~finite)[0]
        raise DataError(f"{where(r, c)}: the value {data.X[r, c]:g} is {X[r, c]} after "
                        f"--scale {scale} (the scaling overflows floating point)")
    try:
        offset = (resolved.offset if resolved is not None else
                  None if kernel in PRECOMPUTED_KERNELS else
                  data_offset(kernel, X, objective, quiet=True))
        check_range(kernel, X, total_weight, kernel=resolved, offset=offset)
    except ValueRangeError as exc:
        raise DataError(f"{where(exc.row, exc.column)}: {exc.detail}") from None


def _per_row(path, option, what, data, integer=False):
    """One value per row of DATA from ``path`` (given as ``option``), keeping the rows DATA
    kept; every error names the option and the file."""
    from ..io.data import read_vector

    if path is None:
        return None
    if path == "-" and data.source == "<stdin>":
        raise UsageError(f"DATA is read from standard input, so the {what} cannot be too; "
                         f"give the {what} as a file")
    try:
        values = read_vector(path, what, integer=integer)
    except DataError as exc:
        raise DataError(f"{option} {exc}") from None
    if values.shape[0] != data.n_rows:
        raise DataError(f"{option} {path}: has {plural(values.shape[0], what[:-1], what)}, "
                        f"{data.source} has {plural(data.n_rows, 'row')}")
    return values[data.kept]


def init_is_file(value):
    """Whether ``--init VALUE`` names a file of initial labels (else it is a start method).

    Raises
    ------
    UsageError
        VALUE is neither a method nor an existing file and does not look like a path (no
        folder, no extension) or is close to a method name: ``--init kmeans++``.
    DataError
        VALUE looks like a path to a file that does not exist.
    """
    if value in INIT_CHOICES:
        return False
    from ..io.data import split_hdf5_spec

    if os.path.exists(split_hdf5_spec(value)[0]):  # file.h5:/labels names an HDF5 file
        return True
    close = difflib.get_close_matches(value.lower(), INIT_CHOICES, n=1, cutoff=0.6)
    if close or not (os.sep in value or os.path.splitext(value)[1]):
        hint = f"; did you mean --init {close[0]}?" if close else ""
        raise UsageError(f"--init {value}: not a start method ({', '.join(INIT_CHOICES)}) "
                         f"and no such file{hint}")
    raise DataError(f"--init {value}: no such file")


# -- the command group and its error handling ----------------------------------------------
class KKMeansGroup(click.Group):
    """The ``kkmeans`` group: maps every error to one line on stderr and an exit code."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True,
             **extra):
        # ``prog_name`` is always kkmeans (CliRunner would pass the function's name).
        argv = sys.argv[1:] if args is None else list(args)
        try:
            rv = super().main(argv, "kkmeans", complete_var,
                              standalone_mode=False, **extra)
            code = rv if isinstance(rv, int) else 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException as exc:  # noqa: BLE001 -- the one place errors become exit codes
            code = _report_error(exc, debug=_debug_wanted(argv))
        if standalone_mode:
            sys.exit(code)
        return code

    def parse_args(self, ctx, args):
        # Bare ``kkmeans``: the usage and the commands on stderr, exit 2 (as git and pip do).
        if not args and not ctx.resilient_parsing:
            formatter = ctx.make_formatter()
            self.format_usage(ctx, formatter)
            self.format_commands(ctx, formatter)
            formatter.write_paragraph()
            formatter.write_text("Run 'kkmeans COMMAND --help' for the options of a command, "
                                 "'kkmeans --help' for more.")
            click.echo(formatter.getvalue().rstrip("\n"), err=True)
            ctx.exit(2)
        return super().parse_args(ctx, args)


def _debug_wanted(argv):
    return "--debug" in argv or os.environ.get("KKMEANS_DEBUG", "") not in ("", "0")


def _report_error(exc, debug):
    """Print ``kkmeans: error: ...`` (and the traceback when debugging); return the exit code."""
    if isinstance(exc, (click.exceptions.Abort, KeyboardInterrupt)):
        click.echo("kkmeans: interrupted", err=True)
        return EXIT_INTERRUPTED
    if debug:
        traceback.print_exception(exc)
    if isinstance(exc, click.UsageError):
        message, code = exc.format_message(), 2
        if exc.ctx is not None:
            message += f" (see '{exc.ctx.command_path} --help')"
    elif isinstance(exc, click.ClickException):
        message, code = exc.format_message(), exc.exit_code
    elif isinstance(exc, KKMeansError):
        from .report import cli_wording

        message, code = cli_wording(str(exc)), exc.exit_code
    elif isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EIO, errno.EDQUOT,
                                                    errno.EFBIG):
        message, code = f"cannot write the output: {exc.strerror}", 1  # e.g. a full disk
    elif isinstance(exc, MemoryError):
        message, code = ("not enough memory (try --dtype float32, --approx nystroem or fewer "
                         "rows)"), 1
    else:
        message, code = f"unexpected {type(exc).__name__}: {exc}", 1
        if not debug:
            message += " (run again with --debug for the traceback)"
    message = " ".join(message.split())
    click.echo(f"kkmeans: error: {message}", err=True)
    return code


def _print_version(ctx, value):
    """``kkmeans --version``: the version, and whether the engine runs threads (OpenMP)."""
    if not value or ctx.resilient_parsing:
        return
    click.echo(f"kkmeans {__version__}\n{engine_description()}")
    ctx.exit()


def engine_description():
    """``engine: OpenMP, 2 threads by default`` or that it was built without OpenMP."""
    from ..engine import _openmp

    if not _openmp.openmp_enabled():
        return "engine: built without OpenMP (serial: 1 thread, same results)"
    n = max(1, _openmp.max_threads() or os.cpu_count() or 1)
    return (f"engine: built with OpenMP, {n} thread{'' if n == 1 else 's'} by default "
            f"(--threads or OMP_NUM_THREADS to change)")


CLI_EPILOG = """\b
Shell completion of commands, options and choices (add the line to the shell start-up file):
  bash:  eval "$(_KKMEANS_COMPLETE=bash_source kkmeans)"      (~/.bashrc)
  zsh:   eval "$(_KKMEANS_COMPLETE=zsh_source kkmeans)"       (~/.zshrc)
  fish:  _KKMEANS_COMPLETE=fish_source kkmeans | source       (~/.config/fish/config.fish)
"""


@click.group(cls=KKMeansGroup, epilog=CLI_EPILOG,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("-V", "--version", is_flag=True, expose_value=False, is_eager=True,
              callback=lambda ctx, param, value: _print_version(ctx, value),
              help="Show the version and how the engine was built, and exit.")
def cli():
    """Kernel k-means clustering.

    \b
    Examples:
      kkmeans fit examples/moons.csv -k 2 > labels.txt
      kkmeans fit data.csv -k 5 --kernel rbf --gamma median -o model.npz
      kkmeans fit data.h5:/features -k 3 --config configs/rbf.yaml --summary run.json
      kkmeans predict model.npz new.csv | sort | uniq -c
      kkmeans sweep data.csv --k 2..10 -o best.npz > sweep.csv
      kkmeans info model.npz --json

    DATA is delimited text (.csv, .tsv, .txt), .npy, HDF5 (file.h5:/dataset) or - for CSV on
    stdin. Labels and tables go to stdout, reports to stderr. Exit codes: 0 ok, 1 data or
    runtime error, 2 usage error, 130 interrupted.
    """


FIT_EPILOG = """\b
Examples:
  kkmeans fit examples/moons.csv -k 2
  kkmeans fit data.csv -k 5 --kernel rbf > labels.txt
  cat data.csv | kkmeans fit - -k 3 --no-model --quiet
  kkmeans fit data.csv --config configs/rbf.yaml -k 4 --summary run.json
  kkmeans fit data.tsv -k 3 --columns x,y --scale standard --missing drop
  kkmeans fit examples/blobs.csv -k 4 --silhouette --plot clusters.png
  kkmeans fit examples/blobs.csv -k 4 --no-model --with-data > labelled.csv
"""


@cli.command(epilog=FIT_EPILOG)
@click.argument("data")
@click.option("-k", "--n-clusters", type=click.IntRange(min=1), default=None,
              help="Number of clusters, 1 ≤ k ≤ rows (required).")
@fit_options
@click.option("-o", "--model", default="model.npz", show_default=True, metavar="PATH",
              help="Where the model goes.")
@click.option("--no-model", is_flag=True, help="Do not save a model.")
@click.option("--labels", default="-", show_default=True, metavar="PATH",
              help="Where the labels go, one per row of DATA (- is stdout).")
@click.option("--summary", default=None, metavar="PATH", help="Also write a JSON summary.")
@click.option("--with-data", is_flag=True,
              help="Write each row of DATA followed by its label, as CSV (the columns used; "
                   "a header line, when DATA has one, ends in 'label').")
@click.option("--json", is_flag=True, help="Print the JSON summary on stdout instead of labels.")
@click.option("--silhouette", is_flag=True,
              help="Also compute the feature-space silhouette (exact up to 20,000 rows, else "
                   "on a stratified sample of 10,000, reported).")
@click.option("--plot", default=None, metavar="PATH",
              help="Draw the points coloured by cluster (first two principal axes when there "
                   "are more than two features) as .png, .pdf or .svg by PATH's extension; "
                   "needs matplotlib.")
@data_options
@run_options
@click.pass_context
def fit(ctx, **_):
    """Cluster DATA into k clusters; print one label per row and save the model."""
    opts = effective_options(ctx)
    if opts["n_clusters"] is None:
        raise UsageError("missing option -k/--n-clusters (or n_clusters in --config) "
                         "(see 'kkmeans fit --help')")
    from ..io.data import AtomicOutputs, check_outputs, format_json
    from ..model.estimator import KernelKMeans
    from ..model.model_file import model_meta, save_model
    from .report import Reporter, fit_report, fit_summary, silhouette_text

    _check_option_combination(opts, opts["n_clusters"])
    init_is_file(opts["init"])
    model_path = None if opts["no_model"] else opts["model"]
    if opts["json"] and opts["with_data"]:
        raise UsageError("--json prints the summary instead of the labels; --with-data "
                         "cannot be used with it (write the summary with --summary PATH)")
    if opts["plot"] is not None and opts["kernel"] in PRECOMPUTED_KERNELS:
        raise UsageError("--plot draws the data points, but with --kernel precomputed DATA is "
                         "a kernel matrix, not points; drop --plot (or fit the original data "
                         "with its kernel)")
    outputs = [(model_path, "model", "-o/--model"), (opts["summary"], "summary", "--summary"),
               (opts["plot"], "plot", "--plot")]
    if opts["json"]:
        outputs.append(("-", "JSON summary", "--json"))
    if not (opts["json"] and opts["labels"] == "-"):
        outputs.append((opts["labels"], "labels", "--labels"))
    check_outputs(outputs, opts["force"], _inputs(opts))
    if opts["plot"] is not None:
        _require_matplotlib(opts["plot"])
    reporter = Reporter(opts["quiet"])
    data, scaler, X, weights, init = prepare_fit_data(opts)
    k = opts["n_clusters"]
    if k > X.shape[0]:
        raise DataError(f"{data.source}: k = {k} is larger than the number of rows "
                        f"({X.shape[0]}); use a smaller -k")
    _check_distinct(data, X, k, weights, opts["kernel"])
    estimator = KernelKMeans(**estimator_kwargs(opts, k, init))
    # With --silhouette the kernel matrix is built once, for the fit and the score, when the
    # fit holds it anyway; a fit that starts blocked (--storage blocked, or auto with one
    # start) leaves the silhouette to kernel rows recomputed in blocks.
    share_K = (opts["silhouette"] and estimator.approx != "nystroem"
               and not estimator.starts_blocked(*X.shape))
    _check_memory_plan(opts, X.shape[0], [k], "silhouette" if opts["silhouette"] else None,
                       blocked_silhouette=opts["silhouette"] and not share_K)
    with reporter.engine_warnings(), \
            reporter.progress(f"fitting k = {k} on {data.source}") as update:
        estimator.progress_callback = lambda done, total: update(done, total,
                                                                 "Nyström features, rows")
        try:
            t0 = time.perf_counter()
            K = estimator.kernel_matrix(X) if share_K else None
            built = time.perf_counter() - t0
            estimator.fit(X, sample_weight=weights, kernel_matrix=K)
            if K is not None:  # its time, not the 0 s of a fit given K
                estimator.fit_stats_["kernel_seconds"] += built
        except UsageError:
            raise  # options that cannot work on this data (exit 2)
        except ValueError as exc:
            raise DataError(f"{data.source}: {exc}") from exc
    summary = fit_summary(estimator, data, model_path)
    extra = {"source": data.source, "columns": data.columns}
    report = fit_report(estimator, data, scaler, model_path)
    if opts["silhouette"]:
        score = _fit_silhouette(estimator, X, K, opts, reporter, data.source)
        found = {"silhouette": None if score is None else float(score.score),
                 "silhouette_n_used": None if score is None else int(score.n_used),
                 "silhouette_exact": None if score is None else bool(score.exact)}
        summary.update(found)
        extra.update(found)
        report.insert(-2, ("silhouette", "undefined (fewer than 2 clusters)" if score is None
                           else silhouette_text(score, X.shape[0])))
    if opts["plot"] is not None:
        report.insert(-1, ("plot", opts["plot"]))
    with AtomicOutputs(opts["force"]) as out:
        if model_path is not None:
            meta = model_meta(estimator, scaler, _stored_options(opts), extra)
            save_model(out.open(model_path, "model"), estimator, scaler, meta)
        if opts["plot"] is not None:
            from .plotting import plot_clusters, plot_format

            plot_clusters(data.X, estimator.labels_, out.open(opts["plot"], "plot"),
                          title=f"{data.source}: k = {k}, {estimator.kernel_.describe()}",
                          fmt=plot_format(opts["plot"]))
        if opts["labels"] != "-":
            out.open(opts["labels"], "labels").write(
                _labels_text(opts, estimator.labels_, data).encode())
        if opts["summary"]:
            out.open(opts["summary"], "summary").write(format_json(summary).encode())
    reporter.table("kkmeans fit", report)
    if opts["json"]:
        click.echo(format_json(summary), nl=False)
    elif opts["labels"] == "-":
        click.echo(_labels_text(opts, estimator.labels_, data), nl=False)


def _labels_text(opts, labels, data):
    """What goes where the labels go: one label per row of DATA (-1 for a dropped row), or
    with ``--with-data`` each row's values and then its label, as CSV."""
    from ..io.data import format_labels

    if not opts.get("with_data"):
        return format_labels(labels, data.kept)
    return format_data_with_labels(data, labels)


def format_data_with_labels(data, labels):
    """CSV of DATA's rows (the columns used, values as read) each followed by its label.

    A header line, when DATA has one, names the columns and then ``label``. A row dropped by
    ``--missing drop`` keeps its place with empty cells and the label -1. Numbers are written
    in the shortest form that reads back to the same float64 (``3`` for 3.0).
    """
    import csv
    import io

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    if data.columns is not None:
        writer.writerow([*data.columns, "label"])
    labels = iter(int(v) for v in labels)
    rows = iter(data.X.tolist())
    empty = [""] * data.X.shape[1]
    for kept in data.kept.tolist():
        if kept:
            writer.writerow([*map(_number_text, next(rows)), next(labels)])
        else:
            writer.writerow([*empty, -1])
    return out.getvalue()


def _number_text(value):
    text = repr(value)
    return text[:-2] if text.endswith(".0") else text


def _inputs(opts):
    """The files a command reads, (path, option) for :func:`check_outputs`."""
    init = opts.get("init")
    return [(opts["data"], "DATA"), (opts.get("weights"), "--weights"),
            (init if init not in INIT_CHOICES else None, "--init"),
            (opts.get("config"), "--config")]


def _require_matplotlib(path):
    """Fail early, before any work, when the plot's format is unknown or matplotlib is
    missing."""
    from .plotting import figure, plot_format

    plot_format(path)
    figure()


def _fit_silhouette(estimator, X, K, opts, reporter, source):
    """The silhouette of a fitted estimator on its kernel matrix K (exact, or sampled for large
    n); None when it is undefined (fewer than two non-empty clusters)."""
    from ..measures.metrics import silhouette_score

    if len(set(estimator.labels_.tolist())) < 2:
        reporter.warn("the silhouette is undefined for fewer than 2 clusters; not computed")
        return None
    seed = opts["seed"]
    if getattr(estimator, "approx", "none") == "nystroem":
        from ..kernels.nystroem import fit_silhouette

        with reporter.engine_warnings(), reporter.progress("computing the silhouette"):
            return fit_silhouette(estimator, X, random_state=seed, n_threads=opts["threads"])
    with reporter.engine_warnings(), reporter.progress("computing the silhouette"):
        try:
            # Without K (--storage blocked) the kernel rows are recomputed in blocks from X.
            return silhouette_score(estimator.labels_, K=K, X=None if K is not None else X,
                                    kernel=estimator.kernel_, random_state=seed,
                                    n_threads=opts["threads"])
        except ValueError as exc:
            raise DataError(f"{source}: silhouette: {exc}") from exc


def _check_option_combination(opts, k):
    """Options the estimator refuses together (e.g. --storage blocked with --psd-repair) are
    found before DATA is read: ``InvalidParameterError`` is a ``UsageError`` (exit 2)."""
    from ..model.estimator import KernelKMeans
    from ..model.params import validate_params

    validate_params(KernelKMeans(**estimator_kwargs(opts, k, "k-means++")))


def _check_memory_plan(opts, n, ks, silhouette, blocked_silhouette=False, sweep=False):
    """Refuse (exit 1) before any large allocation when the fit of the largest k, with the
    silhouette when asked, would need more than ``--memory-limit`` (see ``memory.py``).

    ``blocked_silhouette``: the silhouette runs after the fit on kernel rows recomputed in
    blocks (the fit does not share its kernel matrix with it): the plan is the larger of the
    fit's and the silhouette's. ``sweep``: the refusal suggests only what sweep accepts (not
    --storage blocked)."""
    from ..model.memory import check, plan

    kw = dict(k=max(ks), dtype=opts["dtype"], approx=opts["approx"],
              n_landmarks=opts["landmarks"], silhouette=silhouette, storage=opts["storage"],
              offer_blocked=not sweep, silhouette_after=blocked_silhouette)
    if opts["kernel"] == "precomputed":  # DATA is K (a distance matrix becomes a new K)
        kw["kernel_given"] = opts["dtype"] == "float64"
    check(plan(n, **kw), opts["memory_limit"], **kw)


def _stored_options(opts):
    """The effective options as they go into the model's meta."""
    return {key: value for key, value in opts.items() if key not in ("debug", "quiet", "force")}


PREDICT_EPILOG = """\b
Examples:
  kkmeans predict model.npz new.csv | sort | uniq -c
  kkmeans predict model.npz new.npy --labels new-labels.txt --distances dist.csv
  kkmeans predict model.npz new.csv --with-data > new-labelled.csv
"""


@cli.command(epilog=PREDICT_EPILOG)
@click.argument("model_path", metavar="MODEL")
@click.argument("data")
@click.option("--labels", default="-", show_default=True, metavar="PATH",
              help="Where the labels go (- is stdout).")
@click.option("--distances", default=None, metavar="PATH",
              help="Write the n×k squared feature-space distances (.npy, else CSV).")
@click.option("--with-data", is_flag=True,
              help="Write each row of DATA followed by its label, as CSV (the columns used; "
                   "a header line, when DATA has one, ends in 'label').")
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="OpenMP and BLAS threads  [default: all cores]")
@data_options
@run_options
@click.pass_context
def predict(ctx, **_):
    """Label each row of DATA with the nearest cluster of MODEL.

    DATA needs the model's features; the model's scaling is applied. For a precomputed model
    DATA holds the kernel rows K(new, train), one column per training point; for a
    precomputed-distance model the distance rows D(new, train). A --psd-repair of the model is
    applied to these rows as it was to the training matrix.
    """
    opts = effective_options(ctx)
    import numpy as np

    from ..io.data import AtomicOutputs, check_outputs, write_matrix
    from ..model.model_file import load_model
    from .report import Reporter

    check_outputs([(opts["labels"], "labels", "--labels"),
                   (opts["distances"], "distances", "--distances")], opts["force"],
                  [(opts["model_path"], "MODEL")] + _inputs(opts))
    reporter = Reporter(opts["quiet"])
    loaded = load_model(opts["model_path"])
    data = read_input(opts, opts["data"])
    expected = loaded.meta["n_features"]
    if data.X.shape[1] != expected:
        what = {"precomputed": "kernel columns", "precomputed-distance": "distance columns"
                }.get(loaded.meta["kernel"], "features")
        raise DataError(f"{data.source}: has {plural(data.X.shape[1], 'column')}, the model "
                        f"{opts['model_path']} expects {expected} {what}"
                        + ("; pick them with --columns" if data.X.shape[1] > expected else ""))
    estimator = loaded.estimator
    estimator.n_threads = opts["threads"]
    X = loaded.scaler.transform(data.X)
    check_values(data, X, estimator.kernel, max(len(estimator.labels_),
                                                float(np.sum(estimator.sample_weight_))),
                 loaded.meta.get("scale", "none"), resolved=estimator.kernel_)
    with reporter.engine_warnings(), reporter.progress(f"predicting {data.source}"):
        try:
            labels = estimator.predict(X)
            dist = estimator.transform(X) if opts["distances"] else None
        except ValueError as exc:
            raise DataError(f"{data.source}: {exc}") from exc
    with AtomicOutputs(opts["force"]) as out:
        if opts["labels"] != "-":
            out.open(opts["labels"], "labels").write(_labels_text(opts, labels, data).encode())
        if dist is not None:
            full = np.full((data.n_rows, dist.shape[1]), np.nan)
            full[data.kept] = dist
            write_matrix(out.open(opts["distances"], "distances"), opts["distances"], full)
    sizes = np.bincount(labels, minlength=estimator.n_clusters)
    reporter.table("kkmeans predict", [
        ("data", f"{data.source}: {plural(data.X.shape[0], 'row')}"
                 + (f" ({data.n_dropped} dropped)" if data.n_dropped else "")),
        ("model", f"{opts['model_path']}: {estimator.kernel_.describe()}, "
                  f"k = {estimator.n_clusters}"),
        ("cluster sizes", ", ".join(str(int(s)) for s in sizes)),
    ])
    if opts["labels"] == "-":
        click.echo(_labels_text(opts, labels, data), nl=False)


SWEEP_METRICS = ("silhouette", "simplified-silhouette", "calinski-harabasz", "davies-bouldin",
                 "inertia")

SWEEP_EPILOG = """\b
The chosen k is the largest silhouette, simplified silhouette or Calinski-Harabasz, the
smallest Davies-Bouldin, or the elbow of the inertia curve. Ties go to the smaller k.
No model is saved unless -o PATH is given. Labels are not printed; fit the chosen k with
'kkmeans fit' for those (same options, same labels).
\b
Examples:
  kkmeans sweep examples/blobs.csv --k 2..6
  kkmeans sweep data.h5:/features --k 2..12 -o best.npz > sweep.csv
  kkmeans sweep data.csv --k 2,3,5,8 --metric davies-bouldin --table sweep.csv --plot sweep.png
  kkmeans sweep data.csv --config configs/rbf.yaml --k 2..10 --quiet
"""


@cli.command("sweep", epilog=SWEEP_EPILOG)
@click.argument("data")
@click.option("--k", "k", default=None, metavar="2..10|2,3,5",
              help="The ks to try: a range lo..hi (inclusive), a list, or both (2..4,8); "
                   "each 2 ≤ k < rows (required).")
@click.option("--metric", type=click.Choice(SWEEP_METRICS), default="silhouette",
              show_default=True, help="The measure that chooses k.")
@fit_options
@click.option("-o", "--model", default=None, metavar="PATH",
              help="Save the chosen k's model here  [default: no model]")
@click.option("--table", default="-", show_default=True, metavar="PATH",
              help="Where the CSV table goes (- is stdout).")
@click.option("--plot", default=None, metavar="PATH",
              help="Draw every measure against k as .png, .pdf or .svg by PATH's extension "
                   "(needs matplotlib).")
@data_options
@run_options
@click.pass_context
def sweep_command(ctx, **_):
    """Fit every k of --k over one kernel matrix, score each, choose the best k.

    Writes one CSV row per k to stdout (k,inertia,silhouette,simplified_silhouette,
    calinski_harabasz,davies_bouldin,n_iter,seconds) and reports the table, with the chosen k
    marked, on stderr.
    """
    opts = effective_options(ctx)
    if opts["k"] is None:
        raise UsageError("missing option --k (e.g. --k 2..10 or --k 2,3,5; or k in --config) "
                         "(see 'kkmeans sweep --help')")
    from ..measures.sweep import parse_k_ranges, parse_ks

    try:
        k_ranges = parse_k_ranges(opts["k"])  # expanded once checked against the rows
    except ValueError as exc:
        raise UsageError(f"--k {opts['k']}: {exc}") from None
    if min(lo for lo, _ in k_ranges) < 2:
        raise UsageError(f"--k {opts['k']}: every k must be at least 2 (the measures compare "
                         f"clusters)")
    if init_is_file(opts["init"]):
        raise UsageError("--init PATH fixes the number of clusters and cannot be used with "
                         "sweep; use --init k-means++, spectral or random")
    if opts["storage"] == "blocked":
        raise UsageError("sweep fits every k on one kernel matrix; --storage blocked has none. "
                         "For data too large for the matrix use --approx nystroem (or run "
                         "'kkmeans fit --storage blocked --silhouette' per k)")
    _check_option_combination(opts, min(lo for lo, _ in k_ranges))
    metric = opts["metric"].replace("-", "_")

    from ..io.data import AtomicOutputs, check_outputs
    from ..model.model_file import model_meta, save_model
    from .report import Reporter
    from ..measures.sweep import sweep, to_csv

    check_outputs([(opts["model"], "model", "-o/--model"), (opts["table"], "table", "--table"),
                   (opts["plot"], "plot", "--plot")], opts["force"], _inputs(opts))
    if opts["plot"] is not None:
        _require_matplotlib(opts["plot"])
    reporter = Reporter(opts["quiet"])
    data, scaler, X, weights, _ = prepare_fit_data(opts)
    n = X.shape[0]
    top = max(hi for _, hi in k_ranges)
    if top > n - 1:
        raise DataError(f"{data.source}: k = {top} is too large for {plural(n, 'row')} (a sweep "
                        f"needs k ≤ rows − 1 = {n - 1}); use a smaller --k")
    ks = parse_ks(opts["k"], max_k=n - 1)
    _check_distinct(data, X, ks[0], weights, opts["kernel"], "--k")  # others: skipped by sweep
    _check_memory_plan(opts, n, ks, "from-kernel", sweep=True)
    params = estimator_kwargs(opts, ks[0], opts["init"])
    del params["n_clusters"]
    with reporter.engine_warnings(), \
            reporter.progress_bar(len(ks), f"sweeping k on {data.source}") as advance:
        try:
            result = sweep(X, ks, metric=metric, sample_weight=weights, progress=advance,
                           **params)
        except UsageError:
            raise  # options that cannot work on this data (exit 2)
        except ValueError as exc:
            raise DataError(f"{data.source}: {exc}") from exc
    best = result.best_estimator
    text = to_csv(result.rows)
    with AtomicOutputs(opts["force"]) as out:
        if opts["model"] is not None:
            stored = dict(_stored_options(opts), n_clusters=result.best_k)
            best_row = result.best_row
            extra = {"source": data.source, "columns": data.columns,
                     "silhouette": float(best_row["silhouette"]),
                     "silhouette_n_used": int(result.silhouette_n_used[
                         result.rows.index(best_row)]),
                     "silhouette_exact": result.silhouette_n_used[
                         result.rows.index(best_row)] == n,
                     "sweep": {"ks": ks, "metric": metric, "best_k": result.best_k}}
            save_model(out.open(opts["model"], "model"), best,
                       scaler, model_meta(best, scaler, stored, extra))
        if opts["table"] != "-":
            out.open(opts["table"], "table").write(text.encode())
        if opts["plot"] is not None:
            from .plotting import plot_format, plot_sweep

            plot_sweep(result.rows, metric, result.best_k, out.open(opts["plot"], "plot"),
                       fmt=plot_format(opts["plot"]))
    reporter.sweep_table(result.rows, metric, result.best_k)
    used = result.silhouette_n_used
    sampled = [u for u in used if u < n]
    rows = [
        ("data", f"{data.source}: {plural(n, 'sample')} × {plural(X.shape[1], 'feature')}"
                 + (f" ({plural(data.n_dropped, 'row')} with missing values dropped)"
                    if data.n_dropped else "")),
        ("kernel", best.kernel_.describe()),
        ("chosen k", f"{result.best_k} by {opts['metric']}"
                     f"{' (elbow)' if metric == 'inertia' else ''} = "
                     f"{result.best_row[metric]:.6g}"),
        ("silhouette", "exact (all points)" if not sampled else
         f"on a stratified sample of {max(sampled)} of {n} points"),
        ("model", opts["model"] or "not saved (give -o PATH)"),
    ]
    if opts["table"] != "-":
        rows.append(("table", opts["table"]))
    if opts["plot"] is not None:
        rows.append(("plot", opts["plot"]))
    rows.append(("time", f"kernel matrix {result.kernel_seconds:.3f} s (once), fits and "
                         f"measures {sum(r['seconds'] for r in result.rows):.3f} s "
                         f"({plural(len(result.rows), 'k')})"))
    reporter.table("kkmeans sweep", rows)
    if opts["table"] == "-":
        click.echo(text, nl=False)


@cli.command(epilog="\b\nExamples:\n  kkmeans info model.npz\n  kkmeans info model.npz --json")
@click.argument("model_path", metavar="MODEL")
@click.option("--json", is_flag=True, help="Print JSON.")
@click.option("--debug", is_flag=True, help="Show tracebacks of errors.")
def info(model_path, json, debug):
    """Print the metadata of a model file: format, kernel, k, n, d, sizes, how it was fitted."""
    from ..io.data import format_json
    from ..model.model_file import load_model
    from .report import format_rows, model_info, model_info_rows

    details = model_info(model_path, load_model(model_path))
    if json:
        click.echo(format_json(details), nl=False)
    else:
        click.echo(format_rows(model_info_rows(details)), nl=False)


def main():
    """Entry point of the ``kkmeans`` console script."""
    cli(prog_name="kkmeans")
