"""The manual: README.md (the front door) and docs/ (an mkdocs site, Material theme) build with `mkdocs build
--strict` without the network, and every `refbench …` command they quote is one the CLI has, with only flags its
own `--help` lists."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections import Counter
from functools import cache
from html.parser import HTMLParser
from pathlib import Path

import pytest

from refbench.timings import SUITES  # what `refbench SUITE …` stands for

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent  # the venv's: mkdocs and refbench are installed beside this Python
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^[ \t]*```([^\n]*)\n(.*?)^[ \t]*```[ \t]*$", re.S | re.M)
INLINE = re.compile(r"`([^`\n]+(?:\n[^`\n]+)?)`")  # an inline code span, which may cross one line break
# A command starts at "refbench" followed by a word (not "refbench:" of an error message, nor `refbench.estimate`).
COMMAND = re.compile(r"(?:^|(?<=[\s($/]))refbench[ \t]+(?=[A-Za-z-])")
# Where a quoted command ends: a comment, a pipe or list into another command, a closing `$(…)`.
END = re.compile(r"\s#\s|\s\|\s+(?!-)|\s;|\s&&|\)\s*$|\)\s|\)$")
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _env() -> dict[str, str]:
    # NO_MKDOCS_2_WARNING: Material's banner about MkDocs 2.0 and its own end of life, printed on every build
    return {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb", "NO_MKDOCS_2_WARNING": "1"}


def quoted_commands(text: str) -> list[str]:
    """Every `refbench …` command quoted in a page's code blocks and inline code, one string each."""
    # A plan's TOML quotes no command (its comments are prose); in a shell block a comment is prose too.
    blocks = [m.group(2) for m in FENCE.finditer(text) if m.group(1).strip() != "toml"]
    prose = FENCE.sub("", text)
    pieces = [re.split(r"\s#\s", line)[0] for block in blocks for line in block.replace("\\\n", " ").splitlines()]
    pieces += [m.group(1) for m in INLINE.finditer(prose)]
    pieces = [" ".join(piece.split()) for piece in pieces]
    commands = []
    for piece in pieces:
        found = list(COMMAND.finditer(piece))
        for i, match in enumerate(found):
            rest = piece[match.end():found[i + 1].start() if i + 1 < len(found) else None]
            end = END.search(rest)
            commands.append("refbench " + (rest[:end.start()] if end else rest).strip())
    return commands


# Every command's --help, rendered by the CLI's own main() in one process (a process per command took 1 s each).
HELPS = r"""
import contextlib, io, re, sys
from refbench.cli import main

def render(words):
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        try:
            main([*words, "--help"])
        except SystemExit as exc:
            assert not exc.code, (words, exc.code)
    return buffer.getvalue()

top = render([])
commands = re.findall(r"^  ([a-z][a-z-]*)\s", top.split("Commands:", 1)[1].split("\n\n", 1)[0], re.M)
for words in [[]] + [[name] for name in commands]:
    sys.stdout.write("\0" + " ".join(words) + "\n" + (top if not words else render(words)))
"""


@cache
def helps() -> dict[str, str]:
    result = subprocess.run([sys.executable, "-c", HELPS], capture_output=True, text=True, env=_env(), timeout=120)
    assert result.returncode == 0, result.stderr
    return dict(part.split("\n", 1) for part in result.stdout.split("\0")[1:])


def help_text(*words: str) -> str:
    return helps()[" ".join(words)]


@cache
def subcommands() -> frozenset[str]:
    listing = help_text().split("Commands:", 1)[1].split("\n\n", 1)[0]  # up to the examples
    return frozenset(re.findall(r"^  ([a-z][a-z-]*)\s", listing, re.M))


@cache
def global_flags() -> frozenset[str]:
    """The flags every command takes: the app's own, and --debug (its help: "add --debug to any command")."""
    top = help_text()
    flags = set(FLAG.findall(top.split("Options:", 1)[1].split("Commands:", 1)[0])) | {"--help"}
    return frozenset(flags | ({"--debug"} if "--debug to any command" in top else set()))


