"""One way to set any AgentConfig field from the command line, the same on `robot-rl train` and `robot-rl learner`
(`robot-rl sim` forwards its own `--set` to the learner): `--set FIELD=VALUE`, repeatable, parsed by the field's
type; the order in which defaults, recipe and flags combine; printing and saving the resolved config.

Resolution, later wins: the algorithm's defaults (learners.agents.config presets) < the task's recipe
(learners.agents.recipes)
< explicit flags (--discount, --hidden, ...) < --set. An unknown field or a value that does not parse is a
one-line ConfigError naming the field (and the valid fields or the expected syntax); values are then checked by
AgentConfig itself (e.g. "discount=1.5 must be in (0, 1]").

VALUE syntax by the field's type: int and float as usual; bool true/false (or 1/0, yes/no, on/off); str as
given; tuples comma-separated (``hidden_dims=256,256``, ``state_select=object,state[0:3]``) or a JSON list
(``hidden_dims=[256,256]``); optional fields (ensemble_subsample, grad_clip_norm, ...) also take none / null.

The resolved config is printed at start (the fields that differ from `AgentConfig()`) and saved in full as
``OUT/agent_config.json``.

Usage::

    parser = argparse.ArgumentParser(); add_set_option(parser)
    args = parser.parse_args(["--set", "n_step=5", "--set", "hidden_dims=64,64"])
    parse_set(args.set)                               # {"n_step": 5, "hidden_dims": (64, 64)}
    cfg = resolve_agent_config(rlpd_state_config, recipe_for("twin-reach").overrides("state"),
                               {"discount": 0.9}, parse_set(args.set))
    announce_agent_config(cfg, out, prefix="[train]")   # one line on stdout + OUT/agent_config.json
"""

from __future__ import annotations

import argparse
import functools
import json
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from learners.agents.config import AgentConfig, check_agent_fields
from robot_rl.errors import ConfigError

AGENT_CONFIG_FILE = "agent_config.json"
"""The resolved AgentConfig of a run, in its run directory (train and learner alike)."""
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


def add_set_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup, dest: str = "set") -> None:
    """Add the repeatable ``--set FIELD=VALUE`` option (collected as a list of strings in `dest`)."""
    parser.add_argument("--set", dest=dest, action="append", default=[], metavar="FIELD=VALUE",
                        help="set any AgentConfig field (repeatable; after the task's recipe and the other flags), "
                             "e.g. --set n_step=5 --set hidden_dims=256,256 --set layer_norm=false")


@functools.cache
def _field_types() -> dict[str, Any]:
    return typing.get_type_hints(AgentConfig)


def _describe(kind: Any) -> str:
    """Human words for a field type: 'an integer', 'comma-separated integers', ..."""
    args = typing.get_args(kind)
    if typing.get_origin(kind) in (typing.Union, types.UnionType) and type(None) in args:
        inner = next(a for a in args if a is not type(None))
        return f"{_describe(inner)} or none"
    if typing.get_origin(kind) is tuple:
        return {int: "comma-separated integers", float: "comma-separated numbers"}.get(args[0], "comma-separated "
                                                                                         "values")
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(kind, str(kind))


def _parse_as(kind: Any, text: str) -> Any:
    """`text` as a value of type `kind` (ValueError when it is not one)."""
    args = typing.get_args(kind)
    if typing.get_origin(kind) in (typing.Union, types.UnionType) and type(None) in args:
        if text.lower() in ("none", "null"):
            return None
        return _parse_as(next(a for a in args if a is not type(None)), text)
    if typing.get_origin(kind) is tuple:
        if text.startswith("["):
            items = json.loads(text)
            if not isinstance(items, list):
                raise ValueError(text)
            parts = [str(x) for x in items]
        else:
            parts = [x.strip() for x in text.split(",") if x.strip()]
        return tuple(_parse_as(args[0], x) for x in parts)
    if kind is bool:
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ValueError(text)
    if kind is int:
        return int(text)
    if kind is float:
        return float(text)
    if kind is str:
        return json.loads(text) if len(text) >= 2 and text[0] == text[-1] == '"' else text
    raise ValueError(f"no parser for {kind}")  # pragma: no cover - every AgentConfig field type is handled


