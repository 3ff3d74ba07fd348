"""Issue 10: the supervised-ceiling trainer, its stopping rule and the relative semi-supervised claim."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
import yaml

from priorlab.config import ParamsError, SupervisedCeilingParams, load_params, parse_params
from priorlab.studies.fmvae_experiments.aggregate import semi_supervised_entry
from priorlab.studies.fmvae_experiments.report import semi_supervised_table
from priorlab.io import unpack_flags
from priorlab.studies.fmvae_experiments.supervised_ceiling import pooled, relative_verdict, should_stop, train_classifier
from priorlab.nets import build_encoder

ROOT = Path(__file__).resolve().parents[1]


def blobs(n: int, seed: int, dim: int = 8, classes: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    """``classes`` well separated Gaussian blobs (centres 6 apart on the first axes, unit noise)."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(classes, (n,), generator=g)
    x = torch.randn(n, dim, generator=g)
    x[torch.arange(n), y] += 6.0
    return x, y


def cfg(**kw) -> SupervisedCeilingParams:
    base = dict(batch_size=32, lr=1e-2, eval_every=10, min_steps=50, plateau_fraction=0.2, max_steps=400, n_val=200)
    return SupervisedCeilingParams(**{**base, **kw})


@pytest.mark.parametrize("history, min_evals, stop", [
    ([0.5, 0.6, 0.7], 2, False),                       # still rising
    ([0.5, 0.9, 0.8, 0.85, 0.9], 5, True),             # last 20 % (one evaluation) ties the best: no gain
    ([0.5, 0.9, 0.8, 0.85, 0.91], 5, False),           # the last one beats it
    ([0.5, 0.9, 0.8, 0.85, 0.9], 6, False),            # too few steps for the rule yet
    ([0.5] + [0.9] * 8 + [0.95, 0.94], 5, False),      # the last 20 % (two) hold the best
    ([0.5] + [0.95] * 8 + [0.94, 0.93], 5, True),
])
def test_plateau_rule(history, min_evals, stop):
    assert should_stop(history, 0.2, min_evals) is stop


def test_ceiling_reaches_100_percent_on_a_separable_problem_and_stops_at_its_plateau():
    torch.manual_seed(0)
    net = build_encoder("mlp", (8,), 3, [16], [])
    out = train_classifier(net, lambda x: x, blobs(600, 0), blobs(200, 1), blobs(300, 2), cfg(), seed=0)
    assert out["accuracy"] >= 0.99 and out["val_accuracy"] >= 0.99
    assert out["stopped"] == "plateau" and 50 <= out["steps"] < 400
    assert should_stop(out["val_history"], 0.2, 5) and not should_stop(out["val_history"][:-1], 0.2, 5)
    again = train_classifier((torch.manual_seed(0), build_encoder("mlp", (8,), 3, [16], []))[1], lambda x: x,
                             blobs(600, 0), blobs(200, 1), blobs(300, 2), cfg(), seed=0)
    assert again == out  # seeded: the same run twice, no wall-clock fields


def test_a_flat_history_stops_after_min_steps_and_a_capped_one_is_not_plateaued():
    torch.manual_seed(0)
    net = build_encoder("mlp", (8,), 3, [16], [])
    out = train_classifier(net, lambda x: x, blobs(300, 0), blobs(100, 1), blobs(100, 2), cfg(lr=1e-12), seed=0)
    assert out["stopped"] == "plateau" and out["steps"] == 50 and out["best_step"] == 10
    torch.manual_seed(0)
    capped = train_classifier(build_encoder("mlp", (8,), 3, [16], []), lambda x: x, blobs(300, 0), blobs(100, 1),
                              blobs(100, 2), cfg(lr=1e-3, min_steps=30, max_steps=30), seed=0)
    assert capped["val_history"][-1] > max(capped["val_history"][:-1])  # still rising at the cap
    assert capped["stopped"] == "max_steps" and capped["steps"] == 30 and len(capped["val_history"]) == 3