def problems(command: str) -> list[str]:
    """What is wrong with a quoted command: a command refbench does not have, a flag its --help does not list."""
    words = command.split()[1:]
    first = words[0].rstrip(",.:;") if words else ""  # "(refbench runs, history, serve)" names `refbench runs`
    if first.startswith("-"):  # `refbench --version`
        commands = [()]
    elif first.isupper():  # a placeholder: `refbench SUITE --profile …` holds for every suite
        commands = [(name,) for name in {"SUITE": SUITES, "COMMAND": sorted(subcommands())}.get(first, ())]
        if not commands:
            return [f"{command!r}: {first} stands for no known set of commands"]
    elif first in subcommands():
        commands = [(first,)]
    else:
        return [f"{command!r}: refbench has no command {first!r} (it has {', '.join(sorted(subcommands()))})"]
    found = []
    for words in commands:
        known = set(FLAG.findall(help_text(*words))) | global_flags()
        found += [f"{command!r}: refbench {' '.join(words)} --help has no {flag}"
                  for flag in FLAG.findall(command) if flag not in known]
    return found


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """The site, built once for this file's tests: `mkdocs build --strict`, in a network namespace of its own where
    the machine allows one (so a plugin or hook that fetched anything would fail)."""
    site = tmp_path_factory.mktemp("docs") / "site"
    build = [str(BIN / "mkdocs"), "build", "--strict", "--quiet", "--config-file", str(ROOT / "mkdocs.yml"),
             "--site-dir", str(site)]
    unshare = shutil.which("unshare")
    offline = unshare and subprocess.run([unshare, "--net", "true"], capture_output=True).returncode == 0
    result = subprocess.run(([unshare, "--net"] if offline else []) + build, cwd=ROOT, capture_output=True, text=True,
                            env={**_env(), "PYTHONDONTWRITEBYTECODE": "1"}, timeout=300)  # no __pycache__ in docs/hooks
    return result, site


def test_the_site_builds_strict_and_offline(built):
    """`mkdocs build --strict`: a broken link, a page missing from the nav, a missing snippet or anchor fails it, and
    so does the map of layers.md when the contract and the code disagree."""
    result, site = built
    assert result.returncode == 0, result.stdout + result.stderr
    assert not result.stderr.strip(), result.stderr  # not even an INFO line of a skipped check
    for page in ("index", "BENCHMARKS", "tune", "waits", "troubleshooting", "layers"):
        assert (site / ("" if page == "index" else page) / "index.html").is_file(), page
    assert not (ROOT / "docs" / "site").exists() and not any((ROOT / "docs").glob("*.html"))  # no build output in docs/
    assert not (site / "hooks").exists()  # the map's hook is not a page of the site


def test_every_page_is_in_the_nav():
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in PAGES[1:]:
        assert re.search(rf":\s*{re.escape(page.name)}\s*$", nav, re.M), f"{page.name} is not in mkdocs.yml's nav"


def test_the_readmes_links_lead_somewhere():
    """The README is not part of the site, so mkdocs does not check its links: each relative one names a file that is
    there and, with #anchor, a heading of that page (as the site's table of contents makes its anchors)."""
    from markdown.extensions.toc import slugify

    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", FENCE.sub("", readme))
    assert len(links) > 20, links
    for link in links:
        if re.match(r"[a-z]+:", link):
            continue
        path, _, anchor = link.partition("#")
        assert (ROOT / path).is_file(), link
        if anchor:
            headings = re.findall(r"^#+\s+(.*)$", FENCE.sub("", (ROOT / path).read_text()), re.M)
            assert anchor in {slugify(re.sub(r"[`*]", "", h), "-") for h in headings}, link


def test_the_commands_quoted_are_the_clis():
    """Every `refbench …` in README.md and docs/*.md: the command exists, and each --flag it uses is in that command's
    --help (for `refbench SUITE …`, in every suite's)."""
    found, counted = [], 0
    for page in PAGES:
        for command in quoted_commands(page.read_text()):
            counted += 1
            found += [f"{page.relative_to(ROOT)}: {problem}" for problem in problems(command)]
    assert counted > 100, counted  # the extraction still finds the commands
    assert not found, "\n".join(found)


