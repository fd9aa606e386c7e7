#!/usr/bin/env bash
# Installs what refbench needs on a Debian machine: the Debian packages it drives (when missing)
# and a Python virtual environment with refbench in it. Safe to run again; it only does what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
# All it says, and all its commands print, goes to stderr: `make demo`'s stdout is the verdict alone.
exec 1>&2

VENV="${VENV:-.venv}"
# fdisk: sfdisk, for the partition-table tests; chromium: the browser the report's tests open it in (Playwright
# drives it by its path, so Playwright's own browser download is not needed). mariadb-server: the MariaDB engine
# (refbench starts its own mariadbd); libmariadb-dev, gcc, python3-dev: PyPI's MariaDB client builds against them.
APT_PACKAGES=(fio postgresql util-linux fdisk chromium mariadb-server mariadb-client libmariadb-dev gcc python3-dev)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  if [ "$(id -u)" -eq 0 ]; then SUDO=(); elif command -v sudo >/dev/null; then SUDO=(sudo); else
    echo "setup: Debian packages ${missing[*]} are missing and this user cannot install them (not root, no sudo)."
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  # Debian starts (and enables) a system MariaDB on port 3306 when it installs mariadb-server; refbench's tests and
  # runs start their own on other ports and need none of it. A policy-rc.d that refuses every start keeps it from
  # starting while this installs (unless the machine has one of its own), and it is disabled afterwards.
  policy=/usr/sbin/policy-rc.d
  if [[ " ${missing[*]} " == *" mariadb-server "* && ! -e $policy ]]; then
    trap '"${SUDO[@]}" rm -f '"$policy" EXIT
    printf '#!/bin/sh\nexit 101\n' | "${SUDO[@]}" tee "$policy" >/dev/null
    "${SUDO[@]}" chmod 755 "$policy"
  fi
  "${SUDO[@]}" apt-get update -qq
  "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  if [[ " ${missing[*]} " == *" mariadb-server "* ]]; then
    # disable works without a running systemd too (it edits links, the SysV ones included); stop is for a machine
    # whose own policy let it start.
    "${SUDO[@]}" systemctl disable mariadb >/dev/null 2>&1 || "${SUDO[@]}" update-rc.d mariadb disable >/dev/null 2>&1 || true
    "${SUDO[@]}" systemctl stop mariadb >/dev/null 2>&1 || "${SUDO[@]}" service mariadb stop >/dev/null 2>&1 || true
  fi
fi

PYTHON="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating Python virtual environment in $VENV"
  # Without pip when uv can be put in it from this Python's own pip: ensurepip alone takes 7 s on the 2-core VM.
  if "$PYTHON" -m venv --without-pip "$VENV" && "$PYTHON" -m pip install -q --prefix "$VENV" uv >/dev/null 2>&1; then :
  else
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
  fi
fi
stamp="$VENV/.refbench-installed"
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: installing refbench and its Python dependencies into $VENV"
  # uv (Astral's installer, from PyPI) installs the dependencies in 10 s where pip takes 40 s on the 2-core VM; pip
  # does it when uv cannot be had. Neither compiles them to bytecode here: see below.
  if [ -x "$VENV/bin/uv" ] || "$VENV/bin/python" -m pip install -q uv >/dev/null 2>&1; then
    "$VENV/bin/uv" pip install -q --python "$VENV/bin/python" -e ".[test]"
  else
    "$VENV/bin/python" -m pip install -q --no-compile -e ".[test]"
  fi
  echo "$want" > "$stamp"
fi
# Bytecode: a machine with PYTHONDONTWRITEBYTECODE set (as this VM has) would compile every module again in every
# refbench command and each of its helper processes (0.2 s of CPU for refbench's own modules alone). Compiling the
# whole environment takes 30 s of CPU, most of it for modules nothing here imports; so this imports what refbench
# and its tests use with bytecode writing on, which compiles exactly those once (the Makefile runs the demo and
# the tests with it on too, for whatever this misses). refbench's own sources: compileall, which redoes only what
# changed.
"$VENV/bin/python" -m compileall -q src tests >/dev/null
PYTHONDONTWRITEBYTECODE= "$VENV/bin/python" - >/dev/null 2>&1 <<'PY' || true
import importlib, pkgutil
import refbench
for module in pkgutil.walk_packages(refbench.__path__, "refbench."):
    if not module.name.endswith("__main__"):  # that one runs the command line
        try:
            importlib.import_module(module.name)
        except Exception:
            pass
for name in ("scipy.stats", "matplotlib.pyplot", "duckdb", "polars", "pyarrow.parquet", "dask.distributed",
             "pytest", "xdist", "hypothesis", "playwright.sync_api", "MySQLdb", "psycopg"):
    try:
        importlib.import_module(name)
    except Exception:
        pass
PY