def parse_value(field: str, text: str) -> Any:
    """The value `text` of AgentConfig field `field`, parsed by the field's type (ConfigError otherwise)."""
    check_agent_fields([field], where=f"--set {field}={text}")
    kind = _field_types()[field]
    try:
        return _parse_as(kind, text.strip())
    except ValueError:
        raise ConfigError(f"--set {field}={text}: expected {_describe(kind)} for AgentConfig field '{field}'") \
            from None


def parse_set(items: Iterable[str]) -> dict[str, Any]:
    """{field: typed value} from ``FIELD=VALUE`` strings (later items win); ConfigError names a bad one."""
    out: dict[str, Any] = {}
    for item in items:
        field, sep, text = item.partition("=")
        field = field.strip()
        if not sep or not field:
            raise ConfigError(f"--set {item!r}: expected FIELD=VALUE, e.g. --set n_step=5")
        out[field] = parse_value(field, text)
    return out


def resolve_agent_config(make: Callable[..., AgentConfig], *layers: Mapping[str, Any]) -> AgentConfig:
    """`make(**overrides)` with the override layers merged in order (later wins): recipe, flags, --set. Every
    name must be an AgentConfig field; the values are validated by AgentConfig (ConfigError naming the field)."""
    merged: dict[str, Any] = {}
    for layer in layers:
        check_agent_fields(layer, where="agent options")
        merged.update(layer)
    if isinstance(merged.get("residual_base"), str) and merged["residual_base"].strip():
        from learners.agents.residual import absolute_source

        merged["residual_base"] = absolute_source(merged["residual_base"])  # runs resume from any directory
    try:
        return make(**merged)
    except TypeError as err:  # a value of the wrong type reaching AgentConfig.validate
        raise ConfigError(f"agent options: {err}") from err


def describe_agent_config(cfg: AgentConfig) -> str:
    """The fields of `cfg` that differ from `AgentConfig()`, as ``name=value`` pairs on one line."""
    default = AgentConfig().to_dict()
    changed = [f"{k}={json.dumps(v)}" for k, v in cfg.to_dict().items() if default.get(k) != v]
    return ", ".join(changed) if changed else "(all AgentConfig defaults)"


def save_agent_config(cfg: AgentConfig, out: str | Path) -> Path:
    """Write `cfg` in full to OUT/agent_config.json (written whole, then renamed into place); returns the path."""
    path = Path(out) / AGENT_CONFIG_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(cfg.to_dict(), indent=1) + "\n")
    tmp.replace(path)
    return path


def announce_agent_config(cfg: AgentConfig, out: str | Path, prefix: str, log: Callable[[str], Any] = print) -> Path:
    """Save `cfg` to OUT/agent_config.json and log one line: where, and the fields that differ from defaults."""
    path = save_agent_config(cfg, out)
    log(f"{prefix} agent config (in full: {path}; other fields: AgentConfig defaults): {describe_agent_config(cfg)}")
    return path


def compile_what(agent: Any) -> str:
    """What an agent's timed first update held, for the CLIs' one-line report: JAX tracing + XLA, torch.compile's
    tracing + inductor, or the fallback to eager when torch.compile failed (SACAgent.compile_status)."""
    status = str(getattr(agent, "compile_status", ""))
    if status.startswith("eager"):
        return f"{status}; training goes on eager"
    if status == "compiled":
        return ("torch.compile: tracing + inductor compilation of the losses + the update; cached on disk for the "
                "next run")
    return "JAX: tracing + XLA compilation + the update; cached on disk for the next run"
