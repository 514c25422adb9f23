"""YAML run configs: ``--config run.yaml`` sets any option of a command.

Precedence is built-in defaults < config < flags: a config value is used for every option the
user did not give on the command line (click's parameter source tells which ones they gave).
Keys are the long option names with ``_`` for ``-`` (``n_clusters``, ``n_init``, ``gamma``).
One config serves every command: a key of another command (``n_clusters`` for ``sweep``, the
fit options for ``predict``) is ignored; a key no command knows is an error. Every value is
checked, also one a flag overrides or one for another command.

A config is small and read within bounds: at most ``MAX_BYTES``, nested at most ``MAX_DEPTH``
levels, and at most ``MAX_VALUES`` values once its aliases (``*name``) are expanded (a
"billion laughs" of a few hundred bytes would otherwise take gigabytes); the message blames
the aliases only where there are some. A message shows at
most a short excerpt of a value (:func:`excerpt`).
"""
import difflib
import reprlib

import click

from ..errors import ConfigError

# Options that make no sense inside a config file.
NOT_CONFIGURABLE = ("config", "help", "version")

#: A config file is at most this large (bytes).
MAX_BYTES = 1 << 20
#: Nesting of mappings and lists, at most.
MAX_DEPTH = 32
#: Values (scalars, lists, mappings) once every alias is expanded, at most.
MAX_VALUES = 10_000
#: Characters of a value shown in a message, at most.
EXCERPT = 80

#: Option name → (config path, key) of the values the current command took from --config,
#: for messages that name the option (``app._report_error`` says where the value came from).
ORIGINS = {}


def read_config(path):
    """Read a YAML run config.

    Parameters
    ----------
    path : str

    Returns
    -------
    dict
        Top-level keys and values (empty for an empty file).

    Raises
    ------
    ConfigError
        The file cannot be read, is not valid YAML or is not a mapping of keys to values.
    """
    import yaml

    try:
        with open(path, "rb") as stream:
            raw = stream.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(f"config {path}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"config {path}: is a folder, not a YAML file") from None
    except OSError as exc:
        raise ConfigError(f"config {path}: cannot read ({exc.strerror or exc})") from None
    if len(raw) > MAX_BYTES:
        raise ConfigError(f"config {path}: is larger than {MAX_BYTES // 1024} KiB; a run config "
                          f"holds a few option values")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config {path}: not a text file (not UTF-8 at byte "
                          f"{exc.start})") from None
    loader = _bounded_loader(yaml, path)(text)
    try:
        node = loader.get_single_node()
        if node is not None:
            _check_expansion(node, path)
        data = None if node is None else loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"config {path}: not valid YAML{where}: {cut(problem)}") from None
    except ConfigError:
        raise
    except RecursionError:  # never reached within MAX_DEPTH; a last line of defence
        raise ConfigError(f"config {path}: nested too deeply (at most {MAX_DEPTH} "
                          f"levels)") from None
    except ValueError as exc:  # an integer of more digits than Python converts (4,300)
        raise ConfigError(f"config {path}: holds a number too long to read "
                          f"({cut(str(exc).split(':')[0], 80)}); no option takes one") from None
    finally:
        loader.dispose()
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config {path}: must be a mapping of option names to values, "
                          f"found a {type(data).__name__}")
    return data


