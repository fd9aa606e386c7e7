#!/usr/bin/env bash
# Installs what refbench needs on a Debian machine: the Debian packages it drives (when missing)
# and a Python virtual environment with refbench in it. Safe to run again; it only does what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

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
    echo "setup: Debian packages ${missing[*]} are missing and this user cannot install them (not root, no sudo)." >&2
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
  "$PYTHON" -m venv "$VENV"
fi
stamp="$VENV/.refbench-installed"
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: installing refbench and its Python dependencies into $VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
  # pip compiles what it installs one file at a time (20 s here); compileall does it on every core in 3 s. A package
  # may ship a file for another Python version that does not compile: pip passes over those, and so does this.
  "$VENV/bin/python" -m pip install -q --no-compile -e ".[test]"
  "$VENV/bin/python" -m compileall -q -j 0 "$VENV/lib" >/dev/null || true
  echo "$want" > "$stamp"
fi
# Bytecode for refbench's own modules, written here because an editable install never gets any from pip, and a
# machine with PYTHONDONTWRITEBYTECODE set (as this VM has) would otherwise compile them again in every refbench
# command and in each of its helper processes: 0.2 s of CPU each time (tests: the suites they plug in). compileall
# only redoes what changed.
"$VENV/bin/python" -m compileall -q src tests >/dev/null
