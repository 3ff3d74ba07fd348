"""Paper 003's fidelity table (``reports/sparse_vae_experiments/fidelity.md``): every setting of the
three experiments as the paper states it, as the authors' released code (``gemoran/sparse-vae-code``)
runs it, and as this run ran it — the last column read from the params that produced the numbers,
so the table cannot drift from them — with the option that selects each.

Citations: P = the paper (TMLR 2022; sections, tables, equations); C = the released code
(``file:line`` at its published head). Where the paper and the code differ the paper is the
default and the code's choice an option, or the difference is named as a deviation.
"""

from __future__ import annotations

from typing import Callable

from priorlab.config import Params
from priorlab.config.models import encoder_input_of, loss_scaling_of
from priorlab.studies.claims import md_table

Row = tuple[str, str, str, Callable[[Params], str], str]
"""(setting, paper, released code, ours from the params, the option that selects it)."""


def _models(names: list[str], p: Params) -> str:
    return ", ".join(f"{m} ({p.models[m].kind}" + (f", β {p.models[m].beta:g}" if p.models[m].beta != 1 else "")
                     + (f", {loss_scaling_of(p.models[m])}" if p.models[m].kind in ("vae", "sparse_vae") else "") + ")"
                     for m in names) or "—"


def _first(names: list[str], p: Params, kind: str):
    return next((p.models[m] for m in names if p.models[m].kind == kind), None)


def _steps(t, n_train: int | None = None) -> str:
    if n_train is None:
        return f"{t.steps} steps × batch {t.batch_size}, lr {t.lr:g}"
    epochs = t.steps * t.batch_size / max(n_train, 1)
    return f"{t.steps} steps × batch {t.batch_size} ≈ {epochs:.0f} epochs of {n_train} rows, lr {t.lr:g}"


SHARED: list[Row] = [
    ("decoder trunk (sparse VAE)", "f_θ(w_j ⊙ z_i) shared over features (eq. 1); \"3 hidden layers\" (table 6)",
     "Linear(K,H, no bias) → ReLU → Linear(H,H) → ReLU, per-feature Linear(H,1) heads (C models.py:59-65)",
     lambda p: f"K → {' → '.join(map(str, p.sparse_vae_study.hidden))} (first layer bias-free), per-feature heads",
     "`hidden` (≥ 2 layers enforced: a one-layer bias-free trunk is homogeneous in z)"),
    ("VAE / β-VAE decoder", "\"the same nets\"", "Linear(K,H, no bias) → ReLU → Linear(H,H) → ReLU → Linear(H,G) "
     "(C models.py:308-313)", lambda p: "plain MLP K → hidden → G (first layer with bias)",
     "deviation (small): a bias in the first layer"),
    ("encoder", "MLP, same width per layer (C.3)", "G → H → H → (μ, log σ²) (C models.py:49-57)",
     lambda p: f"G → {' → '.join(map(str, p.sparse_vae_study.hidden))} → 2K", "`hidden`"),
    ("λ0, λ1; a, b", "10, 1; a = 1, b = G (table 6, C.2)", "10, 1; a = 1, b = G (C run_sim1.py:72-73, 161-162)",
     lambda p: ", ".join(f"{m.lambda0:g}, {m.lambda1:g}" for m in [_first(p.sparse_vae_study.models, p, "sparse_vae")]
                         if m is not None) + "; a = 1, b = G", "`lambda0`, `lambda1`"),
    ("p* update", "eq. 57 with the Laplace densities (λ_s/2)e^{-λ_s|w|}",
     "drops λ_s/2 (C model_trainer.py:96-98)", lambda p: "the code's form" if not any(
         p.models[m].density_constants for m in p.sparse_vae_study.models if p.models[m].kind == "sparse_vae")
     else "eq. 57", "`density_constants: true` = eq. 57"),
    ("θ init", "—", "θ ~ U(0, 1), unseeded (C models.py:247)",
     lambda p: "paper: 0.5; released_code: θ ~ U(0, 1) from the run's seeded generator",
     "`loss_scaling` (paper: a deterministic start)"),
    ("σ_j prior", "σ_j² ~ IG(ν/2, νξ/2), ν = 3, ξ: the 5 % quantile of the sample variances is the prior's 90 % "
     "quantile (C.2, eq. 60)", "the 5 % quantile of the stds (ddof 0), squared; all rows, test rows included "
     "(C dataset.py:161-173)",
     lambda p: "paper: the quantile of the variances (ddof 1) of the training rows; released_code: the code's "
     "rule on the training rows", "likelihood `gaussian_ig` / `gaussian_ig_released`"),
    ("σ_j for the baselines", "—", "VAE, β-VAE and VSC get the same IG σ prior (C models.py:431-434, 635-638)",
     lambda p: "each deep model the σ_j of its objective (`gaussian_ig` or `gaussian_ig_released`); VSC "
     "`gaussian_ig`", "(the study's setup)"),
    ("loss scaling", "the ELBO summed over data; the log prior of W once (eq. 7-8)",
     "recon an MSE mean over B·G; KL a mean over B·K; SSL penalty / B; σ objective / B (C models.py:125, 189, "
     "206-211, 263)", lambda p: "as written: `paper` (−log p(x|z) + β·KL + penalty / N per observation); as "
     "released: " + _models([m for m in p.sparse_vae_study.variant_models
                             if p.models[m].kind in ("vae", "sparse_vae")], p),
     "`loss_scaling: paper | released_code`"),
    ("σ_j update", "MAP point estimate", "log σ_j a parameter from log std_j, one Adam step (lr 0.01) per batch on "
     "the code's σ objective (C models.py:44-45, 206-211; model_trainer.py:62-66, 88-90)",
     lambda p: "paper: stochastic full-data MAP after each step; released_code: the code's — log σ_j from the "
     "training rows' std, the model's Adam on the code's σ objective", "likelihood `gaussian_ig` / "
     "`gaussian_ig_released`"),
    ("optimiser", "Adam (C.3)", "Adam, weight decay 0; the last partial batch kept (C model_trainer.py:65-66)",
     lambda p: "Adam, no weight decay; batches drawn by permutation, remainder dropped", "—"),
]