def test_an_interrupted_ceiling_resumes_to_the_uninterrupted_result(tmp_path, monkeypatch):
    """The ceiling trains through the shared trainer: its checkpoint (every evaluation) holds the
    validation history, the best weights and the sampler's stream, so a run killed mid-way and resumed
    stops at the same step with the same record as an uninterrupted one."""
    from priorlab.models.classifier import Classifier

    def run(checkpoint=None):
        torch.manual_seed(0)
        net = build_encoder("mlp", (8,), 3, [16], [])
        out = train_classifier(net, lambda x: x, blobs(600, 0), blobs(200, 1), blobs(300, 2), cfg(lr=3e-3), seed=0,
                               checkpoint=checkpoint, fingerprint="f")
        return out, [v.clone() for v in net.state_dict().values()]

    reference, weights = run()
    assert reference["steps"] > 40
    original = Classifier.before_step

    def interrupt(self, step):
        if step == 37:
            raise KeyboardInterrupt
        original(self, step)

    monkeypatch.setattr(Classifier, "before_step", interrupt)
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "ceiling.pt")
    assert torch.load(tmp_path / "ceiling.pt", weights_only=False)["step"] == 30
    monkeypatch.setattr(Classifier, "before_step", original)
    resumed, resumed_weights = run(tmp_path / "ceiling.pt")
    assert resumed == reference and all(torch.equal(a, b) for a, b in zip(weights, resumed_weights))
    assert not (tmp_path / "ceiling.pt").exists()


def test_relative_criterion():
    low = relative_verdict(0.772, 0.937)
    assert low["share"] == pytest.approx(0.8239, abs=1e-4) and low["relative_reached"] is False
    assert relative_verdict(0.95 * 0.9, 0.9)["relative_reached"] is True
    assert relative_verdict(0.94 * 0.9, 0.9)["relative_reached"] is False
    assert relative_verdict(None, 0.9)["relative_reached"] is None
    with pytest.raises(ValueError):
        relative_verdict(0.5, 0.0)


def _record(run: str, acc: float, factor: str, fraction: float) -> dict:
    return {"run": run, "model_extras": {"heldout_accuracy": acc, "supervised_factor": factor},
            "model_params": {"labelled_fraction": fraction, "delta": 100.0}}


def test_semi_supervised_entry_reads_the_ceiling():
    params = load_params(ROOT / "profiles" / "cpu.yaml")
    rep = lambda acc: {"accuracy": acc, "correct": "ff"}  # noqa: E731
    ceilings = {"targets": {
        "dsprites:shape": {"native": "32", "resolutions": {
            "32": {"accuracy": 0.80, "stopped": "plateau", "n_test": 1000, "replicates": [rep(0.79), rep(0.81)]},
            "64": {"accuracy": 0.99, "stopped": "plateau", "n_test": 1000, "replicates": [rep(0.99)]}}},
        "mnist:label": {"native": "28", "resolutions": {"28": {"accuracy": 0.98, "stopped": "max_steps", "n_test": 500,
                                                               "replicates": [rep(0.98)]}}}}}
    ds = semi_supervised_entry(params, "dsprites-fmvae_ss-0", _record("dsprites-fmvae_ss-0", 0.772, "shape", 0.4), ceilings)
    mn = semi_supervised_entry(params, "mnist-fmvae_label-0", _record("mnist-fmvae_label-0", 0.90, "label", 0.1), ceilings)
    assert ds["ceilings"] == {"32": 0.80, "64": 0.99} and ds["ceiling"] == 0.80 and ds["ceiling_plateaued"]
    assert ds["ceiling_replicates"] == [0.79, 0.81] and ds["ceiling_correct"] == ["ff", "ff"]
    assert ds["relative_reached"] is True and not ds["reached"]  # 96.5 % of its ceiling; the absolute 95 % is not met
    assert mn["ceiling_capped"] and not mn["ceiling_plateaued"] and mn["ceiling_n_test"] == 500
    missing = semi_supervised_entry(params, "mnist-fmvae_label-0", _record("mnist-fmvae_label-0", 0.9, "label", 0.1), {})
    assert missing["ceiling"] is None and missing["relative_reached"] is None
    table = semi_supervised_table({"a": ds, "b": mn, "c": missing})
    assert table[0].count("ceiling") == 5 and "96.5%" in table[2] and "| – |" in table[4]


