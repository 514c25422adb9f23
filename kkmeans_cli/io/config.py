"""YAML run configs: ``--config run.yaml`` sets any option of a command.

Precedence is built-in defaults < config < flags: a config value is used for every option the
user did not give on the command line (click's parameter source tells which ones they gave).
Keys are the long option names with ``_`` for ``-`` (``n_clusters``, ``n_init``, ``gamma``).
One config serves every command: a key of another command (``n_clusters`` for ``sweep``, the
fit options for ``predict``) is ignored; a key no command knows is an error.
"""
import difflib

import click

from ..errors import ConfigError

# Options that make no sense inside a config file.
NOT_CONFIGURABLE = ("config", "help", "version")


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
        with open(path, encoding="utf-8") as stream:
            data = yaml.load(stream, Loader=_unique_key_loader(yaml, path))
    except FileNotFoundError:
        raise ConfigError(f"config {path}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"config {path}: cannot read ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"config {path}: not valid YAML{where}: {problem}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"config {path}: not a text file") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config {path}: must be a mapping of option names to values, "
                          f"found a {type(data).__name__}")
    return data


def _unique_key_loader(yaml, path):
    """YAML's safe loader, refusing a key given twice in one mapping (YAML says keys are
    unique; PyYAML silently keeps the last one, so ``seed: 1`` then ``seed: 2`` ran with 2)."""
    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            seen = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # "<<: *base": keys it brings in may be overridden
                key = self.construct_object(key_node, deep=deep)
                line = key_node.start_mark.line + 1
                try:
                    if key in seen:
                        raise ConfigError(f"config {path}: key {key!r} is given twice (lines "
                                          f"{seen[key]} and {line}); keep one")
                    seen[key] = line
                except TypeError:  # an unhashable key: the base class says so
                    break
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


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
        if key not in params:
            continue  # an option of another command
        if _given_on_command_line(ctx, key):
            continue
        ctx.params[key] = convert_value(ctx, params[key], value, path)
    return dict(ctx.params)


def _given_on_command_line(ctx, name):
    source = ctx.get_parameter_source(name)
    return source not in (None, click.core.ParameterSource.DEFAULT,
                          click.core.ParameterSource.DEFAULT_MAP)


def _unknown_key_message(path, key, params):
    message = f"config {path}: unknown key '{key}'"
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
    if param.is_flag:
        if not isinstance(value, bool):
            expected = "true or false"
    elif isinstance(value, bool) or isinstance(value, (dict, list)) or value is None:
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
    try:
        return kind.convert(value, param, ctx)
    except click.BadParameter as exc:
        raise ConfigError(f"config {path}: key '{param.name}': {exc.message}") from None
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
    return f"{value!r} ({type(value).__name__})"
