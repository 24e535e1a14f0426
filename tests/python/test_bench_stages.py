"""Stage attribution of vsa's layer: names to stages, and a real profile of the layer on the CPU."""

import pytest
import torch

import vsa
from vsa.bench.stages import STAGES, attribute, profile_stages, stage_of

# Names as the profiler reports them on an H200 (demangled CUDA kernels) and on the CPU (ops).
SM90_FINE = "void vsa::cuda::sm90::fwd_kernel<128, (vsa::DType)1>(vsa::cuda::FwdKernelParams)"
SM80_FINE = "void vsa::cuda::sm80::fwd_kernel<64, 128, __nv_bfloat16>(vsa::cuda::FwdKernelParams)"


@pytest.mark.parametrize("name, stage", [
    (SM90_FINE, "fine"), (SM80_FINE, "fine"), ("vsa::forward", "fine"), ("vsa::fine_stage_gated", "fine"),
    ("void at::native::sbtopk::gatherTopK<float, unsigned int, 2, false>(...)", "selection"),
    ("void at::native::bitonicSortKVInPlace<2, -1, 16, 16, float, long>(...)", "selection"),
    ("aten::topk", "selection"), ("vsa::topk_to_index", "selection"),
    ("nvjet_hsh_128x64_64x4_1x2_h_bz_coopA_NTN", "coarse"), ("aten::matmul", "coarse"),
    ("void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false>", "coarse"),
    ("vsa::block_mean", "coarse"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<...>>", None),
])
def test_names_to_stages(name, stage):
    assert stage_of(name) == stage


def test_unnamed_work_is_placed_around_the_fine_stage():
    calls = [("aten::mul", 1.0), ("aten::matmul", 2.0), ("aten::topk", 0.5), (SM90_FINE, 9.0),
             ("Memset (Device)", 0.1), (SM90_FINE, 1.0), ("elementwise add", 0.3)]
    assert [stage for _, stage, _ in attribute(calls)] == \
        ["coarse", "coarse", "selection", "fine", "other", "fine", "combine"]
    # An op inside another takes the enclosing op's stage (on the CPU: aten ops of vsa::forward).
    nested = [("vsa::forward", 5.0), ("aten::bmm", 1.0), ("aten::add", 0.2)]
    assert [s for _, s, _ in attribute(nested, ["vsa::forward", "vsa::forward", "aten::add"])] \
        == ["fine", "fine", "combine"]
    # Without a fine stage nothing is 'combine': everything unnamed counts as coarse.
    assert {s for _, s, _ in attribute([("aten::mul", 1.0), ("aten::add", 1.0)])} == {"coarse"}


def test_profile_of_the_layer_on_the_cpu(gen):
    meta = vsa.build_vsa_metadata((5, 8, 8), tile_size=(4, 4, 4))
    vbs = meta.variable_block_sizes  # 2 x 2 x 2 blocks, partial along time
    q, k, v = (torch.randn(1, 2, vbs.numel() * 64, 64, generator=gen) for _ in range(3))
    with torch.no_grad():
        times = profile_stages(lambda: vsa.video_sparse_attn(q, k, v, vbs, vbs, 3), q.device,
                               calls=2)
    assert times.source == "CPU ops" and set(times.ms) == set(STAGES)
    # The coarse stage and the selection may be one fused op: together they took time.
    assert times.ms["fine"] > 0 and times.ms["coarse"] + times.ms["selection"] > 0
    assert times.total_ms == pytest.approx(sum(times.ms.values()))
    names = [k["name"] for k in times.kernels]
    # Without a gradient the layer's fine op is the one with the gate combine fused in.
    assert "vsa::fine_stage_gated" in names and all(k["ms"] >= 0 for k in times.kernels)
    assert {k["stage"] for k in times.kernels} <= set(STAGES)