def _bounded_loader(yaml, path):
    """YAML's safe loader, nesting at most ``MAX_DEPTH`` levels (checked while composing, so
    a deep document never reaches Python's recursion limit), and refusing a key given twice
    in one mapping (YAML says keys are unique; PyYAML silently keeps the last one, so
    ``seed: 1`` then ``seed: 2`` ran with 2)."""
    class BoundedLoader(yaml.SafeLoader):
        depth = 0

        def compose_node(self, parent, index):
            self.depth += 1
            try:
                if self.depth > MAX_DEPTH:
                    mark = self.peek_event().start_mark
                    raise ConfigError(f"config {path}: nested more than {MAX_DEPTH} levels deep "
                                      f"at line {mark.line + 1}; a run config is a flat "
                                      f"mapping of option names to values")
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

        def construct_mapping(self, node, deep=False):
            seen = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # "<<: *base": keys it brings in may be overridden
                key = self.construct_object(key_node, deep=deep)
                line = key_node.start_mark.line + 1
                try:
                    if key in seen:
                        raise ConfigError(f"config {path}: key {excerpt(key)} is given twice "
                                          f"(lines {seen[key]} and {line}); keep one")
                    seen[key] = line
                except TypeError:  # an unhashable key: the base class says so
                    break
            return super().construct_mapping(node, deep=deep)

    return BoundedLoader


def _check_expansion(root, path):
    """Refuse a document of more than ``MAX_VALUES`` values once its aliases are expanded (the
    message blames them where the values they hold go beyond), or whose aliases refer to
    themselves, before anything is built from it (the count of each node is its values once
    expanded, counted once per node)."""
    import yaml

    counts, aliased, active = {}, set(), set()

    def count(node):
        """The node's values once expanded; ``aliased`` gets the nodes that hold an alias."""
        key = id(node)
        if key in counts:
            return counts[key]
        if key in active:
            raise ConfigError(f"config {path}: line {node.start_mark.line + 1}: an alias "
                              f"refers to the value that holds it")
        active.add(key)
        total = 1
        children = (node.value if isinstance(node, yaml.SequenceNode) else
                    [n for pair in node.value for n in pair]
                    if isinstance(node, yaml.MappingNode) else [])
        for child in children:
            if id(child) in counts or id(child) in aliased:
                aliased.add(key)  # a value seen before (an alias), or one holding one
            total += count(child)
            if id(child) in aliased:
                aliased.add(key)
        active.discard(key)
        counts[key] = total
        if total > MAX_VALUES:
            what = ("its aliases expand to" if key in aliased else "it holds")
            raise ConfigError(f"config {path}: line {node.start_mark.line + 1}: {what} more "
                              f"than {MAX_VALUES:,} values; a run config holds a few option "
                              f"values")
        return total

    count(root)


def excerpt(value, limit=EXCERPT):
    """A short excerpt of ``value`` for a message: its repr for anything but a string, cut to
    about ``limit`` characters with the length left out said."""
    if isinstance(value, str):
        text = repr(value)
    else:
        short = reprlib.Repr()
        short.maxlevel, short.maxlist, short.maxdict, short.maxstring = 3, 6, 6, limit
        short.maxother = limit
        text = short.repr(value)
    return cut(text, limit)


