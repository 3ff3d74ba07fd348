"""Offline ``dvc plots show/diff`` (issue 16): the vendored Vega template, the data plots declared in
``dvc.yaml``, and the page ``dvc plots diff`` writes, opened in headless Chromium with the network
blocked (negative control: DVC's default CDN template under the same block draws nothing)."""

from __future__ import annotations

import configparser
import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "plots" / "vega_offline.html"
VENDOR = ROOT / "plots" / "vendor"
DVC = str(Path(sys.executable).with_name("dvc"))
BUNDLE = re.compile(r'<script data-package="([^"@]+)@([^"]+)">(.*?)</script>', re.S)
LOADS_BY_URL = re.compile(r"<(?:script|link|img|iframe|object|embed|source)\b[^>]*\b(?:src|href)\s*=", re.I)
CURVES = re.compile(r"reports/live/train/.+/([^/]+)/plots/metrics")
REV_COLOURS = ((0x94, 0x5D, 0xD6), (0x13, 0xAD, 0xC7))  # dvc_render's colours of the 1st / 2nd revision


def plot_definitions() -> list[tuple[str, dict]]:
    """The data plots of dvc.yaml (image folders left out): ``(id, properties)``."""
    entries = yaml.safe_load((ROOT / "dvc.yaml").read_text())["plots"]
    return [next(iter(e.items())) for e in entries if isinstance(e, dict)]


# --------------------------------------------------------------------------- fast checks


def test_template_inlines_the_pinned_bundles_and_loads_nothing_by_url():
    text = TEMPLATE.read_text(encoding="utf8")
    manifest = json.loads((VENDOR / "vendor.json").read_text())
    inlined = {name: (version, hashlib.sha256(code.encode()).hexdigest()) for name, version, code in BUNDLE.findall(text)}
    assert inlined == {name: (m["version"], m["sha256"]) for name, m in manifest.items()}
    assert set(inlined) == {"vega", "vega-lite", "vega-embed"}
    assert "{plot_divs}" in text and "{scripts}" not in text  # DVC's CDN <script> tags have no place to go
    assert not LOADS_BY_URL.search(BUNDLE.sub("", text))
    licences = (VENDOR / "THIRD_PARTY_LICENSES.txt").read_text()
    assert all(f"{name}@{m['version']} (BSD-3-Clause)" in licences for name, m in manifest.items())


def test_dvc_config_makes_the_offline_template_the_default():
    config = configparser.ConfigParser()
    config.read(ROOT / ".dvc" / "config")
    assert (ROOT / ".dvc" / config["plots"]["html_template"]).resolve() == TEMPLATE


def curve_definitions(runs) -> list[tuple[str, dict]]:
    """The training-curve plots the train stage declares (its ``plots:``), for ``runs``: ``(id, properties)``."""
    body = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["train"]["do"]
    defs = []
    for entry in body.get("plots", []):
        path, props = next(iter(entry.items()))
        defs += [(path.replace("${key}", run).replace("${item.group}", spec.get("group", "baselines")),
                  {k: v for k, v in props.items() if k != "cache"}) for run, spec in runs.items()]
    return defs


def test_training_curves_are_declared_for_every_run():
    """The train stage declares each run's dvclive curves as its plots output (in git, and restorable
    from DVC's run-cache, which a ``persist`` or plain uncached output is not) and the summary as a
    cached output (not a headline number: ``dvc metrics show`` lists the evaluate stage's), so every run
    of every profile is on the page, and only once: a top-level entry for the same files would draw
    them a second time."""
    body = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["train"]["do"]
    assert body["plots"] == [{"reports/live/train/${item.group}/${key}/plots/metrics": {"cache": False, "template": "smooth",
                                                                                       "x": "step"}}]
    assert "metrics" not in body and "reports/live/train/${item.group}/${key}/metrics.json" in body["outs"]
    assert not [plot_id for plot_id, _ in plot_definitions() if CURVES.fullmatch(plot_id)]
    runs = yaml.safe_load((ROOT / "profiles" / "cpu.yaml").read_text())["runs"]
    assert all(CURVES.fullmatch(plot_id) for plot_id, _ in curve_definitions(runs))


