"""The errors kkmeans raises where a problem is found; the CLI maps them to exit codes.

``KKMeansError`` is the root. Data and runtime problems (exit code 1) derive from ``DataError``
or ``ModelFileError``; usage problems (exit code 2) from ``UsageError``. Bad parameters given to
the Python API raise ``ValueError`` subclasses, as scikit-learn does.
"""


# The exit codes of the command line (docs/cli.md), by name.
EXIT_OK = 0
EXIT_ERROR = 1          # data, files, models, memory: what the user gave cannot be used
EXIT_USAGE = 2          # options: what the user asked for cannot be done
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT, as shells report it); SIGTERM 143, SIGHUP 129
EXIT_BROKEN_PIPE = 141  # the reader of an output pipe went away (128 + SIGPIPE), said nothing


class KKMeansError(Exception):
    """Base class of every error kkmeans reports."""

    exit_code = EXIT_ERROR


class DataError(KKMeansError, ValueError):
    """The input data is missing, unreadable or not valid (file, row, column in the message)."""


class WeightsError(DataError):
    """Sample weights that cannot be used. ``problem`` says which: 'negative' (a weight
    negative or not finite: ``index`` and ``value`` say which one), 'too few' (fewer positive
    weights than clusters), 'all zero', 'scale' (the sum is too large or too small for
    floating point: ``detail`` says why), 'unequal' (a graph fit takes equal weights only:
    ``detail``). The message is the Python API's wording; the
    command line words the same problem with its option and file."""

    def __init__(self, problem, message, *, index=None, value=None, detail=None):
        super().__init__(message)
        self.problem, self.index, self.value, self.detail = problem, index, value, detail


class NoRowLeft(DataError):
    """``--missing drop`` dropped every row of DATA: nothing to fit, but ``predict`` gives
    each row the label -1 (``data``: the empty ``DataSet``, its ``kept`` all False);
    ``empty_columns``: the message names columns with no value on any row."""

    def __init__(self, message, data, empty_columns=False):
        super().__init__(message)
        self.data, self.empty_columns = data, empty_columns

    def __reduce__(self):
        return type(self), (str(self), self.data, self.empty_columns)


class ModelFileError(KKMeansError, ValueError):
    """A model file is missing, corrupt, unsafe or of an unsupported version."""


class MemoryPlanError(KKMeansError, MemoryError):
    """The planned allocation exceeds the memory limit."""


class OutputError(KKMeansError, OSError):
    """An output file cannot be written."""


class BrokenPipeOutput(OutputError):
    """The reader of an output pipe (stdout, a FIFO) went away before it had everything: the
    command ends as a Unix program that SIGPIPE ends, without a message (exit code 141), and
    commits no output file (docs/cli.md)."""

    exit_code = EXIT_BROKEN_PIPE


class UsageError(KKMeansError, ValueError):
    """An option or parameter value is not valid (exit code 2)."""

    exit_code = EXIT_USAGE


class ColumnNotFound(UsageError):
    """``--columns`` names a column that DATA (``source``) lacks; ``names`` are DATA's
    columns (``predict`` words it as a column of the model that DATA lacks)."""

    def __init__(self, message, source, names):
        super().__init__(message)
        self.source, self.names = source, list(names)

    def __reduce__(self):   # sent back from a cluster's worker
        return type(self), (str(self), self.source, self.names)


class AmbiguousColumn(UsageError):
    """``--columns`` names a column by a name that DATA's header (``source``) gives more than
    one column, at the 0-based ``places``: only an index says which (``predict`` words it as a
    column of the model that DATA names twice)."""

    def __init__(self, message, source, name, places):
        super().__init__(message)
        self.source, self.name, self.places = source, name, list(places)

    def __reduce__(self):   # sent back from a cluster's worker
        return type(self), (str(self), self.source, self.name, self.places)


class ConfigError(UsageError):
    """A YAML run config is not valid YAML, has an unknown key or a value of the wrong type."""


class OptionConflictError(UsageError):
    """Options that cannot work together, found out only once the data is seen (Elkan on a
    kernel matrix that turns out not to be positive semidefinite, the normalized cut on a
    kernel with a non-positive degree). A ``ValueError`` for the Python API; on the command
    line a usage error (exit code 2), since the remedy is a different option."""


class KKMeansWarning(UserWarning):
    """A warning from kkmeans (relocated empty clusters, a fallback gamma, a kernel that is not
    positive semidefinite, ...). The CLI shows each one once, on stderr."""


class ValueRangeError(DataError):
    """Data whose kernel values, distances or the sums kernel k-means forms of them overflow
    floating point. ``row`` and ``column`` (0-based) locate the value that breaks the rule,
    ``detail`` states the rule; the message is ``X row R, column C: detail``."""

    def __init__(self, row, column, detail, what="X"):
        self.row, self.column, self.detail, self.what = int(row), int(column), detail, what
        super().__init__(f"{what} row {self.row}, column {self.column}: {detail}")


class TooFewDistinctPointsError(DataError):
    """Fewer distinct points (of positive weight) than clusters: some clusters would have to
    share a point, and their centres would coincide."""

    def __init__(self, n_distinct, n_clusters):
        self.n_distinct, self.n_clusters = int(n_distinct), int(n_clusters)
        super().__init__(
            f"the data have {self.n_distinct} distinct point{'' if n_distinct == 1 else 's'}"
            f" (of positive weight), fewer than the {self.n_clusters} clusters asked for; "
            f"k can be at most {self.n_distinct}")
