"""Settings tune changes on a server it does not manage (a DSN), only with --allow-server-changes: only those the
server takes without a restart (PostgreSQL: ALTER SYSTEM and a reload, for settings of context user, superuser or
sighup; MariaDB: SET GLOBAL, for variables that are not read-only), each put back after the runs that needed it.

What was there before is journaled first, in a file only its owner reads (it holds the DSN to reconnect with): the
values go back at the end, on Ctrl-C, and at the next refbench start after a kill -9 (when the server answers).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from refbench.fileio import Untrusted, read_state_file, write_private
from refbench.tune.host import make_state_dir, not_used, owner_identity, owner_running, state_dir

RELOADABLE = ("user", "superuser", "sighup")  # PostgreSQL contexts a reload applies to new sessions
RELOAD_S = 0.5  # a reload is a signal the postmaster acts on a moment later; sessions started after it see the value


def journal_path() -> Path:
    """This process's journal: one a tune, since two tunes may change two servers."""
    return state_dir() / f"server-changes-{os.getpid()}.json"


def journals() -> list[Path]:
    """The server journals in the state directory, root's left out for another user (root's own to put back)."""
    return sorted(p for p in state_dir().glob("server-changes-*.json")
                  if os.geteuid() == 0 or p.lstat().st_uid != 0)


class ServerChanges:
    def __init__(self, engine: str, dsn: str, journal: Path | None = None):
        self.engine, self.dsn = engine, dsn
        self.journal = journal or journal_path()

    def changeable(self, names: list[str]) -> dict[str, str]:
        """Of ``names``, those the server takes without a restart, with their current values."""
        with self._connect() as conn:
            if self.engine == "postgres":
                rows = conn.execute("SELECT name, current_setting(name) FROM pg_settings WHERE name = ANY(%s) AND "
                                    "context = ANY(%s)", (names, list(RELOADABLE))).fetchall()
            else:
                cursor = conn.cursor()
                cursor.execute("SELECT LOWER(VARIABLE_NAME), GLOBAL_VALUE FROM information_schema.SYSTEM_VARIABLES "
                               f"WHERE READ_ONLY = 'NO' AND LOWER(VARIABLE_NAME) IN ({', '.join(['%s'] * len(names))})",
                               names)
                rows = cursor.fetchall()
        return {name: str(value) for name, value in rows}

    def apply(self, name: str, value: str) -> None:
        entries = _entries(self.journal)
        if not any(e["setting"] == name for e in entries):
            entries.append({"setting": name, "original": self._saved(name)})
            try:
                make_state_dir(self.journal.parent)
                write_private(self.journal, json.dumps({"owner": owner_identity(), "engine": self.engine,
                                                        "dsn": self.dsn, "changes": entries}))
            except (OSError, Untrusted) as exc:
                from refbench.errors import UserError

                raise UserError(f"cannot write the journal that puts your server's settings back ({self.journal}: "
                                f"{getattr(exc, 'strerror', None) or exc}); nothing was changed.") from None
        self._set(name, value)

    def restore(self) -> list[str]:
        """Puts back what this process journaled (never another tune's)."""
        return restore_journal(self.journal, mine=True)

    # ---- the engines' statements ------------------------------------------------------------------------------

    def _connect(self):
        if self.engine == "postgres":
            from refbench.engines.postgres import connect

            return connect(self.dsn, autocommit=True)
        from refbench.engines.mariadb import connect

        return connect(self.dsn, autocommit=True)

    def _saved(self, name: str) -> Any:
        """What to put back: PostgreSQL's ALTER SYSTEM value if there was one (None: none), MariaDB's global value."""
        with self._connect() as conn:
            if self.engine == "postgres":
                row = conn.execute("SELECT setting FROM pg_file_settings WHERE name = %s AND sourcefile LIKE "
                                   "'%%postgresql.auto.conf' ORDER BY seqno DESC LIMIT 1", (name,)).fetchone()
                return row[0] if row else None
            cursor = conn.cursor()
            cursor.execute("SELECT GLOBAL_VALUE FROM information_schema.SYSTEM_VARIABLES WHERE LOWER(VARIABLE_NAME) = %s",
                           (name,))
            return cursor.fetchone()[0]

    def _set(self, name: str, value: Any, reset: bool = False) -> None:
        with self._connect() as conn:
            if self.engine == "postgres":
                from psycopg import sql

                conn.execute(sql.SQL("ALTER SYSTEM RESET {}").format(sql.Identifier(name)) if reset else
                             sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(str(value))))
                conn.execute("SELECT pg_reload_conf()")
                time.sleep(RELOAD_S)
            else:
                cursor = conn.cursor()
                number = str(value).lstrip("-").isdigit()
                cursor.execute(f"SET GLOBAL {name} = {value if number else '%s'}", () if number else (value,))


def _read(journal: Path) -> dict[str, Any] | None:
    """A journal this user wrote, or None (none, or not one a tune wrote); Untrusted when another user could have
    written it or it is not a file."""
    try:
        data = json.loads(read_state_file(journal))
    except (FileNotFoundError, PermissionError, ValueError):
        return None
    good = isinstance(data, dict) and data.get("engine") in ("postgres", "mariadb") and \
        isinstance(data.get("dsn"), str) and isinstance(data.get("changes", []), list) and \
        all(isinstance(e, dict) and isinstance(e.get("setting"), str) for e in data.get("changes", []))
    return data if good else None


def _entries(journal: Path) -> list[dict[str, Any]]:
    data = _read(journal)
    return list(data.get("changes", [])) if data else []


def restore_journal(journal: Path | None = None, mine: bool = False) -> list[str]:
    """Puts back what the journal holds: with ``mine``, only if this process wrote it; else only if the process that
    wrote it is gone. A server that does not answer keeps the journal for the next start."""
    from refbench.errors import UserError

    journal = journal or journal_path()
    try:
        data = _read(journal)
    except Untrusted as why:
        return [not_used(journal, why)]
    if data is None:
        return []
    owner = data.get("owner") or {}
    if (owner != owner_identity()) if mine else owner_running(owner):
        return []
    server = ServerChanges(data["engine"], data["dsn"], journal)
    entries, said = list(data.get("changes", [])), []
    try:
        while entries:
            entry = entries[-1]
            if data["engine"] == "postgres":
                server._set(entry["setting"], entry["original"], reset=entry["original"] is None)
            else:
                server._set(entry["setting"], entry["original"])
            said.append(f"{entry['setting']}: {'its default' if entry['original'] is None else entry['original']}")
            entries.pop()
            if entries:
                write_private(journal, json.dumps({**data, "changes": entries}))
    except UserError as exc:
        return said + [f"the server's settings could not all be put back yet ({exc}); the next refbench start tries again"]
    os.unlink(journal)
    return said


def left_by_a_killed_tune() -> list[str]:
    """What any refbench command does first: puts back the settings a killed tune changed on this user's servers, as
    sentences to print; a state directory it cannot read is skipped with one warning."""
    try:
        found = journals()
    except OSError as exc:
        return [f"warning: tune's state directory {state_dir()} cannot be read ({exc.strerror}); skipped"]
    return [line if line.startswith("warning: ") else
            f"a tune that was killed had changed a setting of your server, now put back: {line}"
            for journal in found for line in restore_journal(journal)]
