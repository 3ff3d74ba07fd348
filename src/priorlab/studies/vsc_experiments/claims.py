"""Paper 002's headline claims from the experiment tables (:mod:`priorlab.studies.vsc_experiments.aggregate`),
decided by the ``002.*`` criteria of :mod:`priorlab.studies.criteria` over seeds."""

from __future__ import annotations

import numpy as np

from priorlab.studies.claims import Claim, fmt
from priorlab.studies.criteria import criterion
from priorlab.studies.intervals import mean_t, nested_mean, unit_means, welch_difference


def _by_kind(smiley: dict, kind: str, chosen: dict[str, str]) -> dict[int, list[dict]]:
    """Fresh-test-set scores of one model family per latent size, one entry per seed (β-VAE: the β
    chosen on the validation set per size)."""
    out: dict[int, list[dict]] = {}
    for run, r in smiley.get("runs", {}).items():
        family = r["label"].split(" ")[0]
        if family == kind and (kind != "β-VAE" or chosen.get(str(r["latent_dim"])) == r["model"]):
            out.setdefault(int(r["latent_dim"]), []).append(
                {"run": run, "unit": r.get("unit", run), **r["fresh"],
                 **({"spikes": r["spikes"]} if "spikes" in r else {})})
    return dict(sorted(out.items()))


def _values(entries: list[dict], key: str) -> list[float]:
    return [float(e[key]) for e in entries]


def _units(entries: list[dict], key: str) -> np.ndarray:
    """One value per independent unit (pretraining): the mean of ``key`` over the unit's seeds."""
    return unit_means(_values(entries, key), [e["unit"] for e in entries])


def _spikes(entries: list[dict]):
    """The mean number of input-dependent dims over pretrainings (a count: :func:`nested_mean`)."""
    return nested_mean([e["spikes"]["input_dependent_dims"] for e in entries], [e["unit"] for e in entries])


def vsc_claims(smiley: dict, elbo: dict, fashion: dict) -> list[Claim]:
    """Paper 002's headline claims on the fresh Smiley test set and Fashion-MNIST, decided by the
    ``002.*`` criteria of :mod:`priorlab.studies.criteria` over seeds.  Contrast =
    :func:`priorlab.metrics.correlation_contrast`."""
    chosen = smiley.get("chosen_beta_vae", {})
    vsc, bvae, tc = (_by_kind(smiley, k, chosen) for k in ("VSC", "β-VAE", "β-TCVAE"))
    claims = []

    def sizes(d: dict) -> str:
        return ", ".join(f"d={k}: {fmt(_values(v, 'contrast'))}" for k, v in d.items())

    if len(vsc) >= 2:
        lo, hi = min(vsc), max(vsc)
        claims.append(criterion("002.vsc_contrast_kept").decide(
            [("", welch_difference(_units(vsc[hi], "contrast"), _units(vsc[lo], "contrast")))],
            f"VSC contrast {sizes(vsc)}; block purity " +
            ", ".join(f"d={k}: {fmt(_values(v, 'block_purity'))}" for k, v in vsc.items())))
        used = _values(vsc[hi], "used_latents")
        claims.append(criterion("002.vsc_used_latents").decide(
            [("", nested_mean(used, [e["unit"] for e in vsc[hi]]))], f"d={hi}: used latents {fmt(used, 0)}, active dims "
                                  f"{fmt(_values(vsc[hi], 'active_dims'), 0)}"))
    for key, name, fam in (("002.beta_vae_degrades", "β-VAE", bvae), ("002.beta_tcvae_degrades", "β-TCVAE", tc)):
        if len(fam) >= 2:
            lo, hi = min(fam), max(fam)
            claims.append(criterion(key).decide(
                [("", welch_difference(_units(fam[lo], "contrast"), _units(fam[hi], "contrast")))],
                f"{name} contrast {sizes(fam)}" + (f" (β per d: {chosen})" if name == "β-VAE" else "")))
    both = sorted(set(vsc) & set(bvae))
    if both:
        claims.append(criterion("002.vsc_beats_beta_vae").decide(
            [(f"d={d}", welch_difference(_units(vsc[d], "contrast"), _units(bvae[d], "contrast"))) for d in both],
            "; ".join(f"d={d}: {fmt(_values(vsc[d], 'contrast'))} vs {fmt(_values(bvae[d], 'contrast'))}"
                      for d in both)))
    rows = elbo.get("rows", [])
    for key, kind, sym in (("002.vsc_elbo_alpha", "VSC", "α"), ("002.beta_vae_elbo_beta", "β-VAE", "β")):
        pts = sorted((r["value"], r["elbos"]) for r in rows if r["model"] == kind)
        if len(pts) >= 2:
            high, low = (pts[-1][1], pts[0][1]) if kind == "VSC" else (pts[0][1], pts[-1][1])
            claims.append(criterion(key).decide(
                [("", welch_difference(high, low))],
                f"{sym} {[v for v, _ in pts]}: mean ELBO {fmt([np.mean(e) for _, e in pts], 2)}"))
    vsc_rows = sorted((r["value"], r["elbos"]) for r in rows if r["model"] == "VSC")
    bvae_m = [float(np.mean(r["elbos"])) for r in rows if r["model"] == "β-VAE"]
    if vsc_rows and len(bvae_m) >= 2:
        lo, span = min(bvae_m), max(bvae_m) - min(bvae_m)
        parts = []
        for a, e in vsc_rows:  # the VSC ELBO's position in the β-VAE span, 0 = its lowest mean, 1 = its highest
            est = mean_t((np.asarray(e) - lo) / span)
            parts.append((f"α={a:g}", est))
        claims.append(criterion("002.vsc_elbo_comparable").decide(
            parts, f"VSC mean ELBO {fmt([np.mean(e) for _, e in vsc_rows], 2)}, "
                   f"β-VAE span [{lo:.2f}, {max(bvae_m):.2f}]"))
    reps = fashion.get("replicates", {})
    fashion_entries = [{"unit": r.get("unit", name), **r} for name, r in reps.items()]
    spikes = [(f"Smiley d={d}", [e for e in v if "spikes" in e]) for d, v in vsc.items()]
    if reps:
        spikes.append(("Fashion-MNIST", fashion_entries))
    spikes = [(n, v) for n, v in spikes if v]
    if spikes:
        claims.append(criterion("002.spikes_input_dependent").decide(
            [(n, _spikes(v)) for n, v in spikes],
            "; ".join(f"{n}: {fmt([e['spikes']['input_dependent_dims'] for e in v], 0)} input-dependent dims"
                      for n, v in spikes)))
    if reps:
        a = _units(fashion_entries, "tshirt_shirt_minus_trouser")
        b = _units(fashion_entries, "sneaker_boot_minus_trouser_bag")
        dependent = [r["spikes"]["input_dependent_dims"] for r in reps.values()]
        failed = ("" if max(dependent) >= 1
                  else "no Fashion-MNIST VSC spike depends on the input (γ std ≤ 0.1 in every dim)")
        claims.append(criterion("002.class_spike_patterns").decide(
            [("T-shirt", mean_t(a)), ("sneaker", mean_t(b))],
            f"cos differences per seed: {fmt(a)}; {fmt(b)}", failed))
    return claims
