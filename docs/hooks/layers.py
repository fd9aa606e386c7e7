"""The map of docs/layers.md, drawn at build time from the code, so that it cannot drift from it.

An mkdocs hook (mkdocs.yml's ``hooks:``): it replaces the page's placeholder with the floors of the import-linter
contract "floors" in pyproject.toml (read with tomllib) and the imports measured between them in the real import
graph (grimp, as lint-imports builds it: imports under TYPE_CHECKING count). It lives outside the refbench package on
purpose: the contract is exhaustive, so a module inside refbench would have to be placed on a floor.

It fails the build, loudly, when the contract and the code disagree (a module of refbench on no floor, a floor naming
a module that is not there, a module on two floors) and when a module has no phrase in WHAT below, or WHAT names a
module that is on no floor: a new module gets words before the manual builds. ``draw`` is the generator;
tests/test_docs.py calls it directly.
"""

from __future__ import annotations

import html
import re
import sys
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PAGE = "layers.md"
PLACEHOLDER = "<!-- the map: docs/hooks/layers.py draws it here -->"
CONTRACT = "floors"

# What lives on each floor, one short phrase per top-level module of refbench (the table's third column).
WHAT = {
    "__main__": "`python -m refbench`: calls the command line",
    "cli": "the command line: one command per suite, and run, resume, report, compare, history…",
    "web": "`refbench serve`: the local dashboard of runs, trends and comparisons",
    "tune": "`refbench tune`: from what limits a stack to a change proven by measurement",
    "cluster": "several hosts at once (Dask): scheduler, workers, one run directory",
    "dryrun": "`run --dry-run`: the plan as a run would use it, nothing written",
    "runner": "runs a plan's suites case by case into a run directory; resumes",
    "accept": "a plan's `[accept]` thresholds, judged against a run",
    "report": "tables, charts, report.html, the verdict, compare, advice",
    "catalog": "the runs catalog (SQLite): history across runs",
    "figures": "a run's figures and the replicates behind each",
    "plan": "reads a plan file and checks it against the suites' options",
    "suites": "the Suite interface, its registry, and the five suites",
    "runstore": "the run directory: records, findings, raw output, crash-safe",
    "options": "the option type, the profiles, Plan and PlanError",
    "engines": "fio and the databases, behind one interface",
    "host": "the machine: inventory, tuning audit, telemetry, the cache bound",
    "records": "what a measurement produces: Case, Record, Finding, Table, Chart, Headline",
    "formats": "numbers for people, one way everywhere",
    "fileio": "atomic writes; careful reads of the files a user hands in",
    "children": "processes and files that must not outlive refbench",
    "progress": "what a run shows while it works",
    "estimate": "the one estimator: intervals and tests of a change",
    "measure": "the steady-state test",
    "thresholds": "the `[accept]` table's syntax",
    "timings": "how long each suite takes at each profile",
    "redaction": "passwords masked, and kept apart from the run",
    "exhaustion": "out of space, memory or connections, in words to act on",
    "errors": "UserError: one sentence, never a traceback",
    "removal": "removal that cannot leave the place it was meant for",
}


class MapError(ValueError):
    """The contract, the code and WHAT disagree: the map is not drawn."""


@dataclass(frozen=True)
class Floor:
    number: int                # 1 at the top
    modules: tuple[str, ...]   # the top-level modules of the container on it, as the contract names them
    independent: bool          # joined by "|": they may not import each other


@dataclass
class Measured:
    floors: list[Floor]
    sizes: dict[str, int]      # module -> modules inside it (0 for a plain module)
    imports: Counter           # (from floor, to floor) -> imports between different top-level modules
    container: Counter         # from floor -> imports of the container itself (its __init__)


def contract(pyproject: Path, contract_id: str = CONTRACT) -> tuple[str, list[str]]:
    """The container and the layers (top first) of the layers contract ``contract_id`` in ``pyproject``."""
    contracts = tomllib.loads(pyproject.read_text())["tool"]["importlinter"]["contracts"]
    found = [c for c in contracts if c.get("id") == contract_id]
    if len(found) != 1 or found[0].get("type") != "layers" or len(found[0].get("containers", [])) != 1:
        raise MapError(f"{pyproject}: no layers contract with id {contract_id!r} and one container to draw")
    return found[0]["containers"][0], list(found[0]["layers"])