def test_a_ceiling_pools_its_replicates_and_plateaus_only_when_each_did():
    torch.manual_seed(0)
    reps = []
    for k, lr in enumerate((1e-2, 1e-2, 1e-3)):
        out = train_classifier(build_encoder("mlp", (8,), 3, [16], []), lambda x: x, blobs(300, 0), blobs(100, 1),
                               blobs(100, 2), cfg(lr=lr, min_steps=30, max_steps=30 if k == 2 else 400), seed=k)
        reps.append({"setup": "s", "factor": "f", "resolution": 8, "classes": 3, "n_train": 300, "n_val": 100,
                     "n_test": 100, "encoder": "mlp", "seed": k, **out})
    both = pooled(reps[:2])
    assert both["accuracy"] == pytest.approx((reps[0]["accuracy"] + reps[1]["accuracy"]) / 2)
    assert both["stopped"] == "plateau" and [r["seed"] for r in both["replicates"]] == [0, 1]
    hits = unpack_flags(both["replicates"][1]["correct"], 100)
    assert hits.mean() == pytest.approx(reps[1]["accuracy"])  # the per-point record is the accuracy's
    assert pooled(reps)["stopped"] == "max_steps"  # one capped replicate: the ceiling did not plateau


def test_ceiling_params_are_validated():
    raw = yaml.safe_load((ROOT / "profiles" / "tiny.yaml").read_text())
    for mutate, key in ((lambda s: s["targets"].update(nowhere="shape"), "supervised_ceiling.targets"),
                        (lambda s: s.update(min_steps=0), "supervised_ceiling.min_steps"),
                        (lambda s: s.update(plateau_fraction=1.0), "supervised_ceiling.plateau_fraction"),
                        (lambda s: s.update(min_steps=10**6), "supervised_ceiling.min_steps"),
                        (lambda s: s.update(resolutions=[-1]), "supervised_ceiling.resolutions[0]"),
                        (lambda s: s.update(replicates=0), "supervised_ceiling.replicates")):
        r = copy.deepcopy(raw)
        mutate(r["supervised_ceiling"])
        with pytest.raises(ParamsError, match=key.replace("[", r"\[")):
            parse_params(r)


def test_confusion_lines_name_the_largest_confusion():
    from priorlab.studies.fmvae_experiments.report import confusion_lines

    r = {"supervised_factor": "shape", "confusion": [[90, 10, 0], [5, 50, 45], [0, 0, 100]]}
    text = "\n".join(confusion_lines("run-0", r))
    assert "sends 45% of label 1 to cluster 2" in text and "| label 0 | 100 | 90% | 10% | 0% |" in text
    assert confusion_lines("run-0", {"supervised_factor": "shape"}) == []


def test_semi_supervised_diagnosis_names_the_merged_labels_and_the_ceilings_convergence():
    from priorlab.studies.fmvae_experiments.diagnosis import diagnosis_markdown, diagnosed, merged

    assert merged([[90, 10, 0], [5, 50, 45], [0, 0, 100]]) == (1, 2, 0.45)
    entry = lambda acc, conf, unit: {"supervised_factor": "shape", "labelled_fraction": 0.4,  # noqa: E731
                                     "heldout_accuracy": acc, "confusion": conf, "unit": unit}
    semi = {"a-0": entry(0.77, [[50, 0, 50], [0, 99, 1], [20, 0, 80]], "a"),
            "a_r1-1": entry(0.60, [[80, 0, 20], [0, 60, 40], [0, 0, 100]], "a_r1")}
    rep = lambda seed, stopped: {"seed": seed, "accuracy": 0.9, "stopped": stopped, "steps": 6000,  # noqa: E731
                                 "best_step": 5000}
    ceilings = {"targets": {"a:shape": {"native": "32", "resolutions": {"32": {"replicates": [
        rep(0, "plateau"), rep(1, "max_steps")]}}}}}
    claims = [{"key": "001.semi_supervised/shape, 40% labels", "verdict": "not reproduced"},
              {"key": "001.semi_supervised_relative/shape, 40% labels", "verdict": "untestable"}]
    settings = dict.fromkeys(semi, {"train_steps": 1500, "prior_init_steps": 2000})
    text = diagnosis_markdown(semi, ceilings, settings, claims)
    assert "| `a-0` | a | 0.770 | 50% of label 0 → cluster 2 |" in text
    assert "| `a_r1-1` | a_r1 | 0.600 | 40% of label 1 → cluster 2 |" in text
    assert "images at 32×32; the paper 64×64" in text and "did not converge in 1 of its classifiers" in text
    assert "the image size" in text and "**open**" in text
    reproduced = [dict(c, verdict="reproduced") for c in claims]
    assert "## shape" not in diagnosis_markdown(semi, ceilings, settings, reproduced)  # nothing to explain
    assert diagnosed("001.semi_supervised/shape, 40% labels") and not diagnosed("001.elbo_rises")
