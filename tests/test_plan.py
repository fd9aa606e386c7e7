"""Bad plans and bad flags end with one sentence naming the key, a non-zero exit, and nothing written."""

from __future__ import annotations

import pytest

from refbench.plan import Option, PlanError, _key_line

BAD_PLANS = [
    ('name = "x"\nprofile = \n', ["plan.toml:2", "not valid TOML"]),
    ('name = "x"\nprofiel = "quick"\n', ["plan.toml:2", "profiel", "not a known key"]),
    ('suites = ["sleepy"]\n\n[sleepy]\ncases = 4\ncasess = 3\n', ["plan.toml:5", "[sleepy] casess", "not a known key"]),
    ('[sleepy]\ncases = "eight"\n', ["plan.toml:2", "[sleepy] cases", "must be an integer"]),
    ('[sleepy]\ncases = 0\n', ["plan.toml:2", "at least 1"]),
    ('[sleepy]\nsizes = [4096, 100]\n', ["plan.toml:2", "sizes", "at least 512"]),
    ('[sleepy]\nfail_check = "yes"\n', ["plan.toml:2", "fail_check", "true or false"]),
    ('profile = "fast"\n', ["plan.toml:1", "profile", "quick, standard, full"]),
    ('name = "has space"\n', ["plan.toml:1", "name", "letters, digits"]),
    ('suites = ["sleepy", "nosuch"]\n', ["plan.toml:1", "nosuch", "not a known suite"]),
    ('[nosuch]\nx = 1\n', ["plan.toml:1", "nosuch", "not a known key"]),
    ('sleepy = 3\n', ["plan.toml:1", "sleepy", "must be a table"]),
    ('engines = ["oracle"]\n', ["plan.toml:1", "engines", "duckdb, postgres"]),
]


def _assert_one_sentence_and_nothing_written(result, tmp_path, expected):
    assert result.code == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for part in expected:
        assert part in lines[0], (part, lines[0])
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("text,expected", BAD_PLANS)
def test_bad_plan_is_rejected_with_one_sentence(tmp_path, refbench, text, expected):
    (tmp_path / "plan.toml").write_text(text)
    result = refbench("run", "--plan", "plan.toml", "--runs-dir", str(tmp_path / "runs"))
    _assert_one_sentence_and_nothing_written(result, tmp_path, expected)


BAD_FLAGS = [
    (["sleepy", "--profile", "fast"], ["fast", "--profile"]),
    (["sleepy", "--cases", "many"], ["--cases", "must be an integer"]),
    (["sleepy", "--sizes", "4k,1"], ["--sizes", "at least 512"]),
    (["sleepy", "--no-such-flag"], ["No such option", "--no-such-flag"]),
    (["sleepy", "--set", "sleepy.cases"], ["--set", "suite.key=value"]),
    (["sleepy", "--set", "sleepy.nope=1"], ["--set sleepy.nope", "not a known key"]),
    (["run", "--plan", "missing.toml"], ["missing.toml", "does not exist"]),
    (["run", "--suite", "nosuch"], ["nosuch", "not a known suite"]),
    (["nosuchcommand"], ["No such command"]),
]


@pytest.mark.parametrize("args,expected", BAD_FLAGS)
def test_bad_flag_is_rejected_with_one_sentence(tmp_path, refbench, args, expected):
    result = refbench(*args, "--runs-dir", str(tmp_path / "runs"))
    _assert_one_sentence_and_nothing_written(result, tmp_path, expected)


@pytest.mark.live
def test_plan_flags_and_sets_override_the_file_in_order(tmp_path, refbench):
    (tmp_path / "plan.toml").write_text('name = "from-file"\nprofile = "standard"\n[sleepy]\ncases = 2\nsleep_s = 0\n')
    result = refbench("sleepy", "--plan", "plan.toml", "--cases", "3", "--runs-dir", "runs", "--name", "from-flag")
    assert result.code == 0, result.stderr
    import json
    from pathlib import Path

    meta = json.loads((Path(tmp_path) / result.last_line / "run.json").read_text())
    assert meta["name"] == "from-flag"
    assert meta["plan"]["profile"] == "standard"
    assert meta["plan"]["options"]["sleepy"]["cases"] == 3
    assert meta["plan"]["source"] == "plan.toml"