def test_claim_plots_name_columns_of_their_files():
    checked = 0
    for plot_id, props in plot_definitions():
        for path, fields in props.get("y", {}).items() if isinstance(props.get("y"), dict) else ():
            if (ROOT / path).is_file():  # committed results (the vsc CSVs appear with the next repro)
                header = (ROOT / path).read_text().splitlines()[0].split(",")
                assert {props["x"], *np.atleast_1d(fields)} <= set(header), plot_id
                checked += 1
    assert checked >= 1


def plot_files() -> dict[str, str]:
    """Every file or folder a plot of dvc.yaml reads (image folders included): path -> plot id."""
    entries = yaml.safe_load((ROOT / "dvc.yaml").read_text())["plots"]
    files = {e: e for e in entries if isinstance(e, str)}
    for plot_id, props in plot_definitions():
        y = props.get("y")
        for path in (y if isinstance(y, dict) else {plot_id: None}):
            files[path] = plot_id
    return files


def stage_outs() -> list[str]:
    """The outputs (outs, metrics, plots) of every stage of dvc.yaml, ``${...}`` of foreach stages as written."""
    outs = []
    for stage in yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"].values():
        for section in ("outs", "metrics", "plots"):
            for out in stage.get("do", stage).get(section, []):
                outs.append(next(iter(out)) if isinstance(out, dict) else out)
    return outs


def test_every_plot_reads_files_some_stage_writes():
    outs = stage_outs()
    patterns = [re.compile(re.sub(r"\\\$\\\{[^}]*\\\}", "[^/]+", re.escape(out)) + "(/.*)?") for out in outs]
    orphans = {path: plot_id for path, plot_id in plot_files().items()  # a file in an out, or a folder of outs
               if not any(p.fullmatch(path) for p in patterns) and not any(o.startswith(path + "/") for o in outs)}
    assert not orphans, f"dvc.yaml plots: no stage has these files in its outs: {orphans}"
    assert {"reports/isa_experiments/mig_vs_beta.csv",
            "reports/sparse_vae_experiments/recovery_vs_rho.csv"} <= set(plot_files())  # papers 004 and 003


@pytest.mark.parametrize("profile", ["cpu", "paper"])
def test_study_data_plots_name_the_columns_their_stages_write(profile):
    """The columns of the paper 003 / 004 data plots against what their writers make of the profile's
    study grid (the files themselves appear with the next full run)."""
    from priorlab.config import load_params
    from priorlab.studies import isa_experiments
    from priorlab.studies.isa_experiments.aggregate import strength_tables, study_frame
    from priorlab.studies import sparse_vae_experiments
    from priorlab.studies.sparse_vae_experiments.aggregate import recovery_table, summarise
    from tests.test_study_plot_tables import fake_isa_rows, fake_sparse_rows

    params = load_params(ROOT / "profiles" / f"{profile}.yaml")
    headers = {f"reports/{isa_experiments.NAME}/{name}": list(t.columns)
               for name, t in strength_tables(study_frame(fake_isa_rows(params))).items()}
    headers[f"reports/{sparse_vae_experiments.NAME}/recovery_vs_rho.csv"] = recovery_table(
        summarise(fake_sparse_rows(params)))[0]
    plotted = set()
    for plot_id, props in plot_definitions():
        for path, fields in props["y"].items() if isinstance(props.get("y"), dict) else ():
            if path in headers:
                missing = {props["x"], *np.atleast_1d(fields)} - set(headers[path])
                assert not missing, f"{plot_id}: {path} has no columns {sorted(missing)} ({headers[path]})"
                plotted.add(path)
    # every table is plotted but FactorVAE's γ grid, which the cpu profile does not run (a named column a
    # profile does not write would empty the whole plot: dvc.yaml plots the claim's models only)
    assert plotted == set(headers) - {f"reports/{isa_experiments.NAME}/mig_vs_gamma.csv"}
    assert (f"reports/{isa_experiments.NAME}/mig_vs_gamma.csv" in headers) == (profile == "paper")


