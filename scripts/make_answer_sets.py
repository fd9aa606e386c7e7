"""Makes the answer sets refbench keeps for the dss suite (src/refbench/suites/dss/kept_answers/sfSF.json.xz).

For one scale factor: generates the data with tpchgen-cli, loads DuckDB and a managed PostgreSQL as the suite does,
and asks both every query whose answer a default run can compute on data of a known state:

- stream 0 (the validation parameters) on the loaded data: the single queries and the power stream's queries that
  read neither orders nor lineitem;
- stream 0 after RF1 of refresh pair 0 (inside a transaction that is rolled back): the power stream's other queries;
- throughput streams 1 to --streams (the suite's default seed 1) on the loaded data.

Both engines' answers must agree at full precision (answers.engine_rule: strings, counts, keys and singletons exact,
sums, averages and ratios within a relative 1e-9); at SF 1 each engine's stream 0 must also meet the TPC-H reference
answers under 2.1.3.5. Only then is the set written, with PostgreSQL's answers (exact decimal arithmetic). A
disagreement ends the script with the queries that differ, and nothing is written.

Each engine's answers are kept in the work directory as they come (WORK/ENGINE/KEY.json), so an interrupted run
goes on where it stopped when started again with the same --work-dir.

    .venv/bin/python scripts/make_answer_sets.py --sf 1 --work-dir /var/tmp/answers-sf1
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import os
import sys
import time
from importlib import metadata
from pathlib import Path

from refbench import engines
from refbench.suites.dss import DssSuite, LOAD_SETTINGS, answers, datagen, refresh
from refbench.suites.dss.queries import min_streams, stream_queries

OUT = Path(__file__).resolve().parent.parent / "src" / "refbench" / "suites" / "dss" / answers.KEPT_DIR


def wanted(sf: float, streams: int, seed: int = 1) -> list[dict]:
    """Every (query, text, data) a default run answers on data of a known state, once each."""
    out: dict[str, dict] = {}

    def add(query: int, text: str, data: str, stream: str) -> None:
        out.setdefault(answers.answer_key(query, text, data),
                       {"query": query, "text": text, "data": data, "stream": stream})

    for q, text in stream_queries(0, sf):
        add(q, text, answers.LOADED, "0")
    for q, text in stream_queries(0, sf):
        if not answers.refresh_free(text):
            add(q, text, answers.with_rf1(0), "power")
    for s in range(1, streams + 1):
        for q, text in stream_queries(s, sf, seed):
            add(q, text, answers.LOADED, str(s))
    return list(out.values())


def compute(engine, name: str, sf: float, items: list[dict], work: Path) -> dict[str, list[list[str]]]:
    """Each item's answer on ``engine``, from the work directory where an earlier attempt left it."""
    done_dir = work / name
    done_dir.mkdir(parents=True, exist_ok=True)
    got: dict[str, list[list[str]]] = {}
    for data in (answers.LOADED, answers.with_rf1(0)):
        todo = [i for i in items if i["data"] == data]
        missing = [i for i in todo if not (done_dir / f"{_file(i)}.json").exists()]
        if missing:
            if data != answers.LOADED:
                engine.run("BEGIN")
                for statement in refresh.rf1_statements(sf, 0, name):
                    engine.run(statement)
            try:
                for i, item in enumerate(missing, 1):
                    t0 = time.monotonic()
                    rows = answers.as_expected(engine.run(item["text"])[0])
                    (done_dir / f"{_file(item)}.json").write_text(json.dumps(rows))
                    print(f"  {name}: Q{item['query']} stream {item['stream']} ({data}): {len(rows)} rows, "
                          f"{time.monotonic() - t0:.1f} s [{i}/{len(missing)}]", flush=True)
            finally:
                if data != answers.LOADED:
                    engine.run("ROLLBACK")
        for item in todo:
            got[answers.answer_key(item["query"], item["text"], item["data"])] = json.loads(
                (done_dir / f"{_file(item)}.json").read_text())
    return got