def test_option_parses_fio_style_sizes_and_lists():
    sizes = Option(list, [4096], "", item=int, minimum=512, maximum=2**30)
    assert sizes.parse_flag("512,4k,1m", "--bs") == [512, 4096, 1048576]
    with pytest.raises(PlanError, match="--bs must not be an empty list"):
        sizes.parse_flag(",", "--bs")
    assert Option(float, 1.0, "", minimum=0, maximum=9).coerce(2, "x") == 2.0
    with pytest.raises(PlanError, match="must be an integer, not true"):
        Option(int, 1, "", minimum=0, maximum=9).coerce(True, "x")


def test_key_line_finds_keys_in_their_table():
    text = 'name = "a"\n[device]\niodepth = [1]\n[oltp]\niodepth = 3\n'
    assert _key_line(text, "", "name") == 1
    assert _key_line(text, "oltp", "iodepth") == 5
    assert _key_line(text, "", "oltp") == 4
    assert _key_line(text, "dss", "x") is None


def test_list_flags_refuse_empty_and_repeated_items_and_negative_numbers_get_the_range_message():
    users = Option(list, [1], "", item=int, minimum=1, maximum=2**20)
    assert users.parse_flag("1, 2,4k", "--users") == [1, 2, 4096]
    for text in ("1,,2", "1,", ",1"):
        with pytest.raises(PlanError, match=rf"--users has an empty item in '{text}'; separate values with single commas\."):
            users.parse_flag(text, "--users")
    with pytest.raises(PlanError, match=r"^--users lists 2 twice\.$"):
        users.parse_flag("2,1,2", "--users")
    with pytest.raises(PlanError, match=r"^--users item -1 must be at least 1, not -1\.$"):
        users.parse_flag("-1", "--users")
    with pytest.raises(PlanError, match=r"^--w must be at least 1, not -1\.$"):
        Option(int, 1, "", minimum=1, maximum=9).parse_flag("-1", "--w")
    with pytest.raises(PlanError, match=r"^x must be a finite number, not nan\.$"):
        Option(float, 1.0, "", minimum=0, maximum=9).coerce(float("nan"), "x")


def test_what_the_plan_accepts_as_a_memory_size_the_engine_accepts_too():
    """The size checks are no looser than the engines: each size they accept DuckDB opens a database with, and the
    PostgreSQL server takes as shared_buffers; the ones they refuse are the typos the issue names."""
    import duckdb

    from refbench.engines.settings import check_server_settings, duckdb_size_problem, pg_size_problem
    from refbench.host.inventory import postgres_binary

    for size in ("1MB", "128MB", "1.5GB", "4 GiB", "4gb", "2TB", "16777216 bytes"):
        assert duckdb_size_problem(size) is None, size
        duckdb.connect(":memory:", config={"memory_limit": size}).close()
    for size in ("lots", "0", "-1MB", "100", "100KB", "1e3MB", ""):
        assert duckdb_size_problem(size), size

    for size in ("128MB", "1GB", "1.5GB", "16384", "8192kB", "128 MB"):
        assert pg_size_problem(size) is None, size
        if postgres_binary("postgres"):
            check_server_settings({"shared_buffers": size}, {})
    for size in ("lots", "0", "-1MB", "4gb", "1 G", ""):
        assert pg_size_problem(size), size


def test_server_settings_add_to_the_defaults_and_a_name_given_replaces_only_its_own():
    from refbench.plan import load_plan

    plan = load_plan(None, sets=['oltp.pg_settings=["commit_delay=100"]'], suites=["oltp"])
    assert plan.options["oltp"]["pg_settings"] == ["max_wal_size=1GB", "commit_delay=100"]
    assert plan.origins["oltp.pg_settings"].endswith("added to the defaults")
    plan = load_plan(None, sets=['dss.pg_settings=["commit_delay=100", "max_wal_size=8GB"]'], suites=["dss"])
    assert plan.options["dss"]["pg_settings"] == ["work_mem=64MB", "max_wal_size=8GB", "commit_delay=100"]
    assert load_plan(None, suites=["oltp"]).options["oltp"]["pg_settings"] == ["max_wal_size=1GB"]