@pytest.mark.slow
def test_vsc_elbo_data_plots_hold_the_mean_test_elbo_per_prior_strength(tmp_path, monkeypatch):
    """``elbo_vs_alpha.csv`` / ``elbo_vs_beta.csv`` (paper 002, fig. 1) from the committed cpu metrics."""
    from priorlab.config import load_params
    from priorlab.studies import runs
    from priorlab.io import read_json
    from priorlab.studies.vsc_experiments import report as vsc_experiments
    from priorlab.studies.vsc_experiments.aggregate import ELBO_GROUP

    params = load_params(ROOT / "profiles" / "cpu.yaml")
    monkeypatch.setattr(runs, "is_trained", lambda params, run: True)  # metrics are in git, models are not
    monkeypatch.chdir(ROOT)
    vsc_experiments.elbo_experiment(params, tmp_path)
    expected: dict[tuple[str, float], list[float]] = {}
    for run in runs.group_runs(params, ELBO_GROUP):
        spec = params.models[params.run(run).model]
        key = ("alpha", spec.alpha) if spec.kind == "vsc" else ("beta", spec.beta)
        expected.setdefault(key, []).append(read_json(runs.metrics_file(params, run))["elbo"])
    for col in ("alpha", "beta"):
        table = np.genfromtxt(tmp_path / f"elbo_vs_{col}.csv", delimiter=",", names=True)
        assert table.dtype.names == (col, "elbo_mean", "elbo_std") and len(table) == 3
        assert np.all(np.diff(table[col]) > 0)
        for row in table:
            e = expected[col, row[col]]
            np.testing.assert_allclose([row["elbo_mean"], row["elbo_std"]], [np.mean(e), np.std(e, ddof=1)], rtol=1e-9)


# --------------------------------------------------------------------------- the page in a browser


def _fixture_data(repo: Path, definitions: list[tuple[str, dict]], shift: float) -> int:
    """Writes tiny data for the data plots ``definitions`` (``shift`` moves every y); returns the number
    of plots the page will hold."""
    rng, n_plots, tables = np.random.default_rng(16), 0, {}
    for plot_id, props in definitions:
        if CURVES.fullmatch(plot_id):
            for term in ("elbo", "kl"):
                f = repo / plot_id / "train" / f"{term}.tsv"
                f.parent.mkdir(parents=True, exist_ok=True)
                y = np.cumsum(rng.normal(size=20)) + shift
                f.write_text("step\t" + term + "\n" + "".join(f"{50 * (i + 1)}\t{v:.4f}\n" for i, v in enumerate(y)))
                n_plots += 1
        else:
            for path, fields in props["y"].items():  # several plots may read one file: the union of columns
                cols = tables.setdefault(path, [props["x"]])
                cols += [f for f in np.atleast_1d(fields) if f not in cols]
            n_plots += 1
    for path, cols in tables.items():
        rows = np.column_stack([np.arange(1.0, 6.0), rng.normal(size=(5, len(cols) - 1)) + shift])
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        np.savetxt(repo / path, rows, "%.4f", ",", header=",".join(cols), comments="")
    return n_plots


def _run(*cmd: str, cwd: Path) -> str:
    return subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, text=True).stdout


