"""Issue 15: the training loop does not wait on the host.  Host reads of tensor values (``.item()``,
``float(t)``, ``if t:``, ``.tolist()``, ``.cpu()``, ``torch.unique``, host data copied to a device, ...)
are counted on the CPU through patched ``torch.Tensor`` methods (:mod:`priorlab.train.host_sync`);
a GPU run would wait at each of them.  Every non-log step of ``fit`` must have none; a log step one
(the logged values and the non-finite record, read together)."""

from __future__ import annotations

import collections

import pytest
import torch

from priorlab.config import (BetaTCVAEParams, FactorialMixtureParams, FactorVAEParams, LpNestedPriorParams,
                             OptimParams, SetupParams, SparseVAEParams, VAEParams, VSCParams)
from priorlab.models import build_model
from priorlab.models.protocol import TrainingSet
from priorlab.train import fit
from priorlab.train.host_sync import count_host_syncs

SHAPE = (1, 32, 32)
VECTOR = (12,)  # the sparse VAE's observations: [G]
LOG_EVERY, STEPS = 10, 25


class _Data:
    """The parts of a data set that ``bind_data`` / ``training_set`` read (labels: one factor)."""

    name = "x"
    factor_names = ["shape"]

    def __init__(self, n: int = 160, shape: tuple[int, ...] = SHAPE):
        g = torch.Generator().manual_seed(1)
        self._x = (torch.rand(n, *shape, generator=g) > 0.7).to(torch.uint8) if shape == SHAPE else \
            torch.randn(n, *shape, generator=g)
        self._labels = torch.randint(0, 3, (n,), generator=g)

    def x(self, split):
        return self._x

    def prepare(self, rows):
        return rows.float()

    def labels(self, split):
        return None

    def factors(self, split):
        return self._labels[:, None].numpy()


def _setup(net: str) -> SetupParams:
    if net.startswith("vector_"):  # a Gaussian likelihood on vectors: "vector_<likelihood>"
        return SetupParams(dataset="x", latent_dim=4, hidden=[8, 8], likelihood=net.removeprefix("vector_"), obs_std=1.0)
    if net == "mlp":
        return SetupParams(dataset="x", latent_dim=4, hidden=[32])
    return SetupParams(dataset="x", latent_dim=4, encoder="conv", decoder="conv", hidden=[32], channels=[8, 8, 8])


KINDS = {
    "vae": (VAEParams(kind="vae", beta=4.0), "mlp"),
    "beta_tcvae": (BetaTCVAEParams(kind="beta_tcvae"), "mlp"),
    "vsc": (VSCParams(kind="vsc", n_pseudo_inputs=4, warmup_ramp_steps=20, sharpness_ramp_steps=20), "mlp"),
    "vsc_released_code": (VSCParams(kind="vsc", n_pseudo_inputs=4, preset="released_code", warmup_ramp_steps=20), "mlp"),
    "fmvae_mlp": (FactorialMixtureParams(kind="fmvae", num_factors=2, num_components=[3, 5]), "mlp"),
    "fmvae_conv": (FactorialMixtureParams(kind="fmvae", num_factors=2, num_components=[4]), "conv"),
    # semi-supervised: the first-order (Adam) update of factor 0 while Delta > 0, SVI on factor 1
    "fmvae_semi_supervised": (FactorialMixtureParams(kind="fmvae", num_factors=2, num_components=[3, 4],
                                                     supervised_factor="shape", labelled_fraction=0.5, delta=10.0,
                                                     kl_z_weight=5.0, kl_z_weight_steps=10), "mlp"),
    "factor_vae": (FactorVAEParams(kind="factor_vae", discriminator_hidden=[16, 16]), "mlp"),
    "isa_vae": (VAEParams(kind="vae", prior=LpNestedPriorParams(kind="lp_nested", subspaces=[[2.2, 2], [2.2, 2]])),
                "mlp"),
    "isa_tcvae": (BetaTCVAEParams(kind="beta_tcvae", prior=LpNestedPriorParams(kind="lp_nested",
                                                                                 subspaces=[[2.2, 2], [2.2, 2]])), "mlp"),
    "sparse_vae_gaussian_ig": (SparseVAEParams(kind="sparse_vae", warm_start="scratch"), "vector_gaussian_ig"),
    "sparse_vae_gaussian": (SparseVAEParams(kind="sparse_vae", warm_start="scratch"), "vector_gaussian"),
}


