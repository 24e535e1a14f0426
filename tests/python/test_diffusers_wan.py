"""vsa.integrations.diffusers on a tiny WanTransformer3DModel built from a config with
random weights (nothing downloaded): "dense" mode matches diffusers' own processor (fp32,
and bf16 as accurately as it against fp32); top-k below NK runs, and its error against
dense is reported (printed; `pytest -rP` shows it) and bounded; the grid hook, the gate,
install / remove on models and pipelines, and the errors. The same checks run on CUDA
(bf16) where there is a GPU."""

import math

import pytest
import torch

import vsa

diffusers = pytest.importorskip("diffusers",
                                reason="needs the diffusers extra: pip install .[diffusers]")
from diffusers import WanTransformer3DModel  # noqa: E402

import vsa.integrations.diffusers as vsa_diffusers  # noqa: E402
from attention_reference import rel_error  # noqa: E402

diffusers.utils.logging.set_verbosity_error()  # casting with .to() warns about fp32 modules

DEVICES = ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
    not vsa.cuda_compiled(), reason="built without CUDA kernels")])]
# Latent [B, C, F, H, W] = [1, 4, 5, 16, 20], patch (1, 2, 2): a 5 x 8 x 10 token grid,
# 2 x 2 x 3 = 12 blocks of 4 x 4 x 4, the last tile along each axis partial.
LATENT = (1, 4, 5, 16, 20)
GRID, NUM_BLOCKS = (5, 8, 10), 12


