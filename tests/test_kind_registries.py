"""One registry per kind (issues 25, 44): a kind is registered once, with its parameter class
(``MODEL_PARAMS``, ``PRIOR_PARAMS``, ``DATASET_PARAMS``), and that class names its builder (``BUILDER``),
so adding a model, prior or data set kind touches one registry."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from priorlab.config import (DATASET_PARAMS, MODEL_PARAMS, PRIOR_PARAMS, SetupParams, VAEParams,
                             LpNestedPriorParams, PriorParams, SparseVAEParams)
from priorlab.config.checks import builder_for
from priorlab.data.registry import DatasetBuilder
from priorlab.models import build_model
from priorlab.priors import StandardNormalPrior, build_prior

KINDS = [(MODEL_PARAMS, "model", callable), (PRIOR_PARAMS, "prior", callable),
         (DATASET_PARAMS, "data set", lambda b: isinstance(b, DatasetBuilder))]


@pytest.mark.parametrize("names, what, is_builder", KINDS, ids=["model", "prior", "data set"])
def test_every_registered_class_declares_a_builder_that_resolves(names, what, is_builder):
    for kind, cls in names.items():
        assert "BUILDER" in vars(cls), f"{cls.__name__} inherits its builder"
        params = PriorParams(kind=kind) if cls is PriorParams else None
        builder = builder_for(params or _bare(cls, kind), names, what)
        assert is_builder(builder), (kind, builder)


def _bare(cls, kind):
    """An instance of ``cls`` without running its field checks (only ``kind`` is read here)."""
    obj = object.__new__(cls)
    object.__setattr__(obj, "kind", kind)
    return obj


def test_the_builder_follows_the_kind_and_its_class():
    assert builder_for(PriorParams(), PRIOR_PARAMS, "prior").__name__ == "build_standard_normal"
    with pytest.raises(ValueError, match="unknown prior kind 'gauss'; allowed: standard_normal, lp_nested"):
        builder_for(PriorParams(kind="gauss"), PRIOR_PARAMS, "prior")
    # a base-class entry carrying another kind's name would silently build the wrong prior
    with pytest.raises(TypeError, match="prior kind 'lp_nested' takes LpNestedPriorParams, got PriorParams"):
        build_prior(PriorParams(kind="lp_nested"), 4)
    assert isinstance(build_prior(PriorParams(), 3), StandardNormalPrior)


def test_a_class_must_declare_its_own_builder_and_a_path_must_resolve():
    @dataclass(frozen=True)
    class Inherits(LpNestedPriorParams):  # a new kind that forgot its BUILDER: not its parent's
        pass

    names = {**PRIOR_PARAMS, "mine": Inherits}
    with pytest.raises(ValueError, match=r"prior kind 'mine' \(Inherits\) declares no BUILDER"):
        builder_for(_bare(Inherits, "mine"), names, "prior")

    @dataclass(frozen=True)
    class Typo(PriorParams):
        BUILDER = "priorlab.priors:build_gaussian"

    with pytest.raises(ValueError, match="BUILDER 'priorlab.priors:build_gaussian' names no 'module:name'"):
        builder_for(Typo(kind="typo"), {"typo": Typo}, "prior")

    @dataclass(frozen=True)
    class Local(PriorParams):  # defined beside its builder (a test's or a user's kind): the object itself
        BUILDER = staticmethod(lambda spec, latent_dim: StandardNormalPrior(latent_dim))

    assert isinstance(builder_for(Local(kind="local"), {"local": Local}, "prior")(None, 2), StandardNormalPrior)


def test_a_model_entry_of_the_wrong_class_is_refused_before_building():
    setup = SetupParams(dataset="d", encoder="mlp", decoder="mlp", hidden=[8, 8], latent_dim=2)
    with pytest.raises(TypeError, match="model kind 'sparse_vae' takes SparseVAEParams, got VAEParams"):
        build_model(setup, VAEParams(kind="sparse_vae"), (5,))
    assert type(build_model(setup, SparseVAEParams(kind="sparse_vae"), (5,))).__name__ == "SparseVAE"