def _browse(browser: str, page: Path, out: Path) -> tuple[str, np.ndarray, list[str]]:
    """Opens ``page`` in headless Chromium with DNS and proxy dead: (DOM after the scripts ran,
    screenshot RGB, http(s)/ws URLs the page itself requested)."""
    from PIL import Image

    shot, netlog = out.with_suffix(".png"), out.with_suffix(".netlog.json")
    dom = _run(browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--disable-background-networking", "--host-resolver-rules=MAP * ~NOTFOUND",
               "--proxy-server=http://127.0.0.1:9", "--window-size=1000,1400", "--virtual-time-budget=15000",
               f"--log-net-log={netlog}", f"--screenshot={shot}", "--dump-dom", page.as_uri(), cwd=out.parent)
    log = json.loads(netlog.read_text())
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    requested = [e["params"]["url"] for e in log["events"]
                 if e["type"] == start and e["params"].get("initiator") != "not an origin"  # the browser's own
                 and re.match(r"(https?|wss?)://", e["params"].get("url", ""))]
    return dom, np.asarray(Image.open(shot).convert("RGB")), requested


def _pixels_near(img: np.ndarray, rgb: tuple[int, int, int], tol: int = 40) -> int:
    return int((np.abs(img.astype(np.int16) - np.asarray(rgb, np.int16)).max(axis=-1) <= tol).sum())


def _n_colours(img: np.ndarray) -> int:
    return len(np.unique(img.astype(np.int32) @ np.array([1 << 16, 1 << 8, 1], np.int32)))


@pytest.mark.slow
def test_plots_diff_page_draws_both_revisions_with_the_network_blocked(tmp_path):
    browser = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
    if browser is None:
        pytest.skip("headless Chromium not found: install Debian's `chromium` package (`make test` does when it can)")
    from dvc_render.vega import VegaRenderer

    repo = tmp_path / "repo"
    shutil.copytree(ROOT / ".dvc" / "plots", repo / ".dvc" / "plots")  # a DVC repository with the project's
    shutil.copy(ROOT / ".dvc" / "config", repo / ".dvc" / "config")     # config (its page template) and templates
    (repo / "plots").mkdir()
    shutil.copy(TEMPLATE, repo / "plots" / TEMPLATE.name)
    runs = dict(list(yaml.safe_load((ROOT / "profiles" / "cpu.yaml").read_text())["runs"].items())[:2])
    definitions = plot_definitions() + curve_definitions(runs)  # every claim plot, 2 runs' curves
    (repo / "dvc.yaml").write_text(yaml.safe_dump({"plots": [{k: v} for k, v in definitions]}))
    n_plots = _fixture_data(repo, definitions, 0.0)
    _run("git", "init", "-q", cwd=repo)
    _run("git", "add", "-A", cwd=repo)
    _run("git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a", cwd=repo)
    _fixture_data(repo, definitions, 5.0)
    _run(DVC, "plots", "diff", "HEAD", "-o", "offline", cwd=repo)  # workspace vs HEAD, template of .dvc/config

    html = (repo / "offline" / "index.html").read_text(encoding="utf8")
    assert html.count("vegaEmbed(") == n_plots and not LOADS_BY_URL.search(BUNDLE.sub("", html))
    # control: the same page as DVC's default template makes it (Vega from a CDN)
    cdn = (repo / "offline" / "cdn.html")
    cdn.write_text(BUNDLE.sub("", html).replace("<head>", "<head>" + VegaRenderer.SCRIPTS, 1), encoding="utf8")
    dom, img, requested = _browse(browser, repo / "offline" / "index.html", tmp_path / "offline")
    assert requested == []
    assert len(re.findall(r'<canvas [^>]*class="marks"', dom)) == n_plots  # every plot drew
    assert _n_colours(img) > 20
    assert all(_pixels_near(img, c) > 300 for c in REV_COLOURS)  # both revisions' curves in the viewport

    dom, img, requested = _browse(browser, cdn, tmp_path / "cdn")
    assert any("cdn.jsdelivr.net" in url for url in requested)  # the page's requests are seen ... and blocked
    assert "<canvas" not in dom and _n_colours(img) == 1


def test_plot_titles_have_no_quotes():
    """DVC makes a plot's title its page element id: a quote in it breaks the page's script (that plot
    draws nothing)."""
    for plot_id, _ in plot_definitions():
        assert not set("'\"`") & set(plot_id), plot_id
