"""The plan: which suites run, on which targets and engines, at which profile, with which options.

A plan comes from a TOML file and/or command-line flags. Everything is checked before anything is
written: an unknown key, a wrong type or an impossible value ends with one sentence naming the key (and
file:line when we can find it).

    name = "lab-a"                # run name, part of the run directory
    profile = "quick"             # quick | standard | full
    suites = ["device"]           # in order; default: the suite sections present in the file
    targets = ["/mnt/nvme0"]      # what the storage suites measure
    engines = ["duckdb", "postgres", "mariadb"]
    tags = ["firmware=2.1"]       # NAME=VALUE labels for history and filters (also --tag)

    [accept]                      # acceptance thresholds (accept.py)
    "device.t0-rand-w0-qd32-bs4k.read_iops" = ">= 10000"

    [device]                      # one section per suite; its keys are that suite's options
    iodepth = [1, 4, 32]
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any

from refbench.errors import UserError
from refbench.fileio import parse_toml, read_user_file, toml_shape_problem
from refbench.options import (ENGINES, PROFILES, REPEATS_BY_PROFILE, REPEATS_VARIABLE, TAG, TOP_LEVEL, Option, Plan,
                              PlanError, added_settings, not_known)
from refbench.suites import get_suite, suite_names
from refbench.thresholds import parse as parse_accept

# A plan's names (defined in refbench.options) with its reader, for what reads plans: the CLI, tune, the tests.
__all__ = ["ENGINES", "PROFILES", "TAG", "TOP_LEVEL", "Option", "Plan", "PlanError", "load_plan"]


def load_plan(
    path: str | Path | None = None,
    *,
    flags: dict[str, Any] | None = None,
    suite_flags: dict[str, dict[str, str]] | None = None,
    sets: list[str] | None = None,
    suites: list[str] | None = None,
    defaults: dict[str, Any] | None = None,
) -> Plan:
    """Builds a checked plan from a TOML file, then top-level flags (already typed), then suite flags and
    ``--set section.key=value`` (as text). ``suites`` forces the suite list (e.g. ``refbench device``);
    ``defaults`` replaces top-level defaults (e.g. the run name of a suite command)."""
    raw: dict[str, Any] = {}
    text = ""
    label = ""
    if path is not None:
        label = str(path)
        try:
            text = read_user_file(path, "plan file")
            raw = parse_toml(text, label)
        except PlanError:
            raise
        except UserError as exc:
            raise PlanError(str(exc)) from None

    def where(table: str, key: str) -> str:
        shown = f"[{table}] {_shown_key(key)}" if table else _shown_key(key)
        if not label:
            return shown
        line = _key_line(text, table, key)
        return f"{label}:{line}: {shown}" if line else f"{label}: {shown}"

    def in_file(table: str, key: str) -> str:
        line = _key_line(text, table, key)
        return f"plan file {label}:{line}" if line else f"plan file {label}"

    known = suite_names()
    for key, value in raw.items():
        if key in TOP_LEVEL or key == "accept":
            continue
        if key in known:
            if not isinstance(value, dict):
                raise PlanError(f"{where('', key)} must be a table ([{key}]) of that suite's options.")
            continue
        raise not_known(where("", key), key, list(TOP_LEVEL) + known)

    plan = Plan(source=label)
    plan.origins = {key: "default" for key in TOP_LEVEL}
    for key, value in (defaults or {}).items():
        setattr(plan, key, TOP_LEVEL[key].coerce(value, key))
        plan.origins[key] = "default of this command"
    for key, option in TOP_LEVEL.items():
        if key in raw:
            setattr(plan, key, option.coerce(raw[key], where("", key)))
            plan.origins[key] = in_file("", key)
    for key, value in (flags or {}).items():
        if value is not None:
            flag = "--tag" if key == "tags" else f"--{key.replace('_', '-')}"
            value = TOP_LEVEL[key].coerce(value, flag)
            if key == "tags":  # --tag adds to the plan's tags, or changes one of the same name
                value = [f"{k}={v}" for k, v in dict(TAG.fullmatch(t).groups() for t in plan.tags + value).items()]
            setattr(plan, key, value)
            plan.origins[key] = "argument TARGET" if key == "targets" else f"flag {flag}"

    if not plan.repeats and (from_environment := os.environ.get(REPEATS_VARIABLE, "").strip()):
        plan.repeats = TOP_LEVEL["repeats"].coerce(int(from_environment) if from_environment.isdigit() else
                                                   from_environment, f"${REPEATS_VARIABLE}")
        plan.origins["repeats"] = f"environment ${REPEATS_VARIABLE}"
    if not plan.repeats:
        plan.repeats = REPEATS_BY_PROFILE[plan.profile]
        plan.origins["repeats"] = f"profile default ({plan.profile})"

    if suites is not None:
        plan.suites = list(suites)
        plan.origins["suites"] = "command line"
    elif "suites" not in raw and not (flags or {}).get("suites"):
        plan.suites = [k for k in raw if k in known]
        if plan.suites:
            plan.origins["suites"] = f"plan file {label}: its suite sections"
    for name in plan.suites:
        if name not in known:
            raise not_known(f"{where('', 'suites')} names '{name}', which", name, known, "suite")
    if len(set(plan.suites)) != len(plan.suites):
        raise PlanError(f"{where('', 'suites')} names a suite twice.")

    set_values = _parse_sets(sets or [], known)
    for name in dict.fromkeys(plan.suites + [k for k in raw if k in known]):
        schema = get_suite(name).options
        section = raw.get(name, {})
        resolved = {key: opt.default_for(plan.profile) for key, opt in schema.items()}
        origins = {key: f"profile default ({plan.profile})" if opt.per_profile else "default" for key, opt in schema.items()}
        for key, value in section.items():
            if key not in schema:
                raise not_known(where(name, key), key, list(schema))
            resolved[key] = schema[key].coerce(value, where(name, key))
            origins[key] = in_file(name, key)
        for key, value in set_values.get(name, {}).items():
            if key not in schema:
                raise not_known(f"--set {name}.{key}", key, list(schema))
            resolved[key] = schema[key].coerce(value, f"--set {name}.{key}")
            origins[key] = f"--set {name}.{key}"
        for key, value in (suite_flags or {}).get(name, {}).items():
            flag = f"--{key.replace('_', '-')}"
            if isinstance(value, bool):
                resolved[key] = schema[key].coerce(value, flag)
            elif value is not None:
                resolved[key] = schema[key].parse_flag(value, flag)
            if value is not None:
                origins[key] = f"flag {flag}"
        for key, opt in schema.items():
            if opt.adds_settings and not origins[key].startswith(("default", "profile default")):
                resolved[key] = added_settings(opt.default_for(plan.profile), resolved[key])
                origins[key] += ", added to the defaults"
        plan.origins |= {f"{name}.{key}": origin for key, origin in origins.items()}
        if name in plan.suites:
            plan.options[name] = resolved
    for name in set_values:
        if name not in plan.suites:
            raise PlanError(f"--set {name}.… sets an option of suite '{name}', which this run does not include.")
    if "accept" in raw:
        for threshold in parse_accept(raw["accept"], lambda key: where("accept", key) if key else where("", "accept")):
            if threshold.figure.split(".")[0] not in plan.suites:
                raise PlanError(f"{where('accept', threshold.figure)} names suite '{threshold.figure.split('.')[0]}', "
                                "which this run does not include.")
            plan.accept[threshold.figure] = f"{threshold.op} {threshold.limit:g}"
    return plan


def _parse_sets(sets: list[str], known: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for item in sets:
        m = re.fullmatch(r"\s*([A-Za-z0-9_-]+)\.([A-Za-z0-9_]+)\s*=(.*)", item)
        if not m:
            raise PlanError(f"--set {item!r} is not of the form suite.key=value.")
        section, key, value_text = m.group(1), m.group(2), m.group(3).strip()
        if section not in known:
            raise not_known(f"--set {item!r} names '{section}', which", section, known, "suite")
        if problem := toml_shape_problem(value_text):
            raise PlanError(f"--set {section}.{key}: not a value refbench reads: {problem.removeprefix('line 1: ')}.")
        try:
            value = tomllib.loads(f"v = {value_text}")["v"]
        except tomllib.TOMLDecodeError:
            value = value_text  # a bare word: take it as a string
        out.setdefault(section, {})[key] = value
    return out


def _shown_key(key: str) -> str:
    """A key as TOML would need it written: bare if it can be, else quoted (a key may hold any character)."""
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _key_line(text: str, table: str, key: str) -> int | None:
    """The line where ``key`` is set in ``[table]`` ("" = top level), or where table ``key`` starts."""
    current = ""
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        header = re.match(r"^\[\s*\"?([^\]\"]+?)\"?\s*\]", stripped)
        if header and not stripped.startswith("[["):
            current = header.group(1).strip()
            if table == "" and current == key:
                return number
            continue
        if current == table and re.match(rf"^\"?{re.escape(key)}\"?\s*=", stripped):
            return number
    return None
