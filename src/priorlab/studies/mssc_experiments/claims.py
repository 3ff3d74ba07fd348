"""Paper 000's study, the claims (pure: the bars rows -> :class:`~priorlab.studies.claims.Claim`):
recovery of every bar by the max-rule model and its difference to the linear model (:func:`recovery_claims`)."""

from __future__ import annotations

from priorlab.studies.claims import Claim
from priorlab.studies.criteria import criterion
from priorlab.studies.intervals import clopper_pearson, newcombe_paired_difference
from priorlab.studies.mssc_experiments.aggregate import recovery_table


def paired_table(rows: list[dict], bars: str, kinds: dict[str, str]) -> tuple[int, int, int, int]:
    """Seeds of ``bars`` where both models recover every bar, only the max rule, only the linear model,
    neither (the seeds both models ran)."""
    by = {}
    for r in rows:
        if r["bars"] == bars and kinds.get(r["model"]) in ("mssc", "linear_ssc"):
            by.setdefault(r["seed"], {})[kinds[r["model"]]] = bool(r["recovered"])
    pairs = [(s["mssc"], s["linear_ssc"]) for s in by.values() if len(s) == 2]
    return (sum(m and lin for m, lin in pairs), sum(m and not lin for m, lin in pairs),
            sum(lin and not m for m, lin in pairs), sum(not (m or lin) for m, lin in pairs))


def recovery_claims(rows: list[dict], kinds: dict[str, str]) -> list[Claim]:
    """Criteria ``000.bars_recovery`` and ``000.bars_vs_linear`` (:mod:`priorlab.studies.criteria`)
    on every occluding-bars entry (e.g. two noise levels): the max-rule model's rate of recovering every
    bar (Clopper–Pearson) and its difference to the linear model's, paired by seed (both models are
    fitted to the data drawn with that seed; Newcombe's method 10 for paired data)."""
    table = recovery_table(rows)
    claims = []
    for bars in dict.fromkeys(b for (_, b), e in table.items() if e["variant"] == "occlusion"):
        occ = {kinds[m]: e for (m, b), e in table.items() if b == bars}
        mx, lin = occ.get("mssc"), occ.get("linear_ssc")
        if mx:
            claims.append(criterion("000.bars_recovery").decide(
                [("", clopper_pearson(mx["recovered"], mx["n"]))], f"max rule {mx['recovered']} of {mx['n']} seeds",
                subject=bars))
        if mx and lin:
            a, b, c, d = paired_table(rows, bars, kinds)
            claims.append(criterion("000.bars_vs_linear").decide(
                [("", newcombe_paired_difference(a, b, c, d))],
                f"max rule {mx['recovered']} / {mx['n']}, linear {lin['recovered']} / {lin['n']} seeds; "
                f"on the same seed both {a}, max rule only {b}, linear only {c}, neither {d}", subject=bars))
    return claims
