"""One registry of names per kind (issue 25): a kind's name is registered once, with its parameter
class (``MODEL_PARAMS``, ``PRIOR_PARAMS``, ``DATASET_PARAMS``); its builder is keyed by that class."""

from __future__ import annotations

import pytest

from priorlab.config import (DATASET_PARAMS, MODEL_PARAMS, PRIOR_PARAMS, SetupParams, VAEParams,
                             LpNestedPriorParams, PriorParams, SparseVAEParams)
from priorlab.config.checks import builder_for
from priorlab.data.registry import DATASET_BUILDERS
from priorlab.models import MODEL_BUILDERS, build_model
from priorlab.priors import PRIOR_BUILDERS, StandardNormalPrior, build_prior


@pytest.mark.parametrize("names, builders", [(MODEL_PARAMS, MODEL_BUILDERS), (PRIOR_PARAMS, PRIOR_BUILDERS),
                                             (DATASET_PARAMS, DATASET_BUILDERS)], ids=["model", "prior", "data set"])
def test_every_named_class_has_exactly_one_builder_and_no_builder_is_unnamed(names, builders):
    assert set(names.values()) == set(builders)


def test_the_builder_follows_the_kind_and_its_class():
    builders = {PriorParams: "standard", LpNestedPriorParams: "lp"}
    assert builder_for(PriorParams(), PRIOR_PARAMS, builders, "prior") == "standard"
    with pytest.raises(ValueError, match="unknown prior kind 'gauss'; allowed: standard_normal, lp_nested"):
        builder_for(PriorParams(kind="gauss"), PRIOR_PARAMS, builders, "prior")
    # a base-class entry carrying another kind's name would silently build the wrong prior
    with pytest.raises(TypeError, match="prior kind 'lp_nested' takes LpNestedPriorParams, got PriorParams"):
        build_prior(PriorParams(kind="lp_nested"), 4)
    with pytest.raises(ValueError, match=r"prior kind 'lp_nested' \(LpNestedPriorParams\) has no builder"):
        builder_for(LpNestedPriorParams(kind="lp_nested"), PRIOR_PARAMS, {PriorParams: "standard"}, "prior")
    assert isinstance(build_prior(PriorParams(), 3), StandardNormalPrior)


def test_a_model_entry_of_the_wrong_class_is_refused_before_building():
    setup = SetupParams(dataset="d", encoder="mlp", decoder="mlp", hidden=[8, 8], latent_dim=2)
    with pytest.raises(TypeError, match="model kind 'sparse_vae' takes SparseVAEParams, got VAEParams"):
        build_model(setup, VAEParams(kind="sparse_vae"), (5,))
    assert type(build_model(setup, SparseVAEParams(kind="sparse_vae"), (5,))).__name__ == "SparseVAE"