def _file(item: dict) -> str:
    return hashlib.sha256(answers.answer_key(item["query"], item["text"], item["data"]).encode()).hexdigest()[:24]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sf", type=float, required=True)
    parser.add_argument("--streams", type=int, default=0, help="throughput streams kept (default: the "
                        "specification's minimum for the scale factor, which a default run uses)")
    parser.add_argument("--work-dir", type=Path, required=True, help="data, databases and answers so far (kept)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    sf, streams = args.sf, args.streams or min_streams(args.sf)
    work = args.work_dir.absolute()
    work.mkdir(parents=True, exist_ok=True)
    work.chmod(0o755)  # the managed server's account reads the CSV and writes its data directory
    items = wanted(sf, streams)
    print(f"SF {sf:g}: {len(items)} answers (stream 0, the power stream after RF1, streams 1-{streams})", flush=True)
    datagen.generate(work / "data", sf)
    got, versions = {}, {}
    defaults = {k: DssSuite.options[k].default_for("standard") for k in ("shared_buffers", "pg_settings")}
    settings = {"shared_buffers": defaults["shared_buffers"], **LOAD_SETTINGS,
                **dict(s.split("=", 1) for s in defaults["pg_settings"])}
    for name, place in (("duckdb", engines.Placement(work / "tpch.duckdb")),
                        ("postgres", engines.Placement(work / "pgdata", settings=settings, workers=os.cpu_count() or 1))):
        engine = engines.open_engine(name, datagen.TPCH, place)
        engine.start()
        try:
            if not engine.loaded(sf):
                print(f"loading SF {sf:g} into {name}", flush=True)
                engine.load(work / "data", sf)
            engine.open()
            shown = engine.settings()
            versions[name] = shown.get("version") or shown.get("server_version", "")
            got[name] = compute(engine, name, sf, items, work)
        finally:
            engine.stop()
    wrong = []
    for item in items:
        key = answers.answer_key(item["query"], item["text"], item["data"])
        difference = answers.compare(item["query"], got["duckdb"][key], got["postgres"][key], between_engines=True)
        if difference:
            wrong.append(f"Q{item['query']} stream {item['stream']} ({item['data']}): DuckDB against PostgreSQL: "
                         f"{difference}")
        if sf == 1.0 and item["stream"] == "0" and item["data"] == answers.LOADED:
            for name in got:
                if difference := answers.compare(item["query"], got[name][key], answers.reference_answer(item["query"])):
                    wrong.append(f"Q{item['query']} on {name} against the TPC-H reference answers: {difference}")
    if wrong:
        print("the engines do not agree; nothing written:\n  " + "\n  ".join(wrong), file=sys.stderr)
        return 1
    kept = {"format": answers.KEPT_FORMAT, "sf": sf, "seed": 1, "streams": streams,
            "made_with": {"engines": versions, "tpchgen-cli": metadata.version("tpchgen-cli"),
                          "agreement": f"DuckDB and PostgreSQL, every answer: {answers.AGREEMENT}"
                                       + ("; stream 0 of both equal to the TPC-H reference answers under 2.1.3.5"
                                          if sf == 1.0 else ""),
                          "command": f"scripts/make_answer_sets.py --sf {sf:g}"
                                     + (f" --streams {args.streams}" if args.streams else "")},
            "answers": [{**{k: item[k] for k in ("query", "data", "stream")},
                         "sha256": answers.text_digest(item["text"]),
                         "rows": got["postgres"][answers.answer_key(item["query"], item["text"], item["data"])]}
                        for item in items]}
    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / answers.kept_file_name(sf)
    with lzma.open(target.with_suffix(".tmp"), "wt") as f:
        json.dump(kept, f, separators=(",", ":"))
    os.replace(target.with_suffix(".tmp"), target)
    print(f"written: {target} ({target.stat().st_size / 1e6:.2f} MB, {len(items)} answers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
