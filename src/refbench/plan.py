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

import difflib
import json
import math
import os
import re
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from refbench import timings
from refbench.thresholds import parse as parse_accept
from refbench.engines import names as engine_names
from refbench.errors import UserError
from refbench.fileio import parse_toml, read_user_file, toml_shape_problem
from refbench.suites import get_suite, suite_names

PROFILES = ("quick", "standard", "full")
# Every profile measures its headline cases three times: one measurement a side cannot tell a 5% change from the
# noise of a shared host, and the seconds of one run are not replicates (refbench compare, estimate.py).
REPEATS_BY_PROFILE = {"quick": 3, "standard": 3, "full": 3}
# The repeats a plan gets when neither it nor --repeats says (a CI smoke job that wants one pass: 1).
REPEATS_VARIABLE = "REFBENCH_REPEATS"
ENGINES = engine_names()  # the registry's: a new engine module is a new choice


class PlanError(UserError):
    pass


@dataclass(frozen=True)
class Option:
    """One plan key (and the CLI flag of the same name). ``default`` may be a dict keyed by profile."""

    kind: type
    default: Any
    help: str
    item: type | None = None  # element type when kind is list
    choices: tuple[Any, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    check: Callable[[Any], str | None] | None = None  # returns what is wrong, or None

    @property
    def per_profile(self) -> bool:
        return isinstance(self.default, dict) and set(self.default) == set(PROFILES)

    def default_for(self, profile: str) -> Any:
        return self.default[profile] if self.per_profile else self.default

    def coerce(self, value: Any, where: str) -> Any:
        if self.kind is list:
            if not isinstance(value, list):
                raise PlanError(f"{where} must be a list of {_type_name(self.item)}, not {_describe(value)}.")
            if not value:
                raise PlanError(f"{where} must not be an empty list.")
            if any(isinstance(v, str) and not v.strip() for v in value):
                raise PlanError(f"{where} must not have an empty item.")
            items = [self._coerce_scalar(v, self.item or str, f"{where} item {v!r}") for v in value]
            repeated = next((v for i, v in enumerate(items) if v in items[:i]), None)
            if repeated is not None:
                # A repeated value would make two cases with one id: the second overwrites the first's record.
                raise PlanError(f"{where} lists {repeated!r} twice.")
            return items
        return self._coerce_scalar(value, self.kind, where)

    def _coerce_scalar(self, value: Any, kind: type, where: str) -> Any:
        ok = isinstance(value, kind) and not (kind in (int, float) and isinstance(value, bool))
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value, ok = float(value), True
        if not ok:
            raise PlanError(f"{where} must be {_type_name(kind)}, not {_describe(value)}.")
        if kind is float and not math.isfinite(value):
            raise PlanError(f"{where} must be a finite number, not {value!r}.")
        if kind is str and re.search(r"[\x00-\x1f\x7f]", value):
            # The value is not repeated: a DSN may hold a password.
            raise PlanError(f"{where} must not contain control characters such as a newline.")
        if self.choices is not None and value not in self.choices:
            raise PlanError(f"{where} must be one of {', '.join(map(str, self.choices))}, not {value!r}"
                            f"{_suggestion(value, self.choices)}.")
        if self.minimum is not None and value < self.minimum:
            raise PlanError(f"{where} must be at least {self.minimum:g}, not {value!r}.")
        if self.maximum is not None and value > self.maximum:
            raise PlanError(f"{where} must be at most {self.maximum:g}, not {value!r}.")
        if self.check is not None and (problem := self.check(value)):
            raise PlanError(f"{where} {problem}.")
        return value

    def parse_flag(self, text: str, where: str) -> Any:
        """A flag's text in the plan's types: lists are comma-separated, booleans true/false."""
        if self.kind is list:
            words = [w.strip() for w in text.split(",")]
            if any(words) and not all(words):
                raise PlanError(f"{where} has an empty item in {text!r}; separate values with single commas.")
            return self.coerce([_parse_word(w, self.item or str, where) for w in words if w], where)
        return self.coerce(_parse_word(text.strip(), self.kind, where), where)


def _suggestion(word: Any, known: Any) -> str:
    """ " (did you mean 'x'?)" for a near miss among ``known``, else "". """
    if not isinstance(word, str):
        return ""
    close = difflib.get_close_matches(word, [str(k) for k in known], n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _not_known(where: str, word: str, known: list[str], what: str = "key") -> PlanError:
    hint = _suggestion(word, known)
    return PlanError(f"{where} is not a known {what}{hint or ' (known: ' + (', '.join(known) or 'none') + ')'}.")


def _parse_word(word: str, kind: type, where: str) -> Any:
    try:
        if kind is bool:
            if word.lower() in ("true", "yes", "1", "on"):
                return True
            if word.lower() in ("false", "no", "0", "off"):
                return False
            raise ValueError
        if kind is int:
            return _parse_int_with_suffix(word)
        if kind is float:
            return float(word)
    except ValueError:
        raise PlanError(f"{where} must be {_type_name(kind)}, not {word!r}.") from None
    return word


_SIZE_SUFFIX = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def _parse_int_with_suffix(word: str) -> int:
    """Integers as fio users write them: 4k = 4096, 1m = 1 MiB (binary, as in fio)."""
    m = re.fullmatch(r"([+-]?\d+)\s*([kmgt])?i?b?", word.lower())
    if not m:
        raise ValueError(word)
    return int(m.group(1)) * _SIZE_SUFFIX.get(m.group(2) or "", 1)


def _type_name(kind: type | None) -> str:
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false", list: "a list"}.get(
        kind, "a string"
    )


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return f"{str(value).lower()}"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    return f"{value!r}"


def _safe_name(value: str) -> str | None:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", value):
        return "must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
    return None


TAG = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]{0,63})=([^\x00-\x1f\x7f]{0,200})")