def tiny_wan(gen, num_layers=2):
    """Random weights (seeded from the test's generator), Wan2.1's layout at toy width;
    head dim 64, one of vsa's."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(torch.randint(2**62, (1,), generator=gen)))
        return WanTransformer3DModel(
            patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=64, in_channels=4,
            out_channels=4, text_dim=32, freq_dim=32, ffn_dim=128, num_layers=num_layers,
            rope_max_seq_len=64).eval()


def inputs(gen, dtype, device):
    latent = torch.randn(LATENT, generator=gen)
    text = torch.randn(1, 7, 32, generator=gen)
    return latent.to(device, dtype), torch.tensor([500], device=device), text.to(device, dtype)


@torch.no_grad()
def run(model, args):
    return model(*args).sample


@pytest.fixture
def model_and_inputs(gen, request):
    """(model, inputs, fp32 output of diffusers' own processor) on the parametrized device."""
    device = request.param
    model = tiny_wan(gen)
    args32 = inputs(gen, torch.float32, "cpu")
    reference = run(model, args32)
    return model.to(device), [a.to(device) for a in args32], reference


parametrize_device = pytest.mark.parametrize("model_and_inputs", DEVICES, indirect=True)


@parametrize_device
def test_dense_mode_matches_the_default_processor(model_and_inputs):
    model, args, reference = model_and_inputs
    if args[0].is_cuda:
        pytest.skip("vsa's CUDA kernels take bf16/fp16: the bf16 test covers CUDA")
    with vsa_diffusers.install(model, mode="dense"):
        dense = run(model, args)
    assert dense.shape == reference.shape
    print(f"dense mode vs default processor, fp32: {rel_error(dense, reference):.2e}")
    assert rel_error(dense, reference) <= 1e-5


@parametrize_device
def test_dense_mode_in_bf16_is_as_accurate_as_the_default(model_and_inputs):
    model, args, reference = model_and_inputs
    model.to(torch.bfloat16)
    args = [a.to(torch.bfloat16) if a.is_floating_point() else a for a in args]
    default = run(model, args)
    with vsa_diffusers.install(model, mode="dense"):
        dense = run(model, args)
    err_default, err_dense = rel_error(default.cpu(), reference), rel_error(dense.cpu(), reference)
    print(f"bf16 vs fp32 default: default processor {err_default:.2e}, dense mode {err_dense:.2e}, "
          f"dense vs default {rel_error(dense, default):.2e}")
    assert err_dense <= 1e-2 and err_dense <= 1.25 * err_default + 1e-3


@parametrize_device
def test_sparse_modes_run_and_their_error_is_reported(model_and_inputs):
    model, args, _ = model_and_inputs
    if args[0].is_cuda:
        model.to(torch.bfloat16)
        args = [a.to(torch.bfloat16) if a.is_floating_point() else a for a in args]
    dense = _with(model, args, mode="dense")
    errors = {}
    for mode in ("fine", "vsa"):
        for topk in (2, 6, NUM_BLOCKS):
            out = _with(model, args, mode=mode, topk=topk)
            assert torch.isfinite(out).all()
            errors[mode, topk] = rel_error(out, dense)
    print("error vs dense mode, by (mode, top-k of 12 blocks): "
          + ", ".join(f"{m} {k}: {e:.2e}" for (m, k), e in errors.items()))
    # Every block listed: the fine stage alone is dense (the same lists as "dense").
    assert errors["fine", NUM_BLOCKS] <= (1e-5 if args[0].dtype == torch.float32 else 1e-2)
    # Skipping blocks changes the output, by a bounded amount (about 2e-2 at 2 of 12).
    assert max(1e-3, 3 * errors["fine", NUM_BLOCKS]) < errors["fine", 2] < 0.5
    assert errors["fine", 2] > errors["fine", 6]
    assert 0.0 < errors["vsa", NUM_BLOCKS] < 0.5  # the coarse output is added (no gate)


def _with(model, args, **settings):
    with vsa_diffusers.install(model, **settings):
        return run(model, args)


@parametrize_device
def test_a_zero_gate_leaves_the_fine_stage(model_and_inputs):
    """With `to_gate_compress` on the attention modules (as VSA-trained checkpoints have),
    "vsa" weights the coarse output by it: a zero gate gives exactly "fine"'s output, a
    nonzero one something else."""
    model, args, _ = model_and_inputs
    if args[0].is_cuda:
        model.to(torch.bfloat16)
        args = [a.to(torch.bfloat16) if a.is_floating_point() else a for a in args]
    fine = _with(model, args, mode="fine", topk=3)
    for block in model.blocks:
        width = block.attn1.to_q.in_features
        block.attn1.to_gate_compress = torch.nn.Linear(width, width).to(args[0])
        torch.nn.init.zeros_(block.attn1.to_gate_compress.weight)
        torch.nn.init.zeros_(block.attn1.to_gate_compress.bias)
    # fine + coarse · 0 rounds back to fine exactly; the bound leaves room only for a
    # GPU library choosing another algorithm between the two forwards.
    assert rel_error(_with(model, args, mode="vsa", topk=3), fine) <= 1e-6
    for block in model.blocks:
        torch.nn.init.constant_(block.attn1.to_gate_compress.bias, 0.5)
    assert rel_error(_with(model, args, mode="vsa", topk=3), fine) > 1e-3


def test_install_hooks_self_attention_only_and_remove_restores(gen):
    model = tiny_wan(gen)
    args = inputs(gen, torch.float32, "cpu")
    default = run(model, args)
    before = {name: type(p) for name, p in model.attn_processors.items()}
    handle = vsa_diffusers.install(model, mode="fine", sparsity=0.5)
    for block in model.blocks:
        processor = block.attn1.processor
        assert isinstance(processor, vsa_diffusers.VSAWanAttnProcessor)
        assert (processor.mode, processor.sparsity, processor.topk) == ("fine", 0.5, None)
        assert not isinstance(block.attn2.processor, vsa_diffusers.VSAWanAttnProcessor)
    run(model, args)
    grid = model.blocks[0].attn1.processor.grid
    assert grid.shape == GRID and grid.metadata.latent_shape == GRID  # F / 1, H / 2, W / 2
    assert grid.metadata.num_tiles == NUM_BLOCKS
    handle.remove()
    assert {name: type(p) for name, p in model.attn_processors.items()} == before
    assert torch.equal(run(model, args), default)


def test_install_on_a_pipeline_covers_every_wan_transformer(gen):
    """Wan2.2's pipelines hold two transformers (transformer, transformer_2)."""
    class Pipeline:  # what install() reads of a DiffusionPipeline: its components
        def __init__(self, **components):
            self.components = components

    first, second = tiny_wan(gen, 1), tiny_wan(gen, 1)
    with vsa_diffusers.install(Pipeline(transformer=first, transformer_2=second, vae=None), topk=4):
        assert all(isinstance(m.blocks[0].attn1.processor, vsa_diffusers.VSAWanAttnProcessor)
                   for m in (first, second))
        assert first.blocks[0].attn1.processor.grid is not second.blocks[0].attn1.processor.grid
    assert not isinstance(first.blocks[0].attn1.processor, vsa_diffusers.VSAWanAttnProcessor)


def test_errors(gen):
    model = tiny_wan(gen, 1)
    with pytest.raises(TypeError, match="expected a WanTransformer3DModel or a pipeline"):
        vsa_diffusers.install(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="invalid argument 'mode'"):
        vsa_diffusers.install(model, mode="sparse")
    with pytest.raises(ValueError, match="invalid argument 'topk / sparsity'"):
        vsa_diffusers.install(model, mode="dense", sparsity=0.9)
    # Installed twice, the removals in either order would leave vsa's processors behind.
    with vsa_diffusers.install(model, topk=2):
        with pytest.raises(ValueError, match="already runs on vsa"):
            vsa_diffusers.install(model, mode="dense")
    assert not isinstance(model.blocks[0].attn1.processor, vsa_diffusers.VSAWanAttnProcessor)
    # A head dim vsa does not run is refused where it is installed, not at the first forward.
    with torch.random.fork_rng(devices=[]):
        odd = WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=48,
                                    in_channels=4, out_channels=4, text_dim=32, freq_dim=32, ffn_dim=96,
                                    num_layers=1, rope_max_seq_len=64)
    with pytest.raises(vsa.UnsupportedError, match="attention_head_dim is 48"):
        vsa_diffusers.install(odd)
    assert not isinstance(odd.blocks[0].attn1.processor, vsa_diffusers.VSAWanAttnProcessor)
    processor = vsa_diffusers.VSAWanAttnProcessor(vsa_diffusers.LatentGrid(), mode="dense")
    hidden = torch.randn(1, math.prod(GRID), 128, generator=gen)
    with pytest.raises(RuntimeError, match="the latent grid is unknown"):
        processor(model.blocks[0].attn1, hidden)
    with pytest.raises(vsa.UnsupportedError, match="cross-attention"):
        processor(model.blocks[0].attn2, hidden, torch.randn(1, 7, 128, generator=gen))
    processor.grid.set((5, 8, 9), hidden.device)  # not the grid of these tokens
    with pytest.raises(ValueError, match=r"'q.shape\[1\]': expected T·H·W = 360 tokens"):
        processor(model.blocks[0].attn1, hidden)


