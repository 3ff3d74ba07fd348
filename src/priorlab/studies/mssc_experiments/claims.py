"""Paper 000's study, the claims (pure: the bars rows -> :class:`~priorlab.studies.claims.Claim`):
recovery of every bar by the max-rule model and its difference to the linear model (:func:`recovery_claims`)."""

from __future__ import annotations

from priorlab.studies.claims import Claim
from priorlab.studies.criteria import criterion
from priorlab.studies.intervals import clopper_pearson, newcombe_difference
from priorlab.studies.mssc_experiments.aggregate import recovery_table


def recovery_claims(rows: list[dict], kinds: dict[str, str]) -> list[Claim]:
    """Criteria ``000.bars_recovery`` and ``000.bars_vs_linear`` (:mod:`priorlab.studies.criteria`)
    on every occluding-bars entry (e.g. two noise levels): the max-rule model's rate of recovering every
    bar (Clopper–Pearson) and its difference to the linear model's (Newcombe)."""
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
            claims.append(criterion("000.bars_vs_linear").decide(
                [("", newcombe_difference(mx["recovered"], mx["n"], lin["recovered"], lin["n"]))],
                f"max rule {mx['recovered']} / {mx['n']}, linear {lin['recovered']} / {lin['n']} seeds", subject=bars))
    return claims