def cut(text, limit=200):
    """``text`` cut to ``limit`` characters, saying how many were left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit:,} more characters)"


def configurable_params(command):
    """The options of a click command a config may set, by their config key."""
    return {p.name: p for p in command.params
            if isinstance(p, click.Option) and p.name not in NOT_CONFIGURABLE}


def known_keys(ctx):
    """Every config key of every command of the program (the command's own when it stands
    alone), by name → the option of the first command that has it."""
    root = ctx.find_root().command
    commands = list(getattr(root, "commands", {}).values()) or [ctx.command]
    if ctx.command not in commands:
        commands.append(ctx.command)
    keys = {}
    for command in commands:
        for name, param in configurable_params(command).items():
            keys.setdefault(name, param)
    return keys


def apply_config(ctx, config, path):
    """Merge config values into ``ctx.params`` where the user gave no flag.

    Parameters
    ----------
    ctx : click.Context
        The command's context after parsing.
    config : dict
        From :func:`read_config`.
    path : str
        The config file, for messages.

    Returns
    -------
    dict
        The effective options (``ctx.params`` is updated in place too).

    Raises
    ------
    ConfigError
        A key that is not an option of any command (naming the closest valid key), or a value
        of the wrong type (naming the key). Keys of other commands are ignored.
    """
    params = configurable_params(ctx.command)
    known = known_keys(ctx)
    for key, value in config.items():
        if not isinstance(key, str) or key not in known:
            raise ConfigError(_unknown_key_message(path, key, known))
        # Every value is checked: also one a flag overrides, or one of another command.
        converted = convert_value(ctx, params.get(key, known[key]), value, path)
        if key not in params or given_on_command_line(ctx, key):
            continue  # an option of another command, or a flag wins
        ctx.params[key] = converted
        ORIGINS[key] = (path, key, tuple(params[key].opts))
    return dict(ctx.params)


def origin_note(message):
    """Where the value of an option named in ``message`` came from, when a config set it:
    `` (--cluster is key 'cluster' of config run.yaml)``; empty otherwise."""
    import re

    notes = []
    for path, key, flags in ORIGINS.values():
        if any(re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", message) for flag in flags):
            flag = next(f for f in flags if f.startswith("--"))
            notes.append(f"{flag} is key '{key}' of config {path}")
    return f" ({'; '.join(notes)})" if notes else ""


def given_on_command_line(ctx, name):
    """Whether the option ``name`` was given as a flag (not its default, nor a config's)."""
    source = ctx.get_parameter_source(name)
    return source not in (None, click.core.ParameterSource.DEFAULT,
                          click.core.ParameterSource.DEFAULT_MAP)


def _unknown_key_message(path, key, params):
    message = f"config {path}: unknown key {excerpt(str(key))}"
    if isinstance(key, str):
        close = difflib.get_close_matches(key.replace("-", "_"), list(params), n=1, cutoff=0.5)
        if close:
            message += f"; did you mean '{close[0]}'?"
    return message + f" (valid keys: {', '.join(sorted(params))})"


def convert_value(ctx, param, value, path):
    """Check a config value's YAML type and convert it as the option's flag would be.

    Whole numbers are required where the option takes an integer (``2.5`` is refused rather
    than truncated) and booleans where it is a flag.
    """
    kind = param.type
    expected = None
    words = getattr(param, "config_words", ())
    if param.is_flag:
        if not isinstance(value, bool) and value not in words:
            expected = "true or false" + "".join(f" or {w}" for w in words)
    elif (isinstance(value, bool) or isinstance(value, dict) or value is None
          or (isinstance(value, list) and not getattr(kind, "accepts_list", False))):
        expected = _type_name(kind)
    elif isinstance(kind, click.types.IntParamType) and not isinstance(value, int):
        expected = "an integer"
    elif isinstance(kind, click.types.FloatParamType) and not isinstance(value, (int, float)):
        expected = "a number"
    if expected:
        raise ConfigError(f"config {path}: key '{param.name}' must be {expected}; got "
                          f"{_show(value)}")
    if param.is_flag:
        return value
    if (isinstance(kind, click.Choice) and isinstance(value, str)
            and value not in kind.choices and value.replace("_", "-") in kind.choices):
        value = value.replace("_", "-")   # a name as the API and model files spell it
    try:
        converted = kind.convert(value, param, ctx)
        check = getattr(kind, "check_config", None)     # a value read later, checked now
        if check is not None:
            check(converted)
        return converted
    except click.BadParameter as exc:
        raise ConfigError(f"config {path}: key '{param.name}': {cut(exc.message)}") from None
    except (TypeError, ValueError):
        raise ConfigError(f"config {path}: key '{param.name}' must be {_type_name(kind)}; got "
                          f"{_show(value)}") from None


def _type_name(kind):
    if isinstance(kind, click.types.IntParamType):
        return "an integer"
    if isinstance(kind, click.types.FloatParamType):
        return "a number"
    if isinstance(kind, click.Choice):
        return "one of " + ", ".join(map(str, kind.choices))
    return f"a {kind.name}"


def _show(value):
    if value is None:
        return "nothing (null)"
    return f"{excerpt(value)} ({type(value).__name__})"
