"""The results report: ``reports/README.md`` generated from the metrics files (pandas)."""

from __future__ import annotations

import fnmatch
import posixpath
from pathlib import Path
from typing import Any

import pandas as pd

from priorlab.config import Params
from priorlab.io import atomic_path, read_json
from priorlab.metric_registry import report_columns

COLUMNS = report_columns()
"""Dotted metrics-file key → column title (:mod:`priorlab.metric_registry`)."""


def results_frame(results: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per run with the headline metrics (flattened keys renamed per ``COLUMNS``)."""
    rows = []
    for r in results:
        flat = pd.json_normalize(r, sep=".").iloc[0].to_dict()
        row = {"group": r.get("group", ""), "setup": r["setup"], "model": r["model"],
               "β": r["model_params"].get("beta"), "seed": r["seed"]}
        row.update({label: flat.get(key) for key, label in COLUMNS.items() if key in flat})
        rows.append(row)
    return pd.DataFrame(rows)


def summary_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean ± std over seeds for every (setup, model)."""
    keys = ["group", "setup", "model", "β"]
    metrics = [c for c in frame.columns if c not in (*keys, "seed") and frame[c].notna().any()]
    grouped = frame.groupby(keys, sort=False, dropna=False)
    mean, std, n = grouped[metrics].mean(), grouped[metrics].std(ddof=1), grouped.size()
    out = mean.copy().astype(object)
    for c in metrics:
        out[c] = [
            None if pd.isna(m) else f"{m:.3f}" if k < 2 else f"{m:.3f} ± {s:.3f}"
            for m, s, k in zip(mean[c], std[c].fillna(0.0), n)
        ]
    out.insert(0, "seeds", n)
    return out.reset_index()


def settings_frame(params: Params) -> pd.DataFrame:
    rows = [("profile", params.profile), ("device", params.device)]
    for phase in ("pretrain", "train"):
        o = getattr(params, phase)
        rows.append((phase, f"{o.steps} steps, batch {o.batch_size}, Adam lr {o.lr}, KL warm-up {o.kl_warmup_steps}"))
    own = {name: m.train_steps for name, m in params.models.items()
           if m.train_steps and any(r.model == name for r in params.reported_runs().values())}
    own_pre = {s.pretrain_model: params.models[s.pretrain_model].pretrain_steps for s in params.setups.values()
               if s.pretraining and params.models[s.pretrain_model].pretrain_steps}
    if own_pre:
        rows.append(("pretrain steps set per model", ", ".join(f"{n} {k}" for n, k in own_pre.items())))
    if own:
        rows.append(("train steps set per model", ", ".join(f"{name} {steps}" for name, steps in own.items())))
    used = {r.model for r in params.reported_runs().values()} | {s.pretrain_model for s in params.setups.values() if s.pretraining}
    phases = [f"{name} {phase}: {o.describe()}" for name in sorted(used) for phase in ("pretrain", "train")
              if (o := getattr(params.models[name], f"{phase}_phase")) is not None]
    if phases:
        rows.append(("optimiser set per model", "; ".join(phases)))
    for name, s in params.setups.items():
        d = params.datasets[s.dataset]
        rows.append((f"setup {name}", f"{d.kind} ({d.n_train} train / {d.n_test} test), {s.encoder}/{s.decoder} nets, "
                                      f"hidden {s.hidden}, latent {s.latent_dim}, {s.likelihood} likelihood"))
    e = params.evaluate
    rows.append(("evaluation", f"{e.n_eval} test points, L_k with k = {e.iw_samples}, active if Var > {e.active_threshold}; "
                               f"metrics on {e.metric_num_train} / {e.metric_num_test} sampled points, "
                               f"DCI backend {e.dci_backend}, {e.n_bins} bins"))
    return pd.DataFrame(rows, columns=["setting", "value"])


def experiment_summaries(root: Path) -> list[tuple[str, dict[str, Any]]]:
    """``(name, summary)`` of every experiment summary ``root/<name>/summary.json`` that states a
    ``title`` and its ``claims``, ordered by the paper number it states (none last), then name."""
    found = []
    for f in sorted(Path(root).glob("*/summary.json")):
        summary = read_json(f)
        if isinstance(summary, dict) and "title" in summary and "claims" in summary:
            found.append((f.parent.name, summary))
    return sorted(found, key=lambda item: (item[1].get("paper") is None, str(item[1].get("paper", "")), item[0]))


def shared_pretraining(params: Params) -> list[str]:
    """Where replicates share a pretraining: per run group and pretrained setup, the models with
    several seeds on it (``"<group>: <model>, ... on <setup> (<n> seeds)"``).  Those seeds are one
    unit of the claims (averaged before any interval, :func:`priorlab.studies.intervals.unit_means`);
    a setup replicate (``setups.<name>.seed``) is a unit of its own."""
    seeds: dict[tuple[str, str], dict[str, int]] = {}
    for spec in params.reported_runs().values():
        if params.setups[spec.setup].pretraining:
            models = seeds.setdefault((spec.group, spec.setup), {})
            models[spec.model] = models.get(spec.model, 0) + 1
    out = []
    for (group, setup), models in seeds.items():
        shared = [m for m, n in models.items() if n > 1]
        if shared:
            counts = sorted({models[m] for m in shared})
            out.append(f"{group}: {', '.join(shared)} on {setup} ({'/'.join(map(str, counts))} seeds)")
    return out


TIMINGS = Path("reports/pipeline_timings_cpu.json")
"""Measured stage walls of full cpu runs; its ``latest`` entry prices a claim's missing units."""
GPU_HOURS = Path("reports/gpu/gpu_hours.json")
"""The paper profile's GPU-hours per claim (``by_claim_gpu_hours``), estimated from the GPU records."""


def stage_walls(path: Path = TIMINGS) -> dict[str, float]:
    """Stage name -> wall seconds of the full run named by the record's ``latest`` key ({} without
    one); a stage that run lacks (added since) from the ``supplement`` run, its walls divided by that
    run's ``wall_ratio_to_latest`` (the median ratio of the stages both ran: a slower machine)."""
    record = read_json(path) if Path(path).is_file() else {}
    walls = {name: float(s["wall_s"]) for name, s in record.get(record.get("latest", ""), {}).get("stages", {}).items()
             if "wall_s" in s}
    extra = record.get(record.get("supplement", ""), {})
    ratio = float(extra.get("wall_ratio_to_latest", 1.0))
    for name, s in extra.get("stages", {}).items():
        if name not in walls and "wall_s" in s:
            walls[name] = float(s["wall_s"]) / ratio
    return walls


def claim_gpu_hours(path: Path = GPU_HOURS) -> dict[str, float]:
    return read_json(path).get("by_claim_gpu_hours", {}) if Path(path).is_file() else {}


def missing_units_cost(claim: dict[str, Any], walls: dict[str, float], gpu: dict[str, float]) -> str:
    """The price of the units an inconclusive claim lacks (``n_to_decide`` less its n): cpu minutes
    from the measured walls of its evidence stages (their sum over its present units, per unit), and
    GPU-hours from the paper profile's estimate for the claim (per planned paper unit)."""
    need, parts = claim.get("n_to_decide"), claim.get("parts", [])
    if not need or not parts:
        return ""
    n_now = min(int(p["n"]) for p in parts)
    extra = max(need - n_now, 0)
    matched = sum(w for s, w in walls.items() if any(fnmatch.fnmatchcase(s, pat) for pat in claim.get("evidence", [])))
    out = [f"+{extra} units"]
    if matched and n_now:
        minutes = extra * matched / n_now / 60
        out.append(f"≈ {minutes:.0f} cpu-min" if minutes >= 10 else f"≈ {minutes:.1g} cpu-min")  # not "≈ 0"
    key, paper_n = claim.get("criterion_key") or claim["key"].split("/")[0], claim.get("planned_n", {}).get("paper")
    if key in gpu and paper_n:
        out.append(f"≈ {extra * gpu[key] / paper_n:.1f} GPU-h")
    return ": ".join([out[0], ", ".join(out[1:])]) if len(out) > 1 else out[0]


def claims_section(root: Path, shared: list[str] | None = None, profile: str | None = None,
                   walls: dict[str, float] | None = None, gpu: dict[str, float] | None = None) -> list[str]:
    """The paper claims of every experiment summary under ``root``, one table per experiment (n against
    the plan of ``profile``; an inconclusive claim's lean, the n that decides it and the price of the
    missing units from ``walls`` / ``gpu``), the verdict rule, the units, where replicates share a
    pretraining (``shared``: :func:`shared_pretraining`), the counts by verdict and lean, the claims
    below their plan, and every changed criterion with its old and new verdict."""
    from priorlab.studies.claims import (  # lazy: scipy, ~904 ms at import priorlab.report
        AGAINST, FOR, UNITS, claims_table)
    from priorlab.studies.criteria import changes_table  # lazy: scipy, ~865 ms at import priorlab.report

    walls, gpu = walls or {}, gpu or {}

    def cost(c: dict[str, Any]) -> str:
        return missing_units_cost(c, walls, gpu)

    lines, every = [], []
    for name, summary in experiment_summaries(root):
        every += summary["claims"]
        lines += [f"### {summary['title']}", "", f"Details, figures and definitions: [{name}/README.md]"
                  f"({name}/README.md).", "",
                  *(claims_table([dict(c, diagnosis=posixpath.normpath(f"{name}/{c['diagnosis']}")) if c.get("diagnosis") else c
                                  for c in summary["claims"]], profile, cost) or ["_no claim tested._"]),
                  ""]
    if not lines:
        return []
    counts = {v: sum(c["verdict"] == v for c in every) for v in dict.fromkeys(c["verdict"] for c in every)}
    leaning = {side: sum(c.get("lean") == side for c in every) for side in (FOR, AGAINST)}
    below = [f"{c['key']} (n {c['n']}, plan {c['planned_n'][profile]})" for c in every
             if profile in c.get("planned_n", {}) and c["parts"] and min(int(p["n"]) for p in c["parts"])
             < c["planned_n"][profile]]
    used = dict.fromkeys(c.get("unit") for c in every if c.get("unit"))
    changed = changes_table(every)
    return ["## Paper claims", "",
            "Each claim is an effect with its 95 % interval over independent units (n per part) and a verdict: "
            "**reproduced** iff the interval lies wholly on the claim's side of the threshold, **not reproduced** "
            "iff wholly on the other side, **inconclusive** otherwise (one unit gives no interval, so it decides "
            "nothing), **untestable** when a stated precondition fails (a score at its noise floor, a ceiling that "
            "did not plateau). Each criterion was written with its plan: the unit its n counts and the n per arm "
            "of every profile, fixed (no extension rule: a larger n is a new plan, entered in the history before "
            "its numbers). An inconclusive verdict says which way its estimate leans and the n per arm at which "
            "the interval's half-width would fall below the estimate's distance to the threshold at the observed "
            "spread, with the price of the missing units (cpu minutes from the measured stage walls of "
            "`reports/pipeline_timings_cpu.json`, GPU-hours from `reports/gpu/gpu_hours.json`). Criteria, plans "
            "and their history: `src/priorlab/studies/criteria.py`; a *not reproduced* is a result, not a bug "
            "report. The `paper` profile (`make profile PROFILE=paper`, GPU) keeps the papers' settings.", "",
            "Units: " + "; ".join(f"*{u}*: {UNITS.get(u, u)}" for u in used) + ". Where seeds share a pretraining "
            "they are one unit: " + ("; ".join(shared) if shared else "none") + ".", "",
            "Verdicts at this profile: " + ", ".join(f"{v} {n}" for v, n in counts.items())
            + f" (of the inconclusive, leaning {FOR} {leaning[FOR]}, {AGAINST} {leaning[AGAINST]}). Below their "
            "plan here: " + ("; ".join(below) if below else "none") + ". " + diagnosed_text(every), "", *lines,
            *(["### Criteria changed, with the verdict before and after", "", *changed, ""] if changed else [])]


def diagnosed_text(claims: list[dict[str, Any]]) -> str:
    """How many *not reproduced* verdicts link a diagnosis (``reports/diagnosis/<study>.md``: the settings that
    differ, the failure's evidence, one ablation, a conclusion), and which do not."""
    from priorlab.studies.claims import NOT_REPRODUCED  # lazy: scipy, ~904 ms at import priorlab.report

    failing = [c for c in claims if c["verdict"] == NOT_REPRODUCED]
    missing = [c["key"] for c in failing if not c.get("diagnosis")]
    return (f"Diagnosed: {len(failing) - len(missing)} of the {len(failing)} *not reproduced* verdicts (each links "
            "its diagnosis)" + (f"; without one: {', '.join(missing)}." if missing else "."))


NOT_MEASURED = "—"
"""A cell of a metric a run does not have (its model lacks the capability, or its group does not
compute it): a dash, not ``nan``."""


def _markdown(frame: pd.DataFrame, **kwargs) -> str:
    """``frame`` as a Markdown table, missing cells as :data:`NOT_MEASURED`."""
    return frame.astype(object).where(frame.notna(), None).to_markdown(index=False, missingval=NOT_MEASURED, **kwargs)


def write_report(params: Params, results: list[dict[str, Any]], path: str | Path) -> Path:
    """Write the Markdown report and ``results.csv`` beside it."""
    path = Path(path)
    frame = results_frame(results)
    versions = results[0].get("versions", {}) if results else {}
    lines = [
        "# Results",
        "",
        "Generated by the `report` stage from `metrics/*.json`; do not edit by hand.",
        "All likelihood terms are in nats per observation on the test split; metrics use the posterior mean.",
        "",
        "## Settings",
        "",
        settings_frame(params).to_markdown(index=False),
        "",
        *claims_section(path.parent, shared_pretraining(params), params.profile, stage_walls(), claim_gpu_hours()),
        "## Summary (mean ± std over seeds)",
        "",
    ]
    summary = summary_frame(frame)
    for group, part in summary.groupby("group", sort=False):
        lines += [f"### {group}", "", _markdown(part.drop(columns="group").dropna(axis=1, how="all")), ""]
    lines += [
        "## Every run",
        "",
        _markdown(frame.dropna(axis=1, how="all"), floatfmt=".3f"),
        "",
        "## Figures",
        "",
    ]
    for r in results:
        run = r["run"]
        figures = sorted((path.parent / "figures" / run).glob("*.png"))
        links = ", ".join(f"[{f.stem}](figures/{run}/{f.name})" for f in figures) or "none"
        lines.append(f"- `{run}`: {links}")
    lines += ["", "Library versions: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())), ""]
    with atomic_path(path, suffix=".md") as tmp:
        tmp.write_text("\n".join(lines))
    with atomic_path(path.with_name("results.csv"), suffix=".csv") as tmp:
        frame.to_csv(tmp, index=False, float_format="%.6g")
    return path
