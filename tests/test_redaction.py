"""Passwords masked whatever they hold: every form of DSN refbench takes (libpq key=value, postgresql:// URIs and
their ?password=, mysql:// URIs), with '@', ':', '/', '%'-escapes, quotes, backslashes and spaces in the password."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from psycopg.conninfo import conninfo_to_dict

from refbench.engines.mariadb import parse_dsn
from refbench.engines.settings import dsn_problem
from refbench.errors import UserError
from refbench.redaction import redact

# What makes a password hard to find the end of, in one form or another.
TRICKY = "@:/%?#&='\"\\ ,;[]!$*+"


@st.composite
def passwords(draw) -> tuple[str, list[str]]:
    """(a password, its markers): tricky characters around markers no DSN or message holds otherwise, so that a piece
    of the password left visible (the 'ss@' of 'p@ss') is found, not only the whole."""
    pieces = draw(st.lists(st.text(TRICKY, max_size=4), min_size=1, max_size=5))
    markers = [f"Qz{i}{draw(st.text('abcXYZ019', min_size=1, max_size=3))}K" for i in range(len(pieces))]
    password = "".join(piece + marker for piece, marker in zip(pieces, markers)) + draw(st.text(TRICKY, max_size=3))
    return password, markers


def _libpq_quoted(password: str) -> str:
    return "'" + password.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _libpq_escaped(password: str) -> str:
    """libpq's unquoted value: a backslash before whatever would end it or start a quote."""
    return "".join("\\" + c if c in " \\'" else c for c in password)


# Each form as written, and the parser that reads it: the test reads the password back with it, so the DSNs are real
# ones, not look-alikes.
READ_BACK = {"libpq": lambda dsn: conninfo_to_dict(dsn)["password"], "mysql": lambda dsn: parse_dsn(dsn)["password"]}
FORMS = {
    "key=value quoted": ("libpq", lambda pw: f"host=db1.example port=5432 user=bench password={_libpq_quoted(pw)} dbname=tpcc"),
    "key=value escaped": ("libpq", lambda pw: f"host=db1.example user=bench password={_libpq_escaped(pw)} dbname=tpcc"),
    "postgresql URI": ("libpq", lambda pw: f"postgresql://bench:{quote(pw, safe='')}@db1.example:5432/tpcc?sslmode=disable"),
    "postgresql ?password=": ("libpq", lambda pw: f"postgresql://bench@db1.example/tpcc?password={quote(pw, safe='')}&sslmode=disable"),
    "mysql URI": ("mysql", lambda pw: f"mysql://bench:{quote(pw, safe='')}@db1.example:3306/tpcc"),
    # urlsplit takes the userinfo to the last '@' of the host part: '@', ':', quotes and spaces work unescaped.
    "mysql URI, unescaped": ("mysql", lambda pw: f"mysql://bench:{pw}@db1.example:3306/tpcc"),
}


def _shown_in(text: str, password: str, markers: list[str]) -> list[str]:
    return [s for s in [password, quote(password, safe=""), *markers] if s in text]


@pytest.mark.parametrize("form", FORMS)
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(secret=passwords())
def test_no_piece_of_any_password_survives_redaction_and_the_rest_of_the_dsn_does(form, secret):
    password, markers = secret
    parser, write = FORMS[form]
    if form == "mysql URI, unescaped":  # these end, escape or bracket (IPv6) a URI's host part
        password = "".join(c for c in password if c not in "/?#%[]")
    dsn = write(password)
    assert READ_BACK[parser](dsn) == password
    for text in (dsn, f"cannot connect to MariaDB at '{dsn}': Access denied for user 'bench'@'db1.example'.",
                 f"--dsn={dsn}"):
        shown = redact(text)
        assert _shown_in(shown, password, markers) == [], shown
        assert "***" in shown and "db1.example" in shown and "tpcc" in shown, shown


@settings(max_examples=300, deadline=None)
@given(secret=passwords())
def test_a_mysql_uri_broken_by_its_password_is_masked_in_full_all_the_same(secret):
    """A '/' or '#' written raw ends urlsplit's host part: the DSN fails, and its message still repeats it masked."""
    password, markers = secret
    shown = redact(f"the port of 'mysql://bench:{password}@db1.example/tpcc' is not a number from 1 to 65535.")
    assert _shown_in(shown, password, markers) == [], shown


@settings(max_examples=300, deadline=None)
@given(secret=passwords())
def test_a_mysql_uri_that_does_not_parse_is_refused_in_words_that_hold_no_piece_of_its_password(secret):
    password, markers = secret
    password = "[" + "".join(c for c in password if c not in "/?#[]") + "]"  # urlsplit quotes what is in brackets
    with pytest.raises(UserError) as refused:
        parse_dsn(f"mysql://bench:{password}@db1.example:3306/tpcc")
    assert _shown_in(str(refused.value), password, markers) == [], str(refused.value)


def test_the_defects_seen_and_what_stays_visible():
    assert redact("mysql://bob:p@ss@h/x") == "mysql://bob:***@h/x"
    assert redact("postgresql://bob:a:b/c@h:5432/x") == "postgresql://bob:***@h:5432/x"
    assert redact("host=h password='it''s x' dbname=d") == "host=h password=*** dbname=d"
    assert redact(r"host=h password=it\'s\ x dbname=d") == "host=h password=*** dbname=d"
    assert redact("host=h password='never closed dbname=d") == "host=h password=***"
    assert redact("postgresql://h/x?password=p%40ss&sslmode=require") == "postgresql://h/x?password=***&sslmode=require"
    assert redact("Access denied for user 'bob'@'localhost' (using password: YES)") == \
        "Access denied for user 'bob'@'localhost' (using password: YES)"
    assert redact("mysql://bob@h/x and postgresql://h:5432/x") == "mysql://bob@h/x and postgresql://h:5432/x"


def test_a_libpq_message_about_a_bad_dsn_does_not_quote_a_piece_of_its_password():
    problem = dsn_problem("host=h password='it''s x' dbname=d")
    assert problem is not None and "'s" not in problem and '"***"' in problem, problem
