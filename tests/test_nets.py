"""Encoder and decoder bodies: paper 001's 8-layer CNN (sec. 4.1) layer by layer, its mirrored
decoder, and their setup options."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

from priorlab.config import ParamsError, SetupParams, VAEParams
from priorlab.models import build_model
from priorlab.models.protocol import Batch, StepContext
from priorlab.nets import build_decoder, build_encoder, build_nets
from priorlab.nets.conv import PAPER_001_CHANNELS, StridedConvDecoder, StridedConvEncoder


def test_paper_001_encoder_is_eight_3x3_layers_with_strides_1_2_alternating():
    enc = build_encoder("conv3", (1, 28, 28), out_features=2 * 64, hidden=[500], channels=[32])
    convs = [m for m in enc.conv if isinstance(m, nn.Conv2d)]
    assert [c.out_channels for c in convs] == [32, 32, 32, 64, 64, 64, 64, 64]
    assert [c.kernel_size for c in convs] == [(3, 3)] * 8
    assert [c.stride[0] for c in convs] == [1, 2, 1, 2, 1, 2, 1, 2]
    assert sum(isinstance(m, nn.ReLU) for m in enc.conv) == 8
    x = torch.rand(5, 1, 28, 28)
    assert enc.conv(x).shape == (5, 64, 2, 2)  # 28 -> 14 -> 7 -> 4 -> 2
    assert isinstance(enc.fc, nn.Linear) and enc.fc.in_features == 256  # one linear layer to 2DI
    assert enc(x).shape == (5, 128)
    n_conv = sum(9 * a * b + b for a, b in zip((1,) + PAPER_001_CHANNELS[:-1], PAPER_001_CHANNELS))
    assert sum(p.numel() for p in enc.parameters()) == n_conv + 256 * 128 + 128


@pytest.mark.parametrize("side, final", [(64, 16), (32, 8), (7, 2)])
def test_any_input_size_and_channels(side, final):
    enc = StridedConvEncoder((3, side, side), [8, 16, 16, 24], out_features=6)
    x = torch.rand(2, 3, side, side)
    assert enc.conv(x).shape == (2, 24, final, final) and enc(x).shape == (2, 6)


def test_a_setup_with_the_cnn_encoder_trains_a_model():
    torch.manual_seed(0)
    setup = SetupParams(dataset="mnist", latent_dim=4, encoder="conv3", encoder_channels=[4, 4, 8, 8], hidden=[32])
    encoder, _, _ = build_nets(setup, (1, 28, 28), params_per_dim=2)
    assert isinstance(encoder, StridedConvEncoder)
    model = build_model(setup, VAEParams(kind="vae"), (1, 28, 28))
    x = (torch.rand(16, 1, 28, 28) > 0.5).float()
    first = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.Adam(model.param_groups(1e-2), lr=1e-2)
    logs = [model.train_step(Batch(x), t, StepContext(opt)) for t in range(5)]
    assert all(torch.isfinite(torch.as_tensor(float(log["loss"]))) for log in logs)
    assert float(logs[-1]["loss"]) < float(logs[0]["loss"])
    assert all(not torch.equal(a, b) for a, b in zip(first, model.parameters()))  # the CNN trains too
    assert any(isinstance(m, StridedConvEncoder) for m in model.modules())


def test_encoder_channels_belong_to_the_cnn_encoder_and_are_recorded_only_where_set():
    with pytest.raises(ParamsError, match="encoder_channels is an option of the conv3 encoder / decoder"):
        SetupParams(dataset="x", latent_dim=2, encoder="mlp", encoder_channels=[8]).check("setups.x")
    with pytest.raises(ParamsError, match=r"encoder_channels\[1\]"):
        SetupParams(dataset="x", latent_dim=2, encoder="conv3", encoder_channels=[8, 0]).check("setups.x")
    plain = SetupParams(dataset="x", latent_dim=2)
    assert "encoder_channels" not in plain.record()  # records of setups without it are as before
    assert dataclasses.replace(plain, encoder="conv3", encoder_channels=[8]).record()["encoder_channels"] == [8]


@pytest.mark.parametrize("side", [28, 32, 64, 7, 9])
def test_the_conv3_decoder_mirrors_the_encoder_layer_by_layer_back_to_the_input_size(side):
    """Each transposed layer undoes one encoder layer: same kernel and stride, channels in reverse,
    and the feature map it emits has exactly the size that encoder layer took in (odd sides included)."""
    channels = list(PAPER_001_CHANNELS)
    enc = StridedConvEncoder((1, side, side), channels, out_features=4)
    dec = build_decoder("conv3", 3, (1, side, side), 2, hidden=[500], channels=[32])
    assert isinstance(dec, StridedConvDecoder)
    deconvs = [m for m in dec.deconv if isinstance(m, nn.ConvTranspose2d)]
    assert [c.stride[0] for c in deconvs] == [1 + i % 2 for i in reversed(range(8))]
    assert [c.in_channels for c in deconvs] == channels[::-1]
    assert [c.out_channels for c in deconvs] == channels[::-1][1:] + [2]  # 2 maps per pixel (params_per_feature)
    assert [c.kernel_size for c in deconvs] == [(3, 3)] * 8 and sum(isinstance(m, nn.ReLU) for m in dec.deconv) == 7
    sizes, h = [], torch.rand(1, 1, side, side)
    for m in enc.conv:
        if isinstance(m, nn.Conv2d):
            sizes.append(h.shape[-1])
        h = m(h)
    assert dec.start == (64, h.shape[-1], h.shape[-1])
    h, out_sizes = dec.fc(torch.rand(1, 3)).view(1, *dec.start), []
    for m in dec.deconv:
        h = m(h)
        if isinstance(m, nn.ConvTranspose2d):
            out_sizes.append(h.shape[-1])
    assert out_sizes == sizes[::-1] and h.shape == (1, 2, side, side)


def test_a_setup_with_the_cnn_decoder_trains_and_names_its_options():
    torch.manual_seed(0)
    setup = SetupParams(dataset="mnist", latent_dim=4, encoder="conv3", decoder="conv3", encoder_channels=[4, 4, 8, 8])
    setup.check("setups.mnist")
    _, decoder, _ = build_nets(setup, (1, 28, 28), params_per_dim=2)
    assert isinstance(decoder, StridedConvDecoder) and decoder.start == (8, 7, 7)  # 28 -> 28 -> 14 -> 14 -> 7
    model = build_model(setup, VAEParams(kind="vae"), (1, 28, 28))
    x = (torch.rand(16, 1, 28, 28) > 0.5).float()
    opt = torch.optim.Adam(model.param_groups(1e-2), lr=1e-2)
    logs = [model.train_step(Batch(x), t, StepContext(opt)) for t in range(5)]
    assert float(logs[-1]["loss"]) < float(logs[0]["loss"])
    SetupParams(dataset="x", latent_dim=2, decoder="conv3", encoder_channels=[8]).check("setups.x")  # decoder alone
    with pytest.raises(ParamsError, match="decoder_hidden / decoder_activation are options of the mlp decoder"):
        SetupParams(dataset="x", latent_dim=2, decoder="conv3", decoder_hidden=[8]).check("setups.x")


def test_the_conv3_decoder_takes_its_own_channels_and_only_conv3_does():
    """issue 43: paper 001 App. E.1 states the size of encoder and decoder together, and the text gives the
    encoder's layers only: ``decoder_channels`` widens the mirrored decoder without touching the encoder;
    the paper profile's choice (43 / 86) totals 573,961 parameters at K = 64 on MNIST, nearest E.1's 567,775
    among the one-factor scalings of the encoder's 32 / 64 layout."""
    wide = [43, 43, 43, 86, 86, 86, 86, 86]
    setup = SetupParams(dataset="x", latent_dim=64, encoder="conv3", decoder="conv3", decoder_channels=wide)
    setup.check("setups.x")
    enc, dec, _ = build_nets(setup, (1, 28, 28), 2)
    assert [c.in_channels for c in dec.deconv if isinstance(c, nn.ConvTranspose2d)] == wide[::-1]
    assert [c.out_channels for c in enc.conv if isinstance(c, nn.Conv2d)] == list(PAPER_001_CHANNELS)
    assert dec(torch.zeros(2, 64)).shape == (2, 1, 28, 28)
    count = sum(p.numel() for m in (enc, dec) for p in m.parameters())
    assert count == 573_961
    scaled = {c: sum(p.numel() for m in build_nets(dataclasses.replace(setup, decoder_channels=[c] * 3 + [2 * c] * 5),
                                                    (1, 28, 28), 2)[:2] for p in m.parameters()) for c in (42, 43, 44)}
    assert min(scaled, key=lambda c: abs(scaled[c] - 567_775)) == 43
    assert "decoder_channels" not in SetupParams(dataset="x", latent_dim=2).record()  # records as before
    with pytest.raises(ParamsError, match=r"decoder_channels is an option of the conv3 decoder"):
        SetupParams(dataset="x", latent_dim=2, decoder_channels=[8]).check("setups.x")
    with pytest.raises(ParamsError, match=r"decoder_channels\[0\]"):
        dataclasses.replace(setup, decoder_channels=[0]).check("setups.x")