def floors_of(layers: list[str]) -> list[Floor]:
    floors = []
    for number, layer in enumerate(layers, 1):
        independent = ":" not in layer
        names = tuple(name.strip() for name in re.split(r"[|:]", layer))
        if not all(re.fullmatch(r"[A-Za-z_]\w*", name) for name in names):
            raise MapError(f"floor {number} ({layer!r}) is not module names joined by '|' or ':'")
        floors.append(Floor(number, names, independent))
    return floors


def measure(layers: list[str], graph: Any, container: str = "refbench") -> Measured:
    """The floors of ``layers`` and the imports between them in ``graph`` (a grimp ImportGraph); a MapError when
    they disagree."""
    floors = floors_of(layers)
    where: dict[str, int] = {}
    for floor in floors:
        for name in floor.modules:
            if name in where:
                raise MapError(f"{container}.{name} is on two floors of the contract: {where[name]} and {floor.number}")
            where[name] = floor.number
    children = {m.split(".")[-1] for m in graph.find_children(container)}
    if unplaced := sorted(children - set(where)):
        raise MapError(f"{', '.join(f'{container}.{n}' for n in unplaced)}: on no floor of the contract; every module "
                       "of the package has its floor (pyproject.toml, [tool.importlinter]): place it there")
    if absent := sorted(set(where) - children):
        raise MapError(f"the contract places {', '.join(absent)}, which {container} does not have")
    prefix = container + "."
    imports: Counter = Counter()
    to_container: Counter = Counter()
    for module in graph.modules:
        if not module.startswith(prefix):
            continue
        top = module[len(prefix):].split(".")[0]
        for imported in graph.find_modules_directly_imported_by(module):
            if imported == container:
                to_container[where[top]] += 1
            elif imported.startswith(prefix) and (other := imported[len(prefix):].split(".")[0]) != top:
                imports[where[top], where[other]] += 1
    sizes = {name: len(graph.find_descendants(prefix + name)) for name in where}
    return Measured(floors, sizes, imports, to_container)


def draw(layers: list[str], graph: Any, what: dict[str, str] = WHAT, container: str = "refbench") -> str:
    """The map, as markdown with the drawing in HTML: the generator of docs/layers.md's map."""
    measured = measure(layers, graph, container)
    placed = [name for floor in measured.floors for name in floor.modules]
    if unsaid := [name for name in placed if not what.get(name, "").strip()]:
        raise MapError(f"no words for {', '.join(unsaid)} in docs/hooks/layers.py's WHAT: say in a short phrase what "
                       "lives there")
    if stale := sorted(set(what) - set(placed)):
        raise MapError(f"docs/hooks/layers.py's WHAT describes {', '.join(stale)}, on no floor of the contract")
    return _drawing(measured, container) + "\n\n" + _table(measured, what, container) + "\n"


def _chips(measured: Measured, floor: Floor, container: str) -> list[str]:
    peak = max(measured.imports.values(), default=1)
    chips = []
    for (source, target), n in sorted(measured.imports.items()):
        if source != floor.number:
            continue
        kind = "down" if target > source else "up" if target < source else "across"
        arrow = {"down": "↓", "up": "↑", "across": "↔"}[kind]
        names = " | ".join(measured.floors[target - 1].modules)
        against = kind == "up" or (kind == "across" and floor.independent)
        title = f"{n} import{'s' * (n != 1)} from floor {target} ({names})" + (": against the contract" if against
                                                                             else "")
        chips.append(f'<span class="floors-to floors-{kind}" data-to="{target}" data-imports="{n}" '
                     f'style="--floors-weight: {n / peak:.2f}" title="{html.escape(title)}">'
                     f'<span class="floors-to-floor">{arrow} {target}</span><b>{n}</b></span>')
    if n := measured.container[floor.number]:
        chips.append(f'<span class="floors-to floors-root" data-to="{container}" data-imports="{n}" '
                     f'title="{n} import{"s" * (n != 1)} of the package {container} itself (its __init__)">'
                     f'<span class="floors-to-floor">{container}</span><b>{n}</b></span>')
    return chips