@pytest.mark.parametrize("text, commands", [
    ("```sh\nrefbench run --plan lab.toml --dry-run   # what it would run\n```",
     ["refbench run --plan lab.toml --dry-run"]),
    ("```\nA=$(refbench run --plan a.toml | tail -1)\nrefbench scheduler / refbench worker --name n\n```",
     ["refbench run --plan a.toml", "refbench scheduler /", "refbench worker --name n"]),
    ("```\nrefbench tune --suite oltp \\\n    --budget 45m\n```", ["refbench tune --suite oltp --budget 45m"]),
    ("with `refbench clean --all-work\n[--runs-dir DIR]` and `refbench.estimate`, `refbench`: error",
     ["refbench clean --all-work [--runs-dir DIR]"]),
    ("```\nrefbench: lab.toml:2: profiel is not a known key\n```", []),
    ("```toml\n[oltp]  # without a dsn, refbench starts its own\n```\n```sh\nrefbench host  # refbench says\n```",
     ["refbench host"]),
    ("`refbench clean RUN | --all-work`", ["refbench clean RUN | --all-work"]),
])
def test_commands_are_found_as_quoted(text, commands):
    assert quoted_commands(text) == commands


def test_a_wrong_flag_or_command_is_caught():
    assert problems("refbench run --plan lab.toml --dry-run") == []
    assert problems("refbench SUITE --profile quick --plan FILE --debug") == []
    assert problems("refbench COMMAND --help") == [] and problems("refbench COMMAND --plan x")
    assert problems("refbench run --no-such-flag")
    assert problems("refbench frobnicate --plan x")
    assert len(problems("refbench SUITE --warehouses 4")) == len(SUITES) - 1  # oltp's alone


# ---- the map (docs/layers.md): drawn by docs/hooks/layers.py from pyproject's contract and grimp's import graph ----

