"""The manual: README.md (the front door) and docs/ (an mkdocs site, Material theme) build with `mkdocs build
--strict` without the network, and every `refbench …` command they quote is one the CLI has, with only flags its
own `--help` lists."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from functools import cache
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


def test_the_site_builds_strict_and_offline(tmp_path):
    """`mkdocs build --strict`: a broken link, a page missing from the nav, a missing snippet or anchor fails it; run
    in a network namespace of its own where the machine allows one, so a plugin that fetched anything would fail."""
    site = tmp_path / "site"
    build = [str(BIN / "mkdocs"), "build", "--strict", "--quiet", "--config-file", str(ROOT / "mkdocs.yml"),
             "--site-dir", str(site)]
    unshare = shutil.which("unshare")
    offline = unshare and subprocess.run([unshare, "--net", "true"], capture_output=True).returncode == 0
    result = subprocess.run(([unshare, "--net"] if offline else []) + build, cwd=ROOT, capture_output=True, text=True,
                            env=_env(), timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not result.stderr.strip(), result.stderr  # not even an INFO line of a skipped check
    for page in ("index", "BENCHMARKS", "tune", "waits", "troubleshooting"):
        assert (site / ("" if page == "index" else page) / "index.html").is_file(), page
    assert not (ROOT / "docs" / "site").exists() and not any((ROOT / "docs").glob("*.html"))  # no build output in docs/


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
