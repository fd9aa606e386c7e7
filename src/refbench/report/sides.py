"""What a comparison's sides hold besides their figures: each run once (a run is one replicate of one
configuration), and the durability a side's servers traded for speed. Apart from refbench.report.compare, whose
code decides the answers and is proved as it is (tests/proof.py)."""

from __future__ import annotations

from pathlib import Path

from refbench.errors import UserError
from refbench.report.compare import letters_of
from refbench.report.verdict import durability
from refbench.runstore import Run


def distinct_sides(sides: list[list[Run]]) -> tuple[list[list[Run]], list[str]]:
    """Each run once: named twice in a side it counts once (and that is said), and in two sides it is refused."""
    letter = letters_of(len(sides))
    kept, said, side_of = [], [], {}
    for number, side in enumerate(sides):
        paths = [run.path.resolve() for run in side]
        unique: dict[Path, Run] = dict(zip(paths, side))
        if twice := [run.path.name for path, run in unique.items() if paths.count(path) > 1]:
            said.append(f"{letter[number]} names {', '.join(twice)} more than once: a run is one replicate, so it "
                        "counts once.")
        for path, run in unique.items():
            if (first := side_of.setdefault(path, number)) != number:
                raise UserError(f"run {run.path.name} is on two sides ({letter[first]} and {letter[number]}): a run "
                                "is one measurement of one configuration, so it can be on one side only.")
        kept.append(list(unique.values()))
    return kept, said


def durability_lines(sides: list[list[Run]]) -> list[str]:
    """Per suite whose servers traded durability for speed on a side (report.verdict.durability), which sides did, with
    what, and which kept every commit: a change may be the settings' rather than the stack's."""
    out = []
    for suite in dict.fromkeys(name for side in sides for run in side for name in run.plan.suites):
        traded = {}  # letter -> what its runs traded, "" for a side that kept every commit
        for letter, side in zip(letters_of(len(sides)), sides):
            if ran := [run for run in side if suite in run.plan.suites]:
                traded[letter] = "; ".join(dict.fromkeys(filter(None, (durability(run, suite, run.records(suite))
                                                                      for run in ran))))
        if any(traded.values()):
            kept = [letter for letter, said in traded.items() if not said]
            out.append(f"{suite}: durability traded for speed by "
                       + " and ".join(f"{letter} ({said})" for letter, said in traded.items() if said)
                       + (f"; {' and '.join(kept)} kept every commit" if kept else ""))
    return out