def _tag(value: str) -> str | None:
    return None if TAG.fullmatch(value) and not value.endswith("=") else (
        "must be NAME=VALUE: a name of letters, digits, '.', '_' or '-', and a value of 1-200 characters")


def _not_blank(value: str) -> str | None:
    return "must not be empty" if not value.strip() else None


TOP_LEVEL: dict[str, Option] = {
    "name": Option(str, "run", "Run name; part of the run directory.", check=_safe_name),
    "profile": Option(str, "quick", timings.profile_help(), choices=PROFILES),
    "runs_dir": Option(str, "runs", "Directory that holds the run directories.", check=_not_blank),
    "work_dir": Option(str, "", "Where suites put bulky data (default: the run directory's work/)."),
    "keep_work": Option(bool, False, "Keep the generated data and databases of a complete run (default: removed)."),
    "suites": Option(list, [], "Suites to run, in order.", item=str),
    "targets": Option(list, [], "Files, directories or block devices the storage suites measure.", item=str),
    "engines": Option(list, list(ENGINES), "Database engines the SQL suites use.", item=str, choices=ENGINES),
    "scheduler": Option(str, "", "Dask scheduler to run on several hosts (e.g. tcp://10.0.0.1:8786); with hosts and no "
                                 "scheduler, refbench starts a local cluster on loopback."),
    "hosts": Option(list, [], "Node counts to run the plan on, one step each (e.g. [1, 2, 4]: a scaling series).",
                    item=int, minimum=1, maximum=1024),
    "tags": Option(list, [], "NAME=VALUE labels of the run (firmware=2.1), for 'refbench runs --tag' and history.",
                   item=str, check=_tag),
    "repeats": Option(int, 0, "Measurements of each headline case (the peak point, the best load level, each engine's "
                      "streams), one round after another, so compare can test a change (0: $REFBENCH_REPEATS, else "
                      "the profile's: 3).", minimum=0, maximum=100),
    "tls_ca_file": Option(str, "", "TLS: the certificate authority that signed the cluster's certificates (PEM)."),
    "tls_cert": Option(str, "", "TLS: this end's certificate (PEM)."),
    "tls_key": Option(str, "", "TLS: this end's private key (PEM; may be in the certificate file)."),
}


@dataclass
class Plan:
    name: str = "run"
    profile: str = "quick"
    runs_dir: str = "runs"
    work_dir: str = ""
    keep_work: bool = False
    suites: list[str] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)
    engines: list[str] = field(default_factory=lambda: list(ENGINES))
    scheduler: str = ""
    hosts: list[int] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    repeats: int = 0  # 0 until load_plan resolves it: the profile's (repeats.BY_PROFILE)
    tls_ca_file: str = ""
    tls_cert: str = ""
    tls_key: str = ""
    options: dict[str, dict[str, Any]] = field(default_factory=dict)  # suite -> resolved options
    accept: dict[str, str] = field(default_factory=dict)  # acceptance thresholds: figure -> condition (accept.py)
    source: str = ""  # the plan file, if any
    # Where each value came from ("name", "oltp.users" -> "flag --users"), for --dry-run; not part of the run's record.
    origins: dict[str, str] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        del data["origins"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Plan":
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


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
        raise _not_known(where("", key), key, list(TOP_LEVEL) + known)

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
            raise _not_known(f"{where('', 'suites')} names '{name}', which", name, known, "suite")
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
                raise _not_known(where(name, key), key, list(schema))
            resolved[key] = schema[key].coerce(value, where(name, key))
            origins[key] = in_file(name, key)
        for key, value in set_values.get(name, {}).items():
            if key not in schema:
                raise _not_known(f"--set {name}.{key}", key, list(schema))
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
            raise _not_known(f"--set {item!r} names '{section}', which", section, known, "suite")
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
