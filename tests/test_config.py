"""YAML run configs: reading, precedence, unknown keys and types (``kkmeans_cli.io.config``)."""
import click
import pytest
from click.testing import CliRunner

from kkmeans_cli.cli.options import GammaType
from kkmeans_cli.io.config import apply_config, configurable_params, read_config
from kkmeans_cli.errors import ConfigError


@click.command()
@click.option("-k", "--n-clusters", type=click.IntRange(min=1), default=None)
@click.option("--n-init", type=int, default=10)
@click.option("--tol", type=float, default=1e-4)
@click.option("--gamma", type=GammaType(), default="median")
@click.option("--kernel", type=click.Choice(["rbf", "linear"]), default="rbf")
@click.option("--quiet", is_flag=True)
@click.option("--config", default=None)
@click.pass_context
def command(ctx, **_):
    """A small command standing in for ``kkmeans fit``."""
    ctx.obj["opts"] = apply_config(ctx, ctx.obj["config"], "run.yaml")


def _effective(config, args=()):
    holder = {"config": config}
    result = CliRunner().invoke(command, list(args), obj=holder, catch_exceptions=True)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return holder["opts"]


def test_read_config(tmp_path):
    (tmp_path / "a.yaml").write_text("# comment\nkernel: rbf\nn_init: 4\ngamma: 0.5\n")
    assert read_config(str(tmp_path / "a.yaml")) == {"kernel": "rbf", "n_init": 4, "gamma": 0.5}
    (tmp_path / "empty.yaml").write_text("")
    assert read_config(str(tmp_path / "empty.yaml")) == {}


@pytest.mark.parametrize("text, message", [
    ("kernel: [rbf\n", "not valid YAML at line 2"),
    ("a: b: c\n", "not valid YAML at line 1, column 5"),
    ("- 1\n- 2\n", "must be a mapping of option names to values, found a list"),
])
def test_read_config_errors(tmp_path, text, message):
    (tmp_path / "bad.yaml").write_text(text)
    with pytest.raises(ConfigError, match="bad.yaml: ") as info:
        read_config(str(tmp_path / "bad.yaml"))
    assert message in str(info.value)
    assert "\n" not in str(info.value)
    with pytest.raises(ConfigError, match="no such file"):
        read_config(str(tmp_path / "none.yaml"))


def test_precedence_defaults_config_flags():
    opts = _effective({"n_init": 3, "kernel": "linear", "gamma": 2}, ["--n-init", "7"])
    assert opts["n_init"] == 7  # flag beats config
    assert opts["kernel"] == "linear"  # config beats default
    assert opts["gamma"] == 2.0 and isinstance(opts["gamma"], float)
    assert opts["tol"] == 1e-4  # default
    assert _effective({"gamma": "scale", "quiet": True})["quiet"] is True
    assert _effective({}, ["--gamma", "median"])["gamma"] == "median"


def test_flag_equal_to_default_still_wins():
    assert _effective({"n_init": 3}, ["--n-init", "10"])["n_init"] == 10


def test_unknown_key_names_closest():
    with pytest.raises(ConfigError, match="unknown key 'n_inti'; did you mean 'n_init'"):
        _effective({"n_inti": 3})
    with pytest.raises(ConfigError, match="unknown key 'n-clusters'; did you mean 'n_clusters'"):
        _effective({"n-clusters": 3})
    with pytest.raises(ConfigError, match=r"unknown key 'zzz' \(valid keys: gamma, kernel"):
        _effective({"zzz": 1})
    with pytest.raises(ConfigError, match="unknown key 'config'"):
        _effective({"config": "other.yaml"})


@pytest.mark.parametrize("config, message", [
    ({"n_init": "3"}, "key 'n_init' must be an integer; got '3' (str)"),
    ({"n_init": True}, "key 'n_init' must be an integer; got True (bool)"),
    ({"n_init": 1.5}, "key 'n_init' must be an integer"),
    ({"tol": "small"}, "key 'tol' must be a number"),
    ({"tol": None}, "key 'tol' must be a number; got nothing (null)"),
    ({"quiet": "yes"}, "key 'quiet' must be true or false"),
    ({"kernel": ["rbf"]}, "key 'kernel' must be one of rbf, linear"),
    ({"kernel": "poly"}, "key 'kernel': 'poly' is not one of"),
    ({"gamma": 0}, "key 'gamma': must be a positive number"),
    ({"n_clusters": 0}, "key 'n_clusters': 0 is not in the range x>=1"),
])
def test_wrong_types_name_the_key(config, message):
    with pytest.raises(ConfigError) as info:
        _effective(config)
    assert message in str(info.value)


def test_configurable_params():
    names = set(configurable_params(command))
    assert names == {"n_clusters", "n_init", "tol", "gamma", "kernel", "quiet"}
