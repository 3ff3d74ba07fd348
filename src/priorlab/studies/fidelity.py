"""What a profile *runs*, read from its params and its built models, for the papers' fidelity tables
(``profiles/paper_settings.yaml``, ``tests/test_paper_settings.py``): a setting's name in the params is
not enough (issue 43).  A baseline that warm-starts from a pretraining trains for the pretraining's
steps too, and a net's size is what the built module holds, not what its option is called."""

from __future__ import annotations

from priorlab.config import Params, load_params
from priorlab.io import write_bytes_atomic
from priorlab.phases import new_model, pretrain_spec
from priorlab.priors.factorial_mixture import robbins_monro_step_size

NOTES = ("deviation", "missing")
"""Why a setting of ``profiles/paper_settings.yaml`` is not held: a deliberate difference, or one the
library cannot express yet."""


def effective_steps(params: Params, run: str) -> dict[str, int]:
    """The optimiser steps that train ``run``'s nets: its setup's pretraining when the run starts from it
    (``warm_start: pretrain`` on a setup with ``pretraining``), then its own joint training."""
    entry = params.run(run)
    spec = params.model(entry.model)
    pretrain = 0
    if spec.warm_start == "pretrain" and params.setup(entry.setup).pretraining:
        pretrain = pretrain_spec(params, entry.setup).phase("pretrain", params.pretrain).steps
    train = spec.phase("train", params.train).steps
    return {"pretrain": pretrain, "train": train, "total": pretrain + train}


def parameter_counts(params: Params, setup: str, model: str, obs_shape: tuple[int, ...]) -> dict[str, int]:
    """Trainable parameters of ``model`` built on ``setup``'s nets for observations of ``obs_shape``: per
    top-level module (``encoder``, ``decoder``, a discriminator, ...) and in ``total``."""
    built = new_model(params.setup(setup), params.model(model), tuple(obs_shape), seed=0)
    counts = {name: sum(p.numel() for p in child.parameters() if p.requires_grad)
              for name, child in built.named_children()}
    counts = {name: n for name, n in counts.items() if n}
    counts["total"] = sum(p.numel() for p in built.parameters() if p.requires_grad)
    return counts


def svi_step_size(params: Params, model: str, step: int = 1) -> float:
    """rho of the ``step``-th SVI step of a factorial mixture model's prior, from its schedule
    rho_tau = (tau0 + tau)^-kappa (sec. 2.4.3; the function the prior's updates call).  Step 1 is the
    first of the prior initialisation (its SVI count starts there)."""
    spec = params.model(model)
    return robbins_monro_step_size(step, spec.tau0, spec.kappa)


def resolve(params: Params, dotted: str):
    """The value at ``dotted`` in parsed params (attributes and mapping keys, defaults included)."""
    value = params
    for part in dotted.split("."):
        value = value[part] if isinstance(value, dict) else getattr(value, part)
    return value


def same(a, b) -> bool:
    """Equal values: lists item by item, numbers to 1e-12 relative, the rest by ``==``."""
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b) and \
            all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return abs(float(a) - float(b)) <= 1e-12 * max(1.0, abs(float(b)))
    return a == b


def measured(params: Params, measure: dict) -> dict[str, object]:
    """What a ``measure`` entry reads from the built models: label -> value.  ``steps``: the optimiser steps
    that train each of ``runs`` (its pretraining included when it starts from one); ``parameters``: the
    trainable parameters of ``model`` on ``setup``'s nets, in the modules ``part`` (or ``total``); ``svi_step_size``:
    rho of a factorial mixture model's ``step``-th SVI step (its schedule, 6 decimals); ``data_set``: the source
    a real-data study of paper 003 reads (``study``: movielens or single_cell; the same in every profile)."""
    if measure["kind"] == "steps":
        return {f"steps of {run} (pretraining included)": effective_steps(params, run)["total"] for run in measure["runs"]}
    if measure["kind"] == "data_set":
        from priorlab.data import movielens, pbmc  # lazy: +4 modules, ~15 ms at import priorlab.studies.fidelity

        return {f"{measure['study']} data": {"movielens": movielens.SOURCE, "single_cell": pbmc.SOURCE}[measure["study"]]}
    if measure["kind"] == "svi_step_size":
        return {f"rho of {measure['model']}'s SVI step {measure['step']}": round(
            svi_step_size(params, measure["model"], measure["step"]), 6)}
    counts = parameter_counts(params, measure["setup"], measure["model"], tuple(measure["obs_shape"]))
    parts = measure.get("part", ["total"])
    return {f"parameters of {measure['model']} ({' + '.join(parts)})": sum(counts[part] for part in parts)}


