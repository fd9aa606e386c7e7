"""A plan's options and the plan itself: the option type every suite's schema is made of, the top-level keys, the
profiles, and PlanError. What reads a plan file and checks it against the suites' schemas is refbench.plan.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from refbench import timings
from refbench.engines import names as engine_names
from refbench.errors import UserError

PROFILES = ("quick", "standard", "full")
# Every profile measures its headline cases three times: one measurement a side cannot tell a 5% change from the
# noise of a shared host, and the seconds of one run are not replicates (refbench compare, estimate.py).
REPEATS_BY_PROFILE = {"quick": 3, "standard": 3, "full": 3}
# The repeats a plan gets when neither it nor --repeats says (a CI smoke job that wants one pass: 1).
REPEATS_VARIABLE = "REFBENCH_REPEATS"
ENGINES = engine_names()  # the registry's: a new engine module is a new choice


class PlanError(UserError):
    pass


SETTINGS_HELP = "Managed-server settings, name=value, added to the defaults (a name given replaces its default)."


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
    # A list of name=value settings that adds to the default's: a setting the user names replaces only that one.
    adds_settings: bool = False
    unit: str = ""  # what a number counts, said with the bound it breaks: "s", "bytes", "MB", "%"

    def __post_init__(self) -> None:
        # A number without both bounds reaches a run unchecked (a timeout of 1e300 s overflows mid-run): an option
        # is not defined without them.
        if (self.item if self.kind is list else self.kind) in (int, float) and None in (self.minimum, self.maximum):
            raise TypeError(f"a numeric option needs a minimum and a maximum: {self.help!r}")

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
                            f"{suggestion(value, self.choices)}.")
        if self.minimum is not None and value < self.minimum:
            raise PlanError(f"{where} must be at least {amount(self.minimum, self.unit)}, not {value!r}.")
        if self.maximum is not None and value > self.maximum:
            raise PlanError(f"{where} must be at most {amount(self.maximum, self.unit)}, not {value!r}.")
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


DAY_S = 86_400
WEEK_S = 7 * DAY_S  # the longest a measured window runs: beyond any paper's, and a typo's 1e9 s is refused
SEED_MAX = 2**31 - 1  # every generator and SQL integer takes it
PIB = 2**50
SF_MAX = 100_000  # TPC-H's largest scale factor (100 TB)


def amount(value: float, unit: str = "") -> str:
    """A bound as people read it: 604,800 s (7 days), 1,125,899,906,842,624 bytes (1 PiB), 99%, 0.001."""
    number = f"{int(value):,}" if float(value).is_integer() else f"{value:g}"
    if unit == "%":
        return f"{number}%"
    said = f"{number} {unit}".rstrip()
    if unit == "s" and value >= 3600 and value % 3600 == 0:
        days, hours = divmod(int(value) // 3600, 24)
        said += f" ({days} day{'s' * (days > 1)})" if not hours else f" ({int(value) // 3600} h)"
    elif unit == "bytes" and value >= 1024 and (exponent := int(value).bit_length() - 1) % 10 == 0 and \
            int(value) == 2**exponent:
        said += f" (1 {' KMGTPE'[exponent // 10]}iB)"
    return said


def suggestion(word: Any, known: Any) -> str:
    """ " (did you mean 'x'?)" for a near miss among ``known``, else "". """
    if not isinstance(word, str):
        return ""
    close = difflib.get_close_matches(word, [str(k) for k in known], n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def not_known(where: str, word: str, known: list[str], what: str = "key") -> PlanError:
    hint = suggestion(word, known)
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
    repeats: int = 0  # 0 until load_plan resolves it: the profile's (REPEATS_BY_PROFILE)
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


def added_settings(defaults: list[str], given: list[str]) -> list[str]:
    """``given`` name=value settings added to ``defaults``: one the user names replaces that default in its place;
    the others follow in the user's order."""
    def name(item: str) -> str:
        return item.split("=", 1)[0].strip()

    replacing = {name(item): item for item in given}
    out = [replacing.pop(name(item), item) for item in defaults]
    return out + [item for item in given if name(item) in replacing]
