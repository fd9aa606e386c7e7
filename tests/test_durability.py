"""A setting that trades durability for speed (fsync=off and its kind) is said wherever the figures it bought are:
the verdict, why, compare and tune."""

from __future__ import annotations

import json

import pytest

from refbench.engines import mariadb
from refbench.engines.settings import durability_traded, settings_dict

TINY = ["--warehouses", "1", "--rampup-s", "1", "--duration-s", "3", "--users", "1"]


def test_the_settings_that_trade_durability_are_the_engines_manuals_ones():
    postgres = ["fsync=off", "full_page_writes=0", "synchronous_commit=local", "wal_sync_method=open_datasync",
                "work_mem=64MB"]
    assert durability_traded(settings_dict(postgres)) == ["fsync=off", "full_page_writes=0"]
    assert durability_traded({"synchronous_commit": "off", "fsync": "on"}) == ["synchronous_commit=off"]
    innodb = {"innodb_flush_log_at_trx_commit": "2", "innodb-doublewrite": "OFF", "sync_binlog": "0"}
    assert durability_traded(innodb) == ["innodb_flush_log_at_trx_commit=2", "innodb_doublewrite=OFF"]  # no binary log
    assert durability_traded({"sync_binlog": "0", "log_bin": "ON", "innodb_flush_method": "O_DIRECT_NO_FSYNC"}) == [
        "innodb_flush_method=O_DIRECT_NO_FSYNC", "sync_binlog=0"]
    assert durability_traded({"innodb_flush_log_at_trx_commit": "3", "innodb_flush_method": "O_DIRECT"}) == []
    assert durability_traded(mariadb.DEFAULTS) == []  # what a managed MariaDB starts with


@pytest.mark.slow
def test_fsync_off_is_said_by_the_verdict_why_compare_and_tune(tmp_path, refbench, reachable_dir):
    def oltp(*extra: str):
        made = refbench("oltp", *TINY, "--data-dir", str(reachable_dir / "pgdata"), "--runs-dir", "runs", *extra)
        assert made.code == 0, made.stderr
        return tmp_path / made.last_line

    kept, traded = oltp(), oltp("--pg-settings", "fsync=off,full_page_writes=off")
    said = "durability traded for speed: fsync=off, full_page_writes=off"
    assert said in refbench("verdict", str(traded)).stdout
    assert "durability" not in refbench("verdict", str(kept)).stdout
    why = refbench("why", str(traded), "oltp")
    assert said in " ".join(why.stdout.split()), why.stdout
    assert json.loads((traded / "verdict.json").read_text())[0]["durability"] == "fsync=off, full_page_writes=off"
    assert "durability traded for speed</b>: fsync=off, full_page_writes=off" in (traded / "report.html").read_text()
    compared = refbench("compare", str(kept), str(traded))
    line = "oltp: durability traded for speed by B (fsync=off, full_page_writes=off); A kept every commit"
    assert line in compared.stdout, compared.stdout
    assert refbench("compare", str(kept), str(traded), "--json").json()["durability"] == [line]
    tune = refbench("tune", "--suite", "oltp", "--baseline", str(traded), "--runs-dir", "runs", "--dry-run")
    assert tune.code == 0, tune.stderr
    assert tune.stdout.startswith("durability traded for speed by the baseline: fsync=off, full_page_writes=off; "
                                  "every trial and the tuned plan keep it"), tune.stdout
