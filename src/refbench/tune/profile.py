"""What a tune hands over: the tuned profile (a plan fragment with the engine settings; a shell script and a tuned
profile for host settings) and the journey as a page (every trial, its effect with its 95% interval, kept or
dropped, and why it was tried)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from refbench.fileio import atomic_write_text
from refbench.report import html as h
from refbench.engines.knobs import settings_said
from refbench.tune.knobs import durability_kept
from refbench.tune.trials import plan_text


def kept_settings(journey: dict[str, Any], kind: str) -> dict[str, str]:
    """The confirmed kept changes of one kind (engine, host, option); none unless the confirmation held."""
    if not journey.get("confirmed"):
        return {}
    kinds = {name: step["kind"] for step in journey.get("steps", []) for name in step["change"]}
    return {name: value for name, value in journey.get("kept", {}).items() if kinds.get(name) == kind}


def write_outputs(tune_dir: Path, journey: dict[str, Any]) -> list[Path]:
    written = [tune_dir / "tuned-plan.toml", tune_dir / "report.html"]
    judged, repeats, words = judged_at(journey)
    head = (f"refbench tune {journey['suite']} ({journey['profile']} profile): {journey.get('answer', '')}\n"
            f"baseline {journey.get('baseline', '')}; the journey: {tune_dir / 'report.html'}\n"
            f"Judged at {words}: this plan measures the same, so its figures compare with the tune's."
            + (f"\n{durability_kept(journey['durability'])}." if journey.get("durability") else ""))
    atomic_write_text(written[0], plan_text(journey["profile"], journey["suite"], {**judged, **tuned_options(journey)},
                                            head, journey.get("plan_keys"), repeats))
    server = kept_settings(journey, "engine") if journey.get("server") else {}
    if server:
        written.append(tune_dir / "tuned-server.sql")
        atomic_write_text(written[-1], server_sql(journey, server))
    host = kept_settings(journey, "host")
    if host:
        written += [tune_dir / "tuned-host.sh", tune_dir / "tuned.conf"]
        atomic_write_text(written[-2], host_script(journey, host), mode=0o755)
        atomic_write_text(written[-1], tuned_conf(host))
    atomic_write_text(written[1], page(journey))
    return written


def judged_at(journey: dict[str, Any]) -> tuple[dict[str, Any], int, str]:
    """What the answer was judged at: the trials' case (users, one engine, one point…) and the window the
    confirmation measured, the runs a side it had (as the plan's repeats), and those in words."""
    confirmation = journey.get("confirmation") or {}
    judged = {**journey.get("trial_options", {}), **confirmation.get("window", {})}
    runs = confirmation.get("runs") or []
    repeats = min((sum(r.get("side") == side for r in runs) for side in "AB"), default=0) or journey.get("repeats") or 1
    shown = ", ".join(f"{k} = {json.dumps(v)}" for k, v in judged.items())
    return judged, repeats, (f"{shown}; " if shown else "") + f"{repeats} runs a side (repeats = {repeats})"


def tuned_options(journey: dict[str, Any]) -> dict[str, Any]:
    """The plan options the kept engine settings and suite options come to (the confirmed ones; none otherwise)."""
    from refbench.tune import knobs as K

    base = journey.get("base_options", {})
    engine = {} if journey.get("server") else kept_settings(journey, "engine")  # a DSN's: tuned-server.sql
    out = {}
    if engine:
        changed = K.with_settings(journey["suite"], journey.get("engine", ""), base, engine)
        out = {k: v for k, v in changed.items() if base.get(k) != v}
    out |= {name: K.option_value(value) for name, value in kept_settings(journey, "option").items()}
    return out


def server_sql(journey: dict[str, Any], settings: dict[str, str]) -> str:
    """The kept settings of a user's server as the statements that make them last."""
    head = [f"-- Settings refbench tune kept for {journey['suite']} on {journey['server']} ({journey.get('answer', '')})."]
    if journey.get("engine") == "mariadb":
        return "\n".join(head + ["-- Also write them in the server's option file ([mariadbd]) to keep them after a restart."]
                         + [f"SET GLOBAL {name} = {value if value.isdigit() else repr(value)};" for name, value in settings.items()]) + "\n"
    quoted = [f"ALTER SYSTEM SET {name} = '{value}';" for name, value in settings.items()]
    return "\n".join(head + quoted + ["SELECT pg_reload_conf();"]) + "\n"


def host_script(journey: dict[str, Any], host: dict[str, str]) -> str:
    lines = ["#!/bin/sh", f"# Host settings refbench tune kept for {journey['suite']} ({journey.get('answer', '')}).",
             "# They last until the next boot; tuned.conf beside this file makes them permanent (tuned-adm).", "set -e"]
    for name, value in host.items():
        path = _host_path(journey, name)
        lines.append(f"sysctl -w {name}={value}" if name.startswith("vm.") else
                     f"for f in {path}; do echo {value} > \"$f\"; done" if "*" in path else f"echo {value} > {path}")
    return "\n".join(lines) + "\n"


def _host_path(journey: dict[str, Any], name: str) -> str:
    paths = next((s.get("paths") for s in journey.get("steps", []) if name in s["change"] and s.get("paths")), [])
    if len(paths) > 1:
        return "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor"
    return paths[0] if paths else ""


def tuned_conf(host: dict[str, str]) -> str:
    sections: dict[str, list[str]] = {}
    for name, value in host.items():
        if name.startswith("vm."):
            sections.setdefault("sysctl", []).append(f"{name} = {value}")
        elif name == "Transparent huge pages":
            sections.setdefault("vm", []).append(f"transparent_huge_pages={value}")
        elif name == "CPU frequency governor":
            sections.setdefault("cpu", []).append(f"governor={value}")
        elif name.startswith("I/O scheduler"):
            sections.setdefault("disk", []).append(f"elevator={value}")
        elif name.startswith("Read-ahead"):
            sections.setdefault("disk", []).append(f"readahead={value}")
    out = ["# refbench tune's kept host settings as a tuned profile:",
           "#   mkdir -p /etc/tuned/refbench-tuned && cp tuned.conf /etc/tuned/refbench-tuned/ && tuned-adm profile refbench-tuned",
           "[main]", "summary=refbench tune: the host settings its A/B trials kept"]
    for section, entries in sections.items():
        out += ["", f"[{section}]", *entries]
    return "\n".join(out) + "\n"


# ---- the page -------------------------------------------------------------------------------------------------

def effect_chart(steps: list[dict[str, Any]]) -> str:
    """Each trial's effect on the objective with its 95% interval, as an inline SVG (a forest plot): kept in green."""
    shown = [s for s in steps if s.get("gain_pct") is not None]
    if not shown:
        return ""
    row, left, width = 26, 260, 420
    ends = [v for s in shown for v in (s["gain_pct"], s.get("ci_low_pct"), s.get("ci_high_pct")) if v is not None]
    low, high = min(ends + [-1.0]), max(ends + [1.0])
    pad = (high - low) * 0.08
    low, high = low - pad, high + pad

    def x(v: float) -> float:
        return left + (v - low) / (high - low) * width

    parts = [f'<line x1="{x(0):.1f}" y1="4" x2="{x(0):.1f}" y2="{row * len(shown) + 6}" stroke="#888" stroke-dasharray="3 3"/>']
    for i, s in enumerate(shown):
        y = row * i + 18
        colour = "#1a7f37" if s["kept"] else "#5b6675"
        label = settings_said(s["change"])
        parts.append(f'<text x="{left - 8}" y="{y + 4}" text-anchor="end" font-size="12">{h.esc(label[:40])}</text>')
        if s.get("ci_low_pct") is not None:
            parts.append(f'<line x1="{x(s["ci_low_pct"]):.1f}" y1="{y}" x2="{x(s["ci_high_pct"]):.1f}" y2="{y}" '
                         f'stroke="{colour}" stroke-width="2"/>')
        parts.append(f'<g class="pt"><circle cx="{x(s["gain_pct"]):.1f}" cy="{y}" r="5" fill="{colour}" '
                     f'style="fill:{colour}"/><text x="{x(s["gain_pct"]):.1f}" y="{y - 8}">{s["gain_pct"]:+.1f}%</text></g>')
    axis_y = row * len(shown) + 20
    for v in (low, 0.0, high):
        parts.append(f'<text x="{x(v):.1f}" y="{axis_y}" text-anchor="middle" font-size="11">{v:+.1f}%</text>')
    return (f'<figure style="max-width:{left + width + 60}px"><svg viewBox="0 0 {left + width + 60} {axis_y + 8}" '
            'role="img" aria-label="effect of each trial">'
            + "".join(parts) + "</svg><figcaption class=\"note\">B against A, % better for the objective, with the 95% "
            "interval; kept in green.</figcaption></figure>")


def journey_rows(journey: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    steps = journey.get("steps", []) + ([{**journey["confirmation"], "change": {"confirmation": "the kept set"}}]
                                        if journey.get("confirmation") else [])
    for i, s in enumerate(steps, 1):
        a, b = s.get("a") or [], s.get("b") or []
        rows.append({"trial": i, "change": settings_said(s["change"]),
                     "A runs": ", ".join(h.fmt(v) for v in a), "B runs": ", ".join(h.fmt(v) for v in b),
                     "effect": "" if s.get("gain_pct") is None else f"{s['gain_pct']:+.1f}%",
                     "95% CI": "" if s.get("ci_low_pct") is None else f"{s['ci_low_pct']:+.1f}% … {s['ci_high_pct']:+.1f}%",
                     "p": "" if s.get("p") is None else f"{s['p']:.3f}", "kept": "kept" if s["kept"] else "dropped",
                     "verdict": "; ".join(filter(None, (s["why"], s.get("multiple_comparisons"), s.get("design")))),
                     "why tried": s.get("why_tried", "")})
    return rows


def page(journey: dict[str, Any]) -> str:
    objective = journey.get("objective", {})
    facts = [("suite", f"{journey['suite']} ({journey['profile']} profile)"), ("engine", journey.get("engine") or "—"),
             ("objective", f"{objective.get('label', '')}: {h.fmt(objective.get('value'))} {objective.get('unit', '')} at the baseline"),
             ("limited by", journey.get("bottleneck", "")), ("baseline", journey.get("baseline", "")),
             ("trial runs", f"{journey.get('repeats')} a side, A B B A …; options {json.dumps(journey.get('trial_options', {}))}"
                            + (f"; {journey['data']}" if journey.get("data") else "")),
             ("counted at the baseline", "; ".join(journey.get("evidence", {}).values()) or "—"),
             ("budget", f"{journey.get('budget_s', 0) / 60:,.0f} min, used {journey.get('elapsed_s', 0) / 60:,.1f} min"),
             ("not tried", ", ".join(journey.get("untried", [])) or "—"),
             ("multiple comparisons", journey.get("multiple_comparisons") or "—")]
    body = (f"<h1>refbench tune: {h.esc(journey['suite'])}</h1><p class=\"banner {'pass' if journey.get('confirmed') else 'none'}\">"
            f"{h.esc(journey.get('answer', ''))}</p>" + h.key_values(facts) + "<h2>The trials</h2>" + effect_chart(
                journey.get("steps", [])) + h.table(journey_rows(journey)) +
            "<p class=\"note\">A trial is kept when B is better than A with a t-test p &lt; 0.05 (on the logarithms "
            "of the runs' figures, each run a replicate, the estimator of refbench compare) and by at least 1%; a kept "
            "trial that a Bonferroni adjustment for every trial tried would not keep says so. The kept set is then "
            "confirmed by fresh runs, A B B A, against the baseline's configuration, on more than one independently "
            "loaded database where runs start from copies of one.</p>")
    return h.page(f"refbench tune {journey['suite']}", body)
