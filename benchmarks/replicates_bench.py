"""Replicates on one GPU (issue 47): member-steps per second of N seeds trained as one vectorised model
(:func:`priorlab.train.replicates.fit_replicates`) against N, beside the standalone trainer
(:func:`priorlab.train.fit`, one seed per run: N separate runs cost N times one) and the plain PyTorch
loop of :mod:`benchmarks.gpu_bench`.

Cases (the paper profile's nets): VSC (Smiley, MLP 3000, 20 pseudo-inputs), the β-VAE (Smiley, MLP
3000) and the factorial mixture VAE (dSprites 64 px conv, I = 2), unsupervised and semi-supervised (its
SVI update after each step, and the semi-supervised factor's first-order update, run member by member
after the mapped loss: :meth:`~priorlab.models.protocol.LossStep.update_after_step`), at batch 64 and 500;
a case whose kind does not vectorise (:func:`~priorlab.train.replicates.vectorisable`) has the standalone
rows only; N in {1, 4, 16, 64}; eager, then compiled (torch.compile "default" of the
vectorised loss, of the model's forward for the standalone trainer).  A step's time is the difference
of two runs of different lengths over the difference in steps (set-up cancels), between
``torch.cuda.synchronize()`` calls; member-steps/s = N / that time.  ``noise: member`` (each member's
draws from its own generator, as its standalone run) is the default; at the largest N the eager row is
also timed with ``noise: batched`` (one draw for all members).

Run from the project's root: ``PYTHONPATH=src python -m benchmarks.replicates_bench --out DIR``
(``--tiny``: small nets, data and step counts, any device: the dry run of the test suite).  The record,
``DIR/replicates_bench.json``, is rewritten after every measurement; past ``--budget-s`` the remaining
measurements are listed as skipped (eager rows first, then compiled batch 64, then compiled 500).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.gpu_bench import (
    ROOT,
    PlainLoop,
    Results,
    build_bound,
    fit_seconds,
    load_profile,
    obs_shape_of,
    shrink_setup,
    sync,
    synthetic_dataset,
)

import torch  # noqa: E402,I001  (after priorlab, imported by gpu_bench: it sets OMP_WAIT_POLICY)

from priorlab.config import OptimParams
from priorlab.train.replicates import fit_replicates, vectorisable

CASES = {  # name -> (setup, model) of the paper profile
    "vsc_mlp3000_smiley_u20": ("smiley18_vsc", "vsc_smiley"),
    "beta_vae_mlp3000_smiley": ("smiley", "beta_vae"),
    "fmvae_conv_dsprites64_i2": ("dsprites", "fmvae_i2"),
    "fmvae_ss_conv_dsprites64_i2": ("dsprites", "fmvae_ss"),
}
MEMBERS = (1, 4, 16, 64)
GPU_RECORD = ROOT / "reports" / "gpu" / "gpu_bench_h100.json"  # the separate runs' ms/step (section (e))
BATCHES = (64, 500)


def replicate_seconds(models, data, steps: int, device: torch.device, workdir: Path, batch: int,
                      compile: str = "eager", noise: str = "member") -> float:
    """Wall seconds of one :func:`fit_replicates` call of ``steps`` steps over ``models`` (no checkpoint)."""
    n = len(models)
    opt = OptimParams(steps=steps, batch_size=batch, lr=1e-4, checkpoint_every=10**9, log_every=500, seed=0,
                      compile=compile)
    sync(device)
    t0 = time.perf_counter()
    fit_replicates(models, models[0].training_set(data), opt, list(range(n)),
                   checkpoints=[workdir / f"rep{i}.pt" for i in range(n)], fingerprints=["bench"] * n,
                   device=device, noise=noise, progress=False)
    sync(device)
    return time.perf_counter() - t0


def step_ms(run, short: int, long: int, rounds: int, warmup: int) -> tuple[float, list[float], float]:
    """Median ms per step of ``run(steps)`` over ``rounds`` (long - short differences), the rounds, and
    the warm-up's seconds (compilation included)."""
    t0 = time.perf_counter()
    run(warmup)
    warm = time.perf_counter() - t0
    ms = sorted(1e3 * (run(long) - run(short)) / (long - short) for _ in range(rounds))
    return ms[len(ms) // 2], ms, round(warm, 2)


def equality(device: torch.device, params, tiny: bool, workdir: Path, case: str = "vsc_mlp3000_smiley_u20",
             members: int = 4, steps: int = 100, batch: int = 64) -> dict:
    """Member i of a vectorised arm against the standalone run of seed i after ``steps`` steps, on
    ``device`` in float32: the largest relative difference of a weight tensor (max |a - b| / max |a|)."""
    from priorlab.train import fit

    setup_name, model_name = CASES[case]
    setup = shrink_setup(params.setup(setup_name)) if tiny else params.setup(setup_name)
    data = synthetic_dataset(obs_shape_of(params, setup_name), 256 if tiny else 4096)
    spec = params.model(model_name)
    opt = OptimParams(steps=steps, batch_size=batch, lr=1e-4, checkpoint_every=10**9, log_every=50)
    alone = []
    for i in range(members):
        m = build_bound(setup, spec, data, "train", seed=100 + i)
        fit(m, m.training_set(data), OptimParams(**{**opt.__dict__, "seed": i}), checkpoint=workdir / "eq.pt",
            live_dir=None, fingerprint="eq", device=device, progress=False)
        alone.append(m.state_dict())
    models = [build_bound(setup, spec, data, "train", seed=100 + i) for i in range(members)]
    fit_replicates(models, models[0].training_set(data), opt, list(range(members)),
                   checkpoints=[workdir / f"eq{i}.pt" for i in range(members)], fingerprints=["eq"] * members,
                   device=device, progress=False)
    compiled = build_bound(setup, spec, data, "train", seed=100)  # the rounding reference: seed 0 compiled
    fit(compiled, compiled.training_set(data), OptimParams(**{**opt.__dict__, "compile": "default"}),
        checkpoint=workdir / "eq.pt", live_dir=None, fingerprint="eq-compiled", device=device, progress=False)
    return {"case": case, "members": members, "steps": steps, "batch": batch, "dtype": "float32",
            "max_relative_difference": max(relative_difference(a, m.state_dict()) for a, m in zip(alone, models)),
            "median_tensor_relative_difference": median_tensor_difference(alone, [m.state_dict() for m in models]),
            "rounding_reference": "seed 0 standalone, compiled against eager (the same arithmetic rounded otherwise)",
            "reference_max_relative_difference": relative_difference(alone[0], compiled.state_dict())}


def median_tensor_difference(a: list[dict], b: list[dict]) -> float:
    """The median over members and floating tensors of ``max |a - b| / max |a|``."""
    diffs = sorted(float((v - y[k]).abs().max() / v.abs().max().clamp_min(1e-30)) for x, y in zip(a, b)
                   for k, v in x.items() if v.is_floating_point())
    return diffs[len(diffs) // 2]


def relative_difference(a: dict, b: dict) -> float:
    """The largest ``max |a - b| / max |a|`` over the floating tensors of two state dicts."""
    return max(float((v - b[k]).abs().max() / v.abs().max().clamp_min(1e-30)) for k, v in a.items()
               if v.is_floating_point())


def measure(device: torch.device, out: Path, tiny: bool = False, budget_s: float = 240.0, rounds: int = 3,
            cases: dict | None = None, members: tuple[int, ...] = MEMBERS, batches: tuple[int, ...] = BATCHES,
            modes: tuple[str, ...] = ("eager", "default"), check_equality: bool = True) -> dict:
    """Every row of the benchmark into ``out/replicates_bench.json``; returns the record."""
    params = load_profile()
    short, long, warmup = (2, 5, 2) if tiny else (10, 40, 10)
    record = Results(out / "replicates_bench.json", {
        "issue": 47, "device": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor()
        or "cpu", "torch": torch.__version__, "tiny": tiny, "steps": {"short": short, "long": long, "warmup": warmup},
        "rounds": rounds, "budget_s": budget_s, "rows": [], "skipped": []})
    start = time.perf_counter()
    cases = cases or CASES
    plan = [(c, b, mode) for mode in modes for b in batches for c in cases]
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        if check_equality:
            record.set("equality", equality(device, params, tiny, workdir, steps=10 if tiny else 100))
        for case, batch, compile in plan:
            if time.perf_counter() - start > budget_s:
                record.data["skipped"].append({"case": case, "batch": batch, "compile": compile})
                record.save()
                continue
            setup_name, model_name = cases[case]
            setup = params.setup(setup_name)
            setup = shrink_setup(setup) if tiny else setup
            data = synthetic_dataset(obs_shape_of(params, setup_name), 256 if tiny else 4096)
            spec = params.model(model_name)
            base = dict(case=case, setup=setup_name, model=model_name, kind=spec.kind, nets=[setup.encoder, setup.decoder],
                        batch=batch, compile=compile)
            torch._dynamo.reset()
            one = build_bound(setup, spec, data, "train")
            sep, sep_rounds, sep_warm = step_ms(
                lambda s: fit_seconds(one, data, s, device, workdir, batch=batch, compile=compile), short, long,
                rounds, warmup)
            row = {**base, "mode": "separate", "members": 1, "ms_per_step": sep, "rounds_ms": sep_rounds,
                   "warmup_s": sep_warm, "member_steps_per_s": 1e3 / sep}
            if compile == "eager":
                plain = PlainLoop(one, data, device, batch=batch)
                plain.seconds(warmup)
                row["plain_ms_per_step"] = 1e3 * plain.seconds(long - short) / (long - short)
            rows.append(row)
            record.data["rows"].append(row)
            record.save()
            why = vectorisable(one)
            del one
            if why is not None:
                record.data.setdefault("not_vectorised", {})[case] = why
                record.save()
                continue
            for n in members:
                if time.perf_counter() - start > budget_s:
                    record.data["skipped"].append({"case": case, "batch": batch, "compile": compile, "members": n})
                    record.save()
                    continue
                noises = ("member", "batched") if compile == "eager" and n == max(members) and n > 1 else ("member",)
                for noise in noises:
                    torch._dynamo.reset()
                    models = [build_bound(setup, spec, data, "train", seed=i) for i in range(n)]
                    try:
                        ms, ms_rounds, warm = step_ms(
                            lambda s: replicate_seconds(models, data, s, device, workdir, batch, compile, noise),
                            short, long, rounds, warmup)
                        vrow = {**base, "mode": "vectorised", "noise": noise, "members": n, "ms_per_step": ms,
                                "rounds_ms": ms_rounds, "warmup_s": warm, "member_steps_per_s": n * 1e3 / ms,
                                "speedup_vs_separate": n * sep / ms}
                    except Exception as exc:  # noqa: BLE001  (an out-of-memory or compile failure is a result)
                        vrow = {**base, "mode": "vectorised", "noise": noise, "members": n,
                                "error": f"{type(exc).__name__}: {str(exc)[:1500]}"}
                    if device.type == "cuda":
                        vrow["max_memory_gib"] = round(torch.cuda.max_memory_allocated(device) / 2**30, 2)
                        torch.cuda.reset_peak_memory_stats(device)
                    rows.append(vrow)
                    record.data["rows"].append(vrow)
                    record.save()
                    del models
                    if device.type == "cuda":
                        torch.cuda.empty_cache()
    record.data["wall_s"] = round(time.perf_counter() - start, 1)
    record.save()
    return record.data


def member_speedups(rows: list[dict], members: int = 4, compile: str = "default"
                    ) -> dict[tuple[str, tuple[str, str], int], float]:
    """``{(kind, (encoder, decoder), batch): separate ms / (vectorised ms / N)}`` at ``members`` = N and
    ``compile``, from the rows of one or more records (noise ``member``; the kind of a case's model and its
    nets: rows of records made before the nets were recorded measured MLPs)."""
    return {(r["kind"], tuple(r.get("nets", ("mlp", "mlp"))), r["batch"]): r["speedup_vs_separate"] for r in rows
            if r["mode"] == "vectorised" and r.get("noise") == "member" and r["members"] == members
            and r["compile"] == compile and "error" not in r}


def vectorised_hours(gpu_record: dict, params, speedups: dict[tuple[str, tuple[str, str], int], float],
                     record_setups: dict | None = None) -> dict:
    """The paper profile's GPU-hours of :func:`benchmarks.gpu_bench.reestimate` with each run and
    pretraining of a measured (kind, nets, batch) at ``speedups``' member cost (kinds, nets and batches not
    measured, or not vectorised, keep their separate cost)."""
    from benchmarks.gpu_bench import reestimate

    def speedup(key: str) -> float:
        kind, net, _, batch = json.loads(key)
        return speedups.get((kind, (net[0], net[1]), batch), 1.0)

    return reestimate(gpu_record, params, record_setups, speedup=speedup)


def table(record: dict) -> str:
    """The record's rows as text: member-steps/s against N per case, batch and compile mode."""
    eq = record.get("equality")
    lines = [f"equality ({eq['case']}, N = {eq['members']}, {eq['steps']} steps, {eq['dtype']}): max relative "
             f"difference of a weight {eq['max_relative_difference']:.2e} (standalone compiled vs eager: "
             f"{eq['reference_max_relative_difference']:.2e})"] if eq else []
    lines += [f"{'case':28s} {'batch':>5s} {'compile':>8s} {'mode':>10s} {'noise':>7s} {'N':>3s} {'ms/step':>9s} "
             f"{'member-steps/s':>15s} {'x separate':>10s}"]
    for r in record["rows"]:
        if "error" in r:
            lines.append(f"{r['case']:28s} {r['batch']:5d} {r['compile']:>8s} {r['mode']:>10s} "
                         f"{r.get('noise', ''):>7s} {r['members']:3d}  error: {r['error'][:60]}")
            continue
        lines.append(f"{r['case']:28s} {r['batch']:5d} {r['compile']:>8s} {r['mode']:>10s} {r.get('noise', ''):>7s} "
                     f"{r['members']:3d} {r['ms_per_step']:9.2f} {r['member_steps_per_s']:15.1f} "
                     f"{r.get('speedup_vs_separate', 1.0):10.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for replicates_bench.json")
    ap.add_argument("--tiny", action="store_true", help="small nets, data and steps: a dry run (any device)")
    ap.add_argument("--device", default="auto", help="cuda, cpu or auto (default: cuda when available)")
    ap.add_argument("--budget-s", type=float, default=240.0, help="wall budget; what is left past it is listed as skipped")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--members", default=",".join(map(str, MEMBERS)), help="comma-separated N")
    ap.add_argument("--batches", default=",".join(map(str, BATCHES)), help="comma-separated batch sizes")
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma-separated cases (default: {','.join(CASES)})")
    ap.add_argument("--modes", default="eager,default", help="comma-separated: eager and/or torch.compile modes")
    ap.add_argument("--no-equality", action="store_true", help="skip the member-vs-standalone check")
    ap.add_argument("--reestimate", default=None, metavar="FOLDER",
                    help="no device needed: the paper profile's GPU-hours with vectorised replicates, from the "
                         "records in FOLDER (replicates_bench.json files, N = 4, compiled) and the separate ms/step "
                         f"of {GPU_RECORD.relative_to(ROOT)}, into OUT/gpu_hours_vectorised.json")
    args = ap.parse_args(argv)
    if args.reestimate:
        import yaml

        rows = [r for f in sorted(Path(args.reestimate).glob("*.json")) if f.name != "gpu_hours_vectorised.json"
                for r in json.loads(f.read_text()).get("rows", [])]
        speedups = member_speedups(rows)
        setups = GPU_RECORD.with_name(GPU_RECORD.stem + "_setups.yaml")
        hours = vectorised_hours(json.loads(GPU_RECORD.read_text()), load_profile(), speedups,
                                 yaml.safe_load(setups.read_text()) if setups.is_file() else None)
        hours.update(record=str(GPU_RECORD.relative_to(ROOT)), members=4, compile="default",
                     speedups={f"{k}@{b}": round(v, 2) for (k, b), v in sorted(speedups.items())})
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "gpu_hours_vectorised.json").write_text(json.dumps(hours, indent=2) + "\n")
        for group, h in hours["by_group_gpu_hours"].items():
            print(f"{group:36s} {h:7.1f} GPU-hours")
        print(f"{'training + pretraining':36s} {hours['train_and_pretrain_gpu_hours']:7.1f} GPU-hours")
        return 0
    device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device)
    if device.type != "cuda" and not args.tiny:
        print("no CUDA device: run with --tiny for a dry run on the CPU", file=sys.stderr)
        return 2
    record = measure(device, Path(args.out), tiny=args.tiny, budget_s=args.budget_s, rounds=args.rounds,
                     members=tuple(int(n) for n in args.members.split(",")),
                     batches=tuple(int(b) for b in args.batches.split(",")),
                     cases={c: CASES[c] for c in args.cases.split(",")}, modes=tuple(args.modes.split(",")),
                     check_equality=not args.no_equality)
    print(table(record))
    if record["skipped"]:
        print(f"skipped past the budget: {len(record['skipped'])} measurements (in the record)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