def _drawing(measured: Measured, container: str) -> str:
    rows = []
    for floor in measured.floors:
        boxes = []
        for name in floor.modules:
            size = measured.sizes[name]
            count = (f'<span class="floors-size" title="a package of {_modules(size)}">{size}</span>' if size else "")
            boxes.append(f'<span class="floors-module{" floors-package" if size else ""}" data-module="{name}">'
                         f"<code>{html.escape(name)}</code>{count}</span>")
        chips = _chips(measured, floor, container)
        down = (f'<div class="floors-imports"><span class="floors-label">imports from</span>{"".join(chips)}</div>'
                if chips else '<div class="floors-imports floors-ground">imports from no floor</div>')
        rows.append(f'<li class="floors-floor" id="floor-{floor.number}" data-floor="{floor.number}" '
                    f'data-modules="{" ".join(floor.modules)}"><span class="floors-number">{floor.number}</span>'
                    f'<div class="floors-body"><div class="floors-modules">{"".join(boxes)}</div>{down}</div></li>')
    return ('<ol class="floors-map" aria-label="refbench\'s floors, top to bottom">\n' + "\n".join(rows) + "\n</ol>")


def _table(measured: Measured, what: dict[str, str], container: str) -> str:
    """The table under the drawing, in HTML (a table of the theme's, in a box of its own that lets a phone show each
    floor as a card): each floor, its modules, what lives there, and the floors it imports from (measured)."""
    rows = []
    for floor in measured.floors:
        modules = " · ".join(f"<code>{html.escape(name)}</code>" + (f" ({_modules(measured.sizes[name])})"
                                                                    if measured.sizes[name] else "")
                             for name in floor.modules)
        said = (_inline(what[floor.modules[0]]) if len(floor.modules) == 1 else
                "<br>".join(f"<code>{html.escape(name)}</code>: {_inline(what[name])}" for name in floor.modules))
        sources = [f'<a href="#floor-{target}">{target}</a>: {n}'
                   for (source, target), n in sorted(measured.imports.items()) if source == floor.number]
        if n := measured.container[floor.number]:
            sources.append(f"<code>{container}</code> itself: {n}")
        rows.append(f'<tr data-floor="{floor.number}"><td data-label="Floor"><a href="#floor-{floor.number}">'
                    f'{floor.number}</a></td><td data-label="Modules">{modules}</td>'
                    f'<td data-label="What lives there">{said}</td>'
                    f'<td data-label="Imports from">{", ".join(sources) or "—"}</td></tr>')
    return ('<div class="floors-table"><table>\n<thead><tr><th>Floor</th><th>Modules</th><th>What lives there</th>'
            "<th>Imports from (floor: imports)</th></tr></thead>\n<tbody>\n" + "\n".join(rows)
            + "\n</tbody>\n</table></div>")


def _modules(n: int) -> str:
    return f"{n} module{'s' * (n != 1)}"


def _inline(phrase: str) -> str:
    """A phrase of WHAT in HTML: `code` as code, the rest as text."""
    parts = html.escape(phrase, quote=False).split("`")
    return "".join(f"<code>{part}</code>" if i % 2 else part for i, part in enumerate(parts))


def _root(config: Any) -> Path:
    return Path(config["config_file_path"]).resolve().parent


def on_page_markdown(markdown: str, *, page: Any, config: Any, files: Any) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    from mkdocs.exceptions import PluginError

    if markdown.count(PLACEHOLDER) != 1:
        raise PluginError(f"docs/{PAGE} must hold the map's placeholder once: {PLACEHOLDER}")
    root = _root(config)
    try:
        container, layers = contract(root / "pyproject.toml")
        source = root / "src"
        if source.is_dir() and str(source) not in sys.path:
            sys.path.insert(0, str(source))  # the checkout's own code, whatever refbench the environment installed
        import grimp

        graph = grimp.build_graph(container, include_external_packages=False, cache_dir=None)
        return markdown.replace(PLACEHOLDER, draw(layers, graph, container=container))
    except MapError as exc:
        raise PluginError(f"docs/{PAGE}: the map cannot be drawn: {exc}") from exc


def on_serve(server: Any, *, config: Any, builder: Any) -> Any:
    """`mkdocs serve` redraws the map when the contract or the code changes."""
    root = _root(config)
    server.watch(str(root / "pyproject.toml"))
    server.watch(str(root / "src" / "refbench"))
    return server