def test_compiled_models_give_the_same_output(gen):
    """torch.compile with the processor installed: the blocks compiled whole (diffusers'
    regional compilation, fullgraph=True: the processor and vsa's ops capture in one
    graph), and the whole model (the grid hook breaks the graph once). Dynamo's graphs
    run as they are (backend "eager"), which keeps the test quick."""
    model = tiny_wan(gen, 2)
    args = inputs(gen, torch.float32, "cpu")
    with vsa_diffusers.install(model, mode="fine", topk=4):
        want = run(model, args)
        torch._dynamo.reset()
        assert torch.equal(run(torch.compile(model, backend="eager"), args), want)
        model.compile_repeated_blocks(fullgraph=True, backend="eager")
        assert torch.equal(run(model, args), want)


def test_a_copy_of_an_installed_model_tiles_its_own_latents(gen):
    """copy.deepcopy of an installed model (an EMA or teacher copy) follows its own latent grid,
    and running it leaves the original's alone."""
    import copy

    model = tiny_wan(gen, 1)
    small = (torch.randn(1, 4, 4, 8, 16, generator=gen), torch.tensor([500]), torch.randn(1, 7, 32, generator=gen))
    large = inputs(gen, torch.float32, "cpu")
    with vsa_diffusers.install(model, mode="fine", topk=2):
        run(model, small)
        twin = copy.deepcopy(model)
        got = run(twin, large)  # the copy at another grid, the original's still the small one
        assert torch.equal(got, run(model, large))
        assert model.blocks[0].attn1.processor.grid is not twin.blocks[0].attn1.processor.grid


@pytest.mark.parametrize("mode, topk", [("dense", None), ("fine", 2), ("vsa", 2)])
def test_blocks_run_where_their_inputs_are_moved(gen, monkeypatch, mode, topk):
    """The grid hook sees the latent where it enters the model. With diffusers' device_map the
    blocks run elsewhere: accelerate moves a module's inputs to its device inside its forward,
    after the model's pre-hooks (a pipeline's transformer on another GPU than the latents, a
    model split over GPUs), and the processors tiled cuda:1 tokens with cuda:0 indices (a
    device mismatch in tile). The meta device stands in for the latent's other GPU."""
    model = tiny_wan(gen, 1)
    args = inputs(gen, torch.float32, "cpu")
    with vsa_diffusers.install(model, mode=mode, topk=topk):
        want = run(model, args)
        set_grid = vsa_diffusers.LatentGrid.set
        monkeypatch.setattr(vsa_diffusers.LatentGrid, "set",
                            lambda grid, shape, device: set_grid(grid, shape, torch.device("meta")))
        got = run(model, args)
        assert model.blocks[0].attn1.processor.grid.metadata.variable_block_sizes.is_meta
    assert torch.equal(got, want)