def _reads_per_step(spec, net: str, tmp_path) -> tuple[dict[int, int], dict[int, collections.Counter]]:
    """Host reads between consecutive ``before_step`` calls of a ``fit`` run (the step's work, its
    bookkeeping and the next batch), keyed by step, with their call sites."""
    torch.manual_seed(0)
    shape = VECTOR if net.startswith("vector_") else SHAPE
    model = build_model(_setup(net), spec, shape)
    data = _Data(shape=shape)
    model.bind_data(data)
    model.set_phase("train")
    if isinstance(spec, FactorialMixtureParams):  # the SVI update acts on a fitted q(xi), as after prior_init
        model.init_prior(model.training_set(data), torch.Generator().manual_seed(0))
    opt = OptimParams(steps=STEPS, batch_size=32, lr=1e-3, log_every=LOG_EVERY, checkpoint_every=10**6, seed=0)
    marks = []
    with count_host_syncs() as counter:
        original = model.before_step

        def before_step(step):
            marks.append((step, counter.count, collections.Counter(counter.sites)))
            return original(step)

        model.before_step = before_step
        fit(model, model.training_set(data), opt, checkpoint=tmp_path / "ck.pt", live_dir=None, fingerprint="f")
        marks.append((STEPS + 1, counter.count, collections.Counter(counter.sites)))
    counts = {marks[i][0]: marks[i + 1][1] - marks[i][1] for i in range(len(marks) - 1)}
    sites = {marks[i][0]: marks[i + 1][2] - marks[i][2] for i in range(len(marks) - 1)}
    return counts, sites


@pytest.mark.parametrize("kind", list(KINDS))
def test_no_host_reads_between_log_steps(kind, tmp_path):
    counts, sites = _reads_per_step(*KINDS[kind], tmp_path)
    assert sorted(counts) == list(range(1, STEPS + 1))
    log_steps = {s for s in counts if s % LOG_EVERY == 0 or s == STEPS}
    for step, n in counts.items():
        if step in log_steps:
            assert n <= 1, (step, dict(sites[step]))  # logged values and the non-finite record: one read
        else:
            assert n == 0, (step, dict(sites[step]))


def test_the_counter_sees_every_kind_of_read():
    t = torch.tensor([1.5, -2.0])
    with count_host_syncs() as c:
        t.sum().item()
        float(t[0])
        bool(t[0] > 0)
        t.tolist()
        t.cpu()
        t.numpy()
        torch.unique(t)
        t.nonzero()
        torch.tensor([1.0, 2.0], device="cpu")  # host data to a named device
        if t[1] < 0:
            pass
        (t * 2).mean()  # device work: no read
        torch.as_tensor(t, device="cpu")  # a tensor already: no host data
    assert c.count == 10, dict(c.sites)
    # restored afterwards
    assert "item" not in torch.Tensor.__dict__ or not hasattr(torch.Tensor.__dict__["item"], "__wrapped__")
    assert not hasattr(torch.unique, "__wrapped__") or torch.unique.__module__ != "priorlab.train.host_sync"


def test_training_set_and_sampler_stay_put_on_the_cpu():
    from priorlab.train.trainer import BatchSampler

    ts = TrainingSet(torch.arange(10.0).view(10, 1), lambda b: b * 2)
    assert ts.to("cpu") is ts
    sampler = BatchSampler(10, 4, seed=3, device="cpu")
    g = torch.Generator().manual_seed(3)
    first = torch.randperm(10, generator=g)
    assert torch.equal(sampler.next(), first[:4]) and torch.equal(sampler.next(), first[4:8])
    assert torch.equal(sampler.next(), torch.randperm(10, generator=g)[:4])  # a new epoch
    batch = ts.batch(torch.tensor([3, 1]))
    assert batch.x.flatten().tolist() == [6.0, 2.0]


def test_distinct_rows_counts_what_unique_counts():
    from priorlab.models.vsc import distinct_rows

    g = torch.Generator().manual_seed(0)
    for b, j, p in [(64, 10, 0.5), (64, 3, 0.5), (200, 60, 0.97), (1, 5, 0.5), (50, 1, 0.5)]:
        on = torch.rand(b, j, generator=g) > p
        assert int(distinct_rows(on)) == torch.unique(on, dim=0).shape[0]