SYNTHETIC: list[Row] = [
    ("data", "N = 1000, G = 7, 2 factors, f of eq. 9", "the same map (C process_data.py:24-45)",
     lambda p: f"N = {p.sparse_vae_study.n}, the same map", "`n`"),
    ("noise", "σ² = 0.5 (eq. 9)", "0.5·randn: std 0.5, σ² = 0.25 (C process_data.py:44)",
     lambda p: f"std {p.sparse_vae_study.noise_std:g}", "`noise_std` (0.707 = the text)"),
    ("split", "not stated", "2 folds by randint (≈ 510 / 490)", lambda p: "exact 50/50 permutation", "—"),
    ("ρ; data sets per ρ", "0, 0.2, …, 0.8; 25 (fig. 3)", "25 (C sim1_eval.R:7)",
     lambda p: f"{', '.join(f'{r:g}' for r in p.sparse_vae_study.rhos)}; {p.sparse_vae_study.datasets_per_rho} "
     f"(variants: {p.sparse_vae_study.variant_datasets_per_rho})", "`rhos`, `datasets_per_rho`"),
    ("K; width", "5; 50 (table 6)", "5; 50 (C run_sim1.py:154, 157)",
     lambda p: f"{p.sparse_vae_study.latent_dim}; {p.sparse_vae_study.hidden}", "`latent_dim`, `hidden`"),
    ("training", "200 epochs, batch 100, lr 0.01 (table 6)", "200 epochs of ≈ 510 rows = 1200 steps, lr 0.01",
     lambda p: _steps(p.sparse_vae_study.train, p.sparse_vae_study.n // 2), "`train`"),
    ("models", "sparse VAE, VAE, VSC in fig. 3; β-VAE β ∈ {2,4,6,8,16} (table 6)",
     "sparse VAE, VAE, VSC, β ∈ {1,2,4,6,8,16} (C run_sim1.py:47)",
     lambda p: _models(p.sparse_vae_study.models, p) + "; beside: " + _models(p.sparse_vae_study.variant_models, p)
     + "; PCA, FactorAnalysis", "`models`, `variant_models`"),
    ("VSC baseline", "α = 0.01 (table 6)", "α 0.01, 10 pseudo-inputs, c = 10, softmax selector, sparsity × G; "
     "run_sim1.py:84 fails on VSC as released", lambda p: "paper 002's VSC (α from the entry, 20 pseudo-inputs, its "
     "selector, c = 200), λ = 1 from the start", "the `vsc` entry's options"),
    ("MSE", "held-out MSE (fig. 3a)", "reconstruction at a sampled z (C run_sim1.py:84-86)",
     lambda p: "reconstruction at the posterior mean, all held-out points", "—"),
    ("DCI", "DCI disentanglement (§4)", "GradientBoostingRegressor on the continuous z, 16 train / 16 test points "
     "(C evaluator.py:163-197, dci.py:43-57)", lambda p: (
         "GradientBoostingRegressor on the continuous z, all held-out points" if p.sparse_vae_study.dci_mode
         == "regression" else f"classification of z in {p.sparse_vae_study.dci_bins} bins "
         f"({p.sparse_vae_study.dci_backend})"), "`dci_mode`"),
    ("support", "F-score of the support of W (fig. 4c)", "|W| < 1e-2 or p* < 0.5 → 0, Hamming vs the truth "
     "(C sim1_eval.R:92-116)", lambda p: "p* > 0.5, columns matched by the Hungarian rule, F1 over 7 × 2",
     "—"),
    ("verdicts", "boxplots over 25 data sets", "—",
     lambda p: "medians over data sets; collapse (MSE > 3 or < 2 active columns) reported as a rate", "—"),
]


def _real(kind: str) -> list[Row]:
    get = (lambda p: p.sparse_vae_study.movielens) if kind == "movielens" else (lambda p: p.sparse_vae_study.single_cell)
    if kind == "movielens":
        rows: list[Row] = [
            ("data", "ML-25M, ratings ≥ 4 → 1, 100,000 users, top 300 movies (C.1)",
             "the same, users with ≥ 20 positives (C process_data.py:106-136)",
             lambda p: f"MovieLens small (dslabs, 671 users), top {get(p).n_items} movies, users with ≥ "
             f"{get(p).min_user_positives} positives", "deviation: the offline data set"),
            ("splits", "5 (§4)", "5 in the tables; flag default 2", lambda p: f"{get(p).splits}", "`splits`"),
            ("K; nets", "30 (table 6; 50 in C.5); 3 × 300", "K 50 in the table script; H = 300, 2 layers",
             lambda p: f"{get(p).latent_dim}; {get(p).hidden}", "`latent_dim`, `hidden`"),
            ("training", "100 epochs × batch 100 of ≈ 80,000 users ≈ 80,000 steps, lr 1e-4 (table 6)",
             "flag defaults lr 0.01, 100 epochs", lambda p: _steps(get(p).train) + " (a few hundred training users)",
             "`train` (the data set is ≈ 150× smaller)"),
            ("β-VAE", "β ∈ {2, 4, 6, 8, 16}; β = 2 best (table 6, table 1a)", "β ∈ {2, 4, 6, 8, 16} "
             "(C movielens_tables.py:35)", lambda p: ", ".join(f"β {p.models[m].beta:g}" for m in get(p).models
                                                             if p.models[m].kind == "vae" and p.models[m].beta != 1)
             or "—", "the `vae` entries' `beta`"),
            ("encoder input", "not stated (C.1 describes the preprocessing only)",
             "every model sees x / Σ x (C dataset.py:158-159, model_trainer.py:77-79)",
             lambda p: ", ".join(sorted({encoder_input_of(p.models[m]) for m in get(p).models})) + " for every model",
             "`encoder_input` (the same for every model: validated)"),
            ("ranking metrics", "Recall@5, NDCG@10 as Liang et al. (§4)",
             "the test row's own items ranked, no fold-in (C evaluator.py:123-161)",
             lambda p: f"Liang et al.'s fold-in ({get(p).foldin_fraction:g} in, the rest scored)", "`foldin_fraction`"),
        ]
    else:
        rows = [
            ("data", "Zeisel mouse cortex, 3005 cells, 558 genes, quantile-normalised (C.1)",
             "the same; trains on all cells (C run_zeisel.py:25-26)",
             lambda p: f"PBMC 68k reduced (700 cells), top {get(p).n_items} variable genes, {get(p).preprocess}",
             "deviation: the offline data set"),
            ("splits", "5 (§4)", "1 (no held-out cells)", lambda p: f"{get(p).splits}", "`splits`"),
            ("K; nets", "15; 3 × 100 (table 6)", "15; H = 100, 2 layers",
             lambda p: f"{get(p).latent_dim}; {get(p).hidden}", "`latent_dim`, `hidden`"),
            ("training", "100 epochs × batch 512 of ≈ 2404 cells = 500 steps, lr 0.01 (table 6)",
             "600 steps on 3005 cells", lambda p: _steps(get(p).train, 560), "`train`"),
            ("models (table 4)", "sparse VAE, VAE, NMF, VSC, OI-VAE", "— (no classifier in the code)",
             lambda p: _models(get(p).models, p) + ", NMF; PCA in the table, outside the claim; no OI-VAE",
             "`models`"),
        ]
    if kind == "movielens":
        rows.append(("models (table 1a)", "sparse VAE, VAE, β-VAE, OI-VAE, VSC, NMF", "—",
                     lambda p: _models(get(p).models, p) + ", NMF; no OI-VAE", "`models`"))
    rows.append(("NMF", "scikit-learn 0.24, alpha = 1.0 on W and H (C.3)", "NMF with sklearn's default alpha = 0 "
                 "(C run_zeisel.py:37)", lambda p: f"alpha_W = alpha_H = {get(p).nmf_alpha:g} in scikit-learn ≥ 1.0, "
                 "which scales the penalty by the number of features / samples (stronger than 0.24's)",
                 "`nmf_alpha`"))
    return rows


def fidelity_markdown(params: Params) -> str:
    """The fidelity table of this run's params, as Markdown."""
    lines = ["# Paper 003: fidelity table", "",
             f"Profile `{params.profile}`. Every setting as the paper states it, as the released code runs it and as "
             "this run ran it (read from the params that produced `README.md`), with the option that selects it. "
             "P: the paper; C: the authors' released code (`gemoran/sparse-vae-code`).", ""]
    sections = [("Every experiment", SHARED), ("Synthetic (§2.2, §4, fig. 2-4)", SYNTHETIC)]
    if params.sparse_vae_study.movielens.models:
        sections.append(("MovieLens (table 1a)", _real("movielens")))
    if params.sparse_vae_study.single_cell.models:
        sections.append(("Single cell (table 4)", _real("single_cell")))
    for title, rows in sections:
        lines += [f"## {title}", ""] + md_table(["setting", "paper", "released code", "this run", "option"],
                                                [[s, paper, code, ours(params), opt] for s, paper, code, ours, opt in rows])
        lines.append("")
    return "\n".join(lines) + "\n"
