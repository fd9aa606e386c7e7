"""How `refbench tune` writes the settings it tries into a plan (engine settings, a suite's options) and searches
them; the catalog of engine settings by what each relieves is refbench.engines.knobs (the verdict reads it too).
The knobs that address the bottleneck are tried first; the others for the same engine follow while the budget lasts.
"""

from __future__ import annotations

import os
import re
from typing import Any

from refbench.engines.knobs import (ENGINE_KNOBS, MEMORY_SUITES, ROW_STORES, Knob, evidence, ranked,  # noqa: F401  (tune's names)
                                   first_trials, trial_order)


def durability_kept(traded: str) -> str:
    """What tune says of a baseline whose servers traded durability for speed (report.verdict.durability)."""
    return (f"durability traded for speed by the baseline: {traded}; every trial and the tuned plan keep it (tune itself "
            "tries no such setting)")


def placement(directory: str) -> Knob:
    """The WAL (MariaDB: the redo log) on another device (the oltp suite's wal_dir): commits' flushes no longer queue
    behind data I/O."""
    return Knob("wal_dir", "option", "", ("flush", "write", "device"),
                "log flushes share the data's device; on a device of their own, commits do not wait behind data reads "
                "and checkpoint writes", choices=(directory,), suites=("oltp",))


# The plan option each engine setting lives in, per suite: its own option, or the engine's settings list.
OWN_OPTION = {
    ("oltp", "shared_buffers"): "shared_buffers", ("dss", "shared_buffers"): "shared_buffers",
    ("oltp", "innodb_buffer_pool_size"): "shared_buffers", ("dss", "innodb_buffer_pool_size"): "mariadb_buffer_pool",
    ("dss", "memory_limit"): "duckdb_memory_limit",
    ("dss", "threads"): "duckdb_threads", ("dw", "threads"): "duckdb_threads",
}
SETTINGS_LIST = {"postgres": "pg_settings", "mariadb": "mariadb_settings"}
DEFAULTS = {"shared_buffers": "128MB", "innodb_buffer_pool_size": "128M", "thread_handling": "one-thread-per-connection",
            "innodb_flush_method": "O_DIRECT", "wal_buffers": "4MB"}  # the servers' own, where the plan sets none


def engine_settings(suite: str, engine: str, options: dict[str, Any]) -> dict[str, str]:
    """The engine's settings a plan's resolved options give it: its list, then the options of its own."""
    out = dict(item.split("=", 1) for item in options.get(SETTINGS_LIST.get(engine, ""), []) or [] if "=" in item)
    for (s, name), option in OWN_OPTION.items():
        if s == suite and option in options and options[option] not in ("", 0) and _engine_of(name) == engine:
            out[name] = str(options[option])
    return {k.strip(): v.strip() for k, v in out.items()}


def _engine_of(name: str) -> str:
    return next(k.engine for k in ENGINE_KNOBS if k.name == name)


def with_settings(suite: str, engine: str, options: dict[str, Any], settings: dict[str, str]) -> dict[str, Any]:
    """The options with ``settings`` of ``engine`` written in: an own option set, or the list's entry replaced (the
    plan's other entries kept, so a changed list never drops the suite's defaults)."""
    out = dict(options)
    listed = list(out.get(SETTINGS_LIST.get(engine, ""), []) or [])
    for name, value in settings.items():
        option = OWN_OPTION.get((suite, name))
        if option:
            out[option] = int(value) if option == "duckdb_threads" else value
            continue
        listed = [item for item in listed if item.split("=", 1)[0].strip() != name] + [f"{name}={value}"]
    if engine in SETTINGS_LIST:
        out[SETTINGS_LIST[engine]] = listed
    return out


def memory_mb(storage: dict[str, Any]) -> float:
    """The memory a buffer cache may be searched up to: the baseline's cache bound when it had one (the bound stays,
    the split between the engine and the page cache moves), else a quarter of the host's memory."""
    bound = (storage.get("bound") or {}).get("bound_mb")
    return float(bound) if bound else os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e6 / 4


def search_range(knob: Knob, memory: float, cpus: int) -> tuple[float, float]:
    """(low, high) for a numeric knob; a memory knob up to three quarters of ``memory`` (MB), threads up to 2 × the CPUs."""
    if knob.name == "threads":
        return 1, max(2, 2 * cpus)
    if knob.high:
        return knob.low, knob.high
    return knob.low, max(knob.low * 2, memory * 0.75)


def current_value(knob: Knob, settings: dict[str, str]) -> str:
    return settings.get(knob.name, DEFAULTS.get(knob.name, ""))


def same_value(knob: Knob, a: str, b: str) -> bool:
    """Whether two values of a knob are one setting (512MB and 0.5GB are)."""
    return a == b or (knob.unit in ("MB", "M") and number(a) is not None and number(a) == number(b))


def number(text: str) -> float | None:
    """A setting's value as the number a knob searches (sizes in MB), when it is one."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)B?\s*", text or "", re.I)
    return float(m.group(1)) * {"": 1, "K": 1 / 1024, "M": 1, "G": 1024, "T": 1 << 20}[m.group(2).upper()] if m else None


def option_value(text: str) -> Any:
    """A suite option's value as a plan holds it: a number where the text is one."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text