def for_profile(entry: dict, profile: str) -> dict:
    """The entry as ``profile`` reads it: its ``in_profile.<profile>`` (``params`` or ``measure`` naming that
    profile's own entries, e.g. the cpu profile's runs and models, which it names otherwise) in place of
    the paper profile's."""
    override = entry.get("in_profile", {}).get(profile)
    if not override:
        return entry
    return {**{k: v for k, v in entry.items() if k not in ("params", "measure", "in_profile")}, **override}


def held_values(params: Params, entry: dict) -> dict[str, object]:
    """Each param of an entry, or each quantity its ``measure`` reads, -> its value in ``params``."""
    if "measure" in entry:
        return measured(params, entry["measure"])
    return {p: _effective(params, p) for p in entry["params"]}


def _effective(params: Params, dotted: str):
    """The value at ``dotted``; a model's ``train_steps`` / ``pretrain_steps`` of 0 (the phase's own
    length) as the steps that phase runs, and a setting of its ``train_phase`` / ``pretrain_phase`` it
    leaves unset as the value that phase runs with (the profile's ``train`` / ``pretrain``)."""
    parts = dotted.split(".")
    if len(parts) == 4 and parts[0] == "models" and parts[2] in ("train_phase", "pretrain_phase"):
        phase = parts[2].split("_")[0]
        return getattr(params.model(parts[1]).phase(phase, getattr(params, phase)), parts[3])
    value = resolve(params, dotted)
    head, _, last = dotted.rpartition(".")
    if last in ("train_steps", "pretrain_steps") and value == 0 and head.startswith("models."):
        phase = last.split("_")[0]
        return resolve(params, head).phase(phase, getattr(params, phase)).steps
    return value


def _shown(values: dict[str, object]) -> str:
    """The distinct values an entry holds, as text (one when they agree)."""
    def text(v) -> str:
        if isinstance(v, float):
            return f"{v:g}"
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(text(x) for x in v) + "]"
        return str(v)
    distinct: list[str] = []
    for v in values.values():
        if text(v) not in distinct:
            distinct.append(text(v))
    return "; ".join(distinct)


def _cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def settings_markdown(table: dict, profiles: dict[str, Params]) -> str:
    """The fidelity table of every paper in ``table`` (``profiles/paper_settings.yaml``, parsed): per
    stated setting, the paper's words and source, what each profile of ``profiles`` (name -> params, the
    paper profile first) runs — its params' values or the measured quantity — and the verdict on the
    paper profile: match, or the entry's deviation / missing note.  A profile without the entries a row
    names (the cpu profile names some of its models and runs otherwise) shows "—"."""
    names = list(profiles)
    lines = ["# The papers' settings and what the profiles run", "",
             "Generated by `python -m priorlab.studies.fidelity` from `profiles/paper_settings.yaml` and the "
             f"profiles {', '.join(f'`profiles/{n}.yaml`' for n in names)} (never edited by hand; "
             "`tests/test_paper_settings.py` checks it is current). A measured row reads the built model or the "
             "effective training length (pretraining included), not a param's name; a phase setting a model leaves "
             "unset shows the value its phase runs with. The rows name the paper profile's entries, and another "
             "profile's where it names them otherwise (`in_profile`); a profile without such an entry shows —.", ""]
    for paper, entries in table.items():
        lines += [f"## {paper}", "", "| setting | the paper (source) | " + " | ".join(f"{n} profile" for n in names)
                  + " | verdict (paper profile) |", "|---|---|" + "---|" * len(names) + "---|"]
        for e in entries:
            cells = [_cell(e["setting"]), _cell(f"{e['stated']} ({e['source']})")]
            for n in names:
                try:
                    cells.append(_cell(_shown(held_values(profiles[n], for_profile(e, n)))))
                except (KeyError, AttributeError, ValueError):
                    cells.append("—")
            note = next((k for k in NOTES if k in e), None)
            cells.append(_cell(f"{note}: {e[note]}") if note else "match")
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Write ``reports/paper_settings.md`` from ``profiles/`` (run from the project's root)."""
    import argparse

    import yaml

    ap = argparse.ArgumentParser(description="the fidelity table of every paper")
    ap.add_argument("--out", default="reports/paper_settings.md")
    args = ap.parse_args(argv)
    table = yaml.safe_load(open("profiles/paper_settings.yaml"))
    profiles = {n: load_params(f"profiles/{n}.yaml") for n in ("paper", "cpu")}

    write_bytes_atomic(args.out, settings_markdown(table, profiles).encode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
