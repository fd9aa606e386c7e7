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
    sizes = Option(list, [4096], "", item=int, minimum=512)
    assert sizes.parse_flag("512,4k,1m", "--bs") == [512, 4096, 1048576]
    with pytest.raises(PlanError, match="--bs must not be an empty list"):
        sizes.parse_flag(",", "--bs")
    assert Option(float, 1.0, "").coerce(2, "x") == 2.0
    with pytest.raises(PlanError, match="must be an integer, not true"):
        Option(int, 1, "").coerce(True, "x")


def test_key_line_finds_keys_in_their_table():
    text = 'name = "a"\n[device]\niodepth = [1]\n[oltp]\niodepth = 3\n'
    assert _key_line(text, "", "name") == 1
    assert _key_line(text, "oltp", "iodepth") == 5
    assert _key_line(text, "", "oltp") == 4
    assert _key_line(text, "dss", "x") is None
