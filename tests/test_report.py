"""The report stage: tables from metrics files."""

from pathlib import Path

import pandas as pd

from priorlab.config import load_params
from priorlab.report import summary_frame, write_report

ROOT = Path(__file__).resolve().parents[1]


def fake(run, model, seed, elbo, mig=None, group="baselines"):
    r = {"run": run, "group": group, "setup": "smiley", "model": model, "seed": seed, "model_params": {"beta": 1.0},
         "test": {"elbo": elbo, "log_lik": elbo - 1, "kl": 1.0, "iw_log_likelihood": elbo + 0.5},
         "active_dims": 3, "versions": {"scikit-learn": "1.9.1"}}
    if mig is not None:
        r["disentanglement"] = {"mig": mig}
    return r


def test_summary_is_mean_and_std_over_seeds():
    from priorlab.report import results_frame

    frame = results_frame([fake("a-0", "vae", 0, -100.0, 0.1), fake("a-1", "vae", 1, -102.0, 0.3)])
    s = summary_frame(frame)
    assert s.loc[0, "seeds"] == 2
    assert s.loc[0, "test ELBO"] == "-101.000 ± 1.414"
    assert s.loc[0, "MIG"] == "0.200 ± 0.141"


def test_write_report_has_settings_tables_and_csv(tmp_path):
    params = load_params(ROOT / "profiles" / "tiny.yaml")
    results = [fake("smiley-vae-0", "vae", 0, -100.0, 0.25), fake("x-0", "vsc", 0, -90.0, group="sparsity")]
    path = write_report(params, results, tmp_path / "README.md")
    text = path.read_text()
    assert "## Settings" in text and "40 steps" in text
    assert "### baselines" in text and "### sparsity" in text
    assert "-100.000" in text and "0.250" in text
    csv = pd.read_csv(tmp_path / "results.csv")
    assert list(csv["model"]) == ["vae", "vsc"] and csv.loc[1, "MIG"] != csv.loc[1, "MIG"]  # NaN for no metric


def test_settings_name_the_models_with_their_own_train_steps():
    from pathlib import Path

    from priorlab.config import load_params
    from priorlab.report import settings_frame

    params = load_params(Path(__file__).resolve().parents[1] / "profiles" / "cpu.yaml")
    rows = dict(settings_frame(params).itertuples(index=False))
    assert "fmvae_ss 1500" in rows["train steps set per model"] and "vae " not in rows["train steps set per model"]


def test_training_curves_draw_only_the_terms_a_model_logged_without_warnings(tmp_path):
    """A model fitted in closed form (PPCA) logs no ELBO terms: one panel saying so, not empty panels
    with matplotlib's "No artists with labels" warning; a model logging one term gets one panel."""
    import warnings

    import matplotlib.pyplot as plt

    from priorlab.plots import curves

    drawn = []
    real_subplots = plt.subplots
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        curves.plt.subplots = lambda *a, **k: drawn.append(a[:2]) or real_subplots(*a, **k)
        try:
            curves.plot_training_curves([tmp_path / "none"], tmp_path / "empty.png", title="ppca")
            live = tmp_path / "live" / "train"
            (live / "plots" / "metrics" / "train").mkdir(parents=True)
            (live / "plots" / "metrics" / "train" / "kl.tsv").write_text("step\tkl\n0\t1.0\n1\t0.5\n")
            curves.plot_training_curves([live], tmp_path / "one.png")
        finally:
            curves.plt.subplots = real_subplots
    assert drawn == [(1, 1), (1, 1)] and (tmp_path / "empty.png").is_file() and (tmp_path / "one.png").is_file()
