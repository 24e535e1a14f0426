"""The FlexAttention peer's kernel options: forward tiles, and the backward configs torch < 2.14
needs for 64-token blocks (its lowering filters built-in configs before reading any option)."""

import dataclasses

import pytest
import torch
from torch._inductor.choices import InductorChoices

from vsa.bench import flex


@dataclasses.dataclass
class BwdConfig:  # the fields inductor's FlexBwDConfig has, plus one a subclass could add
    block_m1: int
    block_n1: int
    block_m2: int
    block_n2: int
    num_stages: int
    num_warps: int
    extra: str = "kept"


def _divides(conf, block):
    return all(block % t == 0 for t in (conf.block_m1, conf.block_n1, conf.block_m2,
                                        conf.block_n2))


def test_fit_adds_the_shrunk_copy_of_each_config():
    sm90_d128 = BwdConfig(64, 128, 128, 64, 3, 8)  # torch 2.11's only default on sm_90, D 128
    fits = BwdConfig(32, 64, 64, 32, 3, 4)
    fitted = flex.fit_backward_tiles([sm90_d128, fits], 64)
    # The originals stay (128-token blocks still use them), the shrunk one is torch 2.14's own.
    assert fitted == [sm90_d128, fits, BwdConfig(64, 64, 64, 64, 3, 8)]
    assert all(_divides(c, 64) for c in fitted[1:])
    for c in fitted:  # the kernel's static asserts
        assert c.block_n1 % c.block_m1 == 0 and c.block_m2 % c.block_n2 == 0


def test_fit_keeps_kernel_constraints_when_shrinking_unevenly():
    (_, shrunk) = flex.fit_backward_tiles([BwdConfig(128, 128, 128, 32, 1, 4)], 64)
    assert (shrunk.block_m1, shrunk.block_n1, shrunk.block_m2, shrunk.block_n2) == (64, 64, 64, 32)
    assert flex.fit_backward_tiles([BwdConfig(16, 16, 16, 16, 1, 4)], 64) == \
        [BwdConfig(16, 16, 16, 16, 1, 4)]  # nothing to add


@pytest.mark.parametrize("version, patched", [("2.11.0+cu130", True), ("2.13.0", True),
                                              ("2.14.0", False), ("2.15.0+cu132", False)])
def test_backward_configs_are_fitted_only_where_torch_needs_it(monkeypatch, version, patched):
    def builtin(self, head_dim, dtype, device_type="cuda"):
        return [BwdConfig(64, 128, 128, 64, 3, 8)]

    monkeypatch.setattr(InductorChoices, "get_flex_attention_bwd_configs", builtin)
    monkeypatch.setattr(torch, "__version__", torch.torch_version.TorchVersion(version))
    flex.allow_backward_on_small_blocks()
    flex.allow_backward_on_small_blocks()  # idempotent: one wrapper, one added config
    configs = InductorChoices().get_flex_attention_bwd_configs(128, torch.bfloat16, "cuda")
    if patched:
        assert configs == [BwdConfig(64, 128, 128, 64, 3, 8), BwdConfig(64, 64, 64, 64, 3, 8)]
    else:
        assert configs == [BwdConfig(64, 128, 128, 64, 3, 8)]


def test_forward_tiles_are_prefixed_for_the_forward_only():
    assert flex.kernel_options(64) == {"fwd_BLOCK_M": 64, "fwd_BLOCK_N": 64}
    assert flex.kernel_options(128) == {}
