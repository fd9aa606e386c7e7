#!/usr/bin/env bash
# Installs what refbench needs on a Debian machine: the Debian packages it drives (when missing)
# and a Python virtual environment with refbench in it. Safe to run again; it only does what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${VENV:-.venv}"
# fdisk: sfdisk, for the partition-table tests; chromium: the browser the report's tests open it in (Playwright
# drives it by its path, so Playwright's own browser download is not needed).
APT_PACKAGES=(fio postgresql util-linux fdisk chromium)

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
  "${SUDO[@]}" apt-get update -qq
  "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
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
  "$VENV/bin/python" -m pip install -q -e ".[test]"
  echo "$want" > "$stamp"
fi