def _hook():
    """docs/hooks/layers.py, the mkdocs hook that draws the map, as a module (it is not part of refbench)."""
    spec = importlib.util.spec_from_file_location("refbench_docs_layers_hook", ROOT / "docs" / "hooks" / "layers.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _layers() -> list[str]:
    """The floors contract's layers, top first, read here on their own (not through the hook)."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (floors,) = [c for c in contracts if c["id"] == "floors"]
    assert floors["type"] == "layers" and floors["containers"] == ["refbench"]
    return floors["layers"]


def _names(layer: str) -> list[str]:
    return [name.strip() for name in re.split(r"[|:]", layer)]


@cache
def _graph():
    import grimp

    return grimp.build_graph("refbench", include_external_packages=False, cache_dir=None)


class _Map(HTMLParser):
    """What the built page shows: each floor of the drawing (its number, modules, boxes, and the imports it counts
    to each floor), and each row of the table under it."""

    def __init__(self):
        super().__init__()
        self.floors: list[dict] = []
        self.rows: list[dict] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "li" and "floors-floor" in classes:
            self.floors.append({"floor": int(a["data-floor"]), "modules": a["data-modules"].split(), "boxes": {},
                                "imports": {}})
        elif tag == "span" and "floors-module" in classes:
            self.floors[-1]["boxes"][a["data-module"]] = None
            self._box = a["data-module"]
        elif tag == "span" and "floors-size" in classes:
            self._size = True
        elif tag == "span" and "floors-to" in classes:
            self.floors[-1]["imports"][a["data-to"]] = int(a["data-imports"])
        elif tag == "tr" and "data-floor" in a:
            self.rows.append({"floor": int(a["data-floor"]), "cells": []})
        elif tag == "td" and self.rows:
            self._cell = []

    def handle_data(self, data):
        if getattr(self, "_size", False):
            self.floors[-1]["boxes"][self._box] = int(data)
            self._size = False
        if self._cell is not None:
            self._cell.append(data)

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self.rows[-1]["cells"].append("".join(self._cell))
            self._cell = None


@pytest.fixture(scope="module")
def the_map(built) -> _Map:
    result, site = built
    assert result.returncode == 0, result.stdout + result.stderr
    parsed = _Map()
    parsed.feed((site / "layers" / "index.html").read_text())
    return parsed


def test_the_map_shows_every_floor_of_the_contract_in_order(the_map):
    layers = _layers()
    assert len(layers) > 5
    assert [f["floor"] for f in the_map.floors] == list(range(1, len(layers) + 1))
    assert [f["modules"] for f in the_map.floors] == [_names(layer) for layer in layers]
    assert [list(f["boxes"]) for f in the_map.floors] == [_names(layer) for layer in layers]
    assert [row["floor"] for row in the_map.rows] == list(range(1, len(layers) + 1))
    for row, layer in zip(the_map.rows, layers):
        number, modules, said, imports = row["cells"]
        assert number == str(row["floor"])
        assert re.findall(r"[A-Za-z_]\w*(?= \(\d+ modules?\)|(?: · |$))", modules) == _names(layer), modules
        assert said.strip() and said != "—"


def test_every_module_of_refbench_is_on_its_floor_on_the_map(the_map):
    """grimp's children of refbench, each in the box on the floor the contract gives it; a package's box with how
    many modules it holds."""
    graph = _graph()
    floor_of = {name: number for number, layer in enumerate(_layers(), 1) for name in _names(layer)}
    children = sorted(module.removeprefix("refbench.") for module in graph.find_children("refbench"))
    assert len(children) > 20 and "suites" in children and "cli" in children
    for name in children:
        floor = the_map.floors[floor_of[name] - 1]
        assert floor["floor"] == floor_of[name] and name in floor["boxes"], name
        inside = len(graph.find_descendants(f"refbench.{name}"))
        assert floor["boxes"][name] == (inside or None), (name, inside)
        assert [f["floor"] for f in the_map.floors if name in f["boxes"]] == [floor_of[name]], name


def test_the_imports_between_floors_on_the_map_are_the_codes(the_map):
    """Each floor's counts, to each other floor (and to the package refbench itself), computed here from grimp:
    one per pair of modules, one importing the other, where the two are in different top-level modules."""
    graph = _graph()
    floor_of = {name: number for number, layer in enumerate(_layers(), 1) for name in _names(layer)}
    expected: dict[int, Counter] = {number: Counter() for number in floor_of.values()}
    for importer in graph.modules:
        if importer == "refbench":
            continue
        top = importer.split(".")[1]
        for imported in graph.find_modules_directly_imported_by(importer):
            if imported == "refbench":
                expected[floor_of[top]]["refbench"] += 1
            elif (other := imported.split(".")[1]) != top:
                expected[floor_of[top]][str(floor_of[other])] += 1
    assert sum(sum(c.values()) for c in expected.values()) > 100
    assert expected[floor_of["suites"]][str(floor_of["engines"])] > 0  # the suites ask the engines' registry
    shown = {f["floor"]: Counter(f["imports"]) for f in the_map.floors}
    assert shown == expected
    for row in the_map.rows:  # the table's column says the same
        numbers = dict(re.findall(r"(\d+|refbench itself): (\d+)", row["cells"][3]))
        assert {k.replace(" itself", ""): int(v) for k, v in numbers.items()} == expected[row["floor"]]
    assert all(int(to) > floor for floor, counts in shown.items() for to in counts if to != "refbench"), \
        "an import up a floor or across one: lint-imports should have refused it"


def test_the_map_refuses_a_module_on_no_floor_and_one_without_words():
    """The generator, called directly: a contract that leaves out a module of refbench, one that names a module
    refbench does not have, and a module with no phrase each fail, naming the module; the real ones draw."""
    hook, graph, layers = _hook(), _graph(), _layers()
    drawn = hook.draw(layers, graph)
    assert all(f'data-module="{name}"' in drawn for layer in layers for name in _names(layer))
    crowded = max(range(len(layers)), key=lambda i: len(_names(layers[i])))
    left_out = _names(layers[crowded])[-1]
    fake = [*layers[:crowded], " | ".join(_names(layers[crowded])[:-1]), *layers[crowded + 1:]]
    with pytest.raises(hook.MapError, match=rf"refbench\.{left_out}\b.*on no floor"):
        hook.draw(fake, graph)
    with pytest.raises(hook.MapError, match=r"\bnosuchmodule\b"):
        hook.draw([*layers[:-1], layers[-1] + " | nosuchmodule"], graph)
    words = {name: phrase for name, phrase in hook.WHAT.items() if name != "runner"}
    with pytest.raises(hook.MapError, match=r"no words for runner\b"):
        hook.draw(layers, graph, what=words)
