"""vsa.numpy_forward: the plain forward on numpy arrays, usable without torch."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import vsa
from attention_reference import EMPTY_ROW_LSE, TOLERANCE, make_problem, reference_attention, rel_error


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_matches_reference(gen, layout, dtype):
    p = make_problem(gen, heads=2, kv_heads=1, dtype=dtype, layout=layout)
    arrays = [t.numpy() for t in (p.q, p.k, p.v, *p.lists)]
    out, lse = vsa.numpy_forward(*arrays, layout=layout)
    ref_out, ref_lse = reference_attention(p.q, p.k, p.v, *p.lists, layout=layout)
    assert isinstance(out, np.ndarray) and out.dtype == arrays[0].dtype
    assert rel_error(torch.from_numpy(out), ref_out) <= TOLERANCE[dtype]
    assert lse.shape == ref_lse.shape and lse.dtype == np.float32
    # lse's values too (base 2, the sentinel where a row attends nothing), as
    # test_attention_forward.py checks block_sparse_attn's.
    lse = torch.from_numpy(lse)
    empty = ref_lse == EMPTY_ROW_LSE
    assert torch.all(lse[empty] == EMPTY_ROW_LSE)
    assert torch.allclose(lse[~empty].double(), ref_lse[~empty], rtol=0, atol=1e-4)


def test_query_padding(gen):
    # q_variable_block_sizes: rows past each block's count are empty rows (out 0, lse the
    # sentinel) whatever q holds there; the real rows are the reference's.
    p = make_problem(gen, heads=2, nq=4)
    q_vbs = torch.tensor([64, 1, 37, 0])
    q = p.q.clone()
    padding = (torch.arange(64)[None, :] >= q_vbs[:, None]).flatten()
    q[:, :, padding] = 1e3  # finite garbage, as the contract allows there
    out, lse = vsa.numpy_forward(q.numpy(), *(t.numpy() for t in (p.k, p.v, *p.lists)),
                                 q_variable_block_sizes=q_vbs.numpy().astype(np.int32))
    ref_out, ref_lse = reference_attention(q, p.k, p.v, *p.lists, q_vbs=q_vbs)
    out, lse = torch.from_numpy(out), torch.from_numpy(lse)
    assert torch.all(out[:, :, padding] == 0) and torch.all(lse[:, :, padding] == EMPTY_ROW_LSE)
    assert rel_error(out[:, :, ~padding], ref_out[:, :, ~padding]) <= 1e-5
    empty = ref_lse == EMPTY_ROW_LSE
    assert torch.allclose(lse[~empty].double(), ref_lse[~empty], rtol=0, atol=1e-4)


def test_other_integer_types_and_strides(gen):
    p = make_problem(gen, heads=4)
    q = np.asfortranarray(p.q.numpy())  # D stride != 1: copied
    out, _ = vsa.numpy_forward(q, p.k.numpy(), p.v.numpy(), p.q2k_idx.numpy().astype(np.int16),
                               p.q2k_num.numpy().astype(np.uint8), p.vbs.numpy().tolist(),
                               need_lse=False)
    ref_out, _ = reference_attention(p.q, p.k, p.v, *p.lists)
    assert rel_error(torch.from_numpy(out), ref_out) <= 1e-5


def test_non_native_byte_order(gen):
    # Arrays read from a big-endian file ('>f4', '>i4'): DLPack has no byte order, so the
    # binding refused them with a TypeError listing its signature instead of computing.
    p = make_problem(gen, heads=2)
    arrays = [t.numpy() for t in (p.q, p.k, p.v, *p.lists)]
    swapped = [a.astype(a.dtype.newbyteorder()) for a in arrays]
    out, lse = vsa.numpy_forward(*swapped)
    ref_out, ref_lse = reference_attention(p.q, p.k, p.v, *p.lists)
    assert out.dtype.isnative and out.dtype == arrays[0].dtype
    assert rel_error(torch.from_numpy(out), ref_out) <= 1e-5
    empty = ref_lse == EMPTY_ROW_LSE
    assert torch.allclose(torch.from_numpy(lse)[~empty].double(), ref_lse[~empty], rtol=0, atol=1e-4)


def test_errors(gen):
    p = make_problem(gen)
    arrays = [t.numpy() for t in (p.q, p.k, p.v, *p.lists)]
    # numpy's default dtype: the message says which dtypes tokens take (it listed int32, int64
    # and bool beside them, as if q could be one).
    with pytest.raises(vsa.UnsupportedError, match=r"'q\.dtype'.*float32 for tokens.*got float64"):
        vsa.numpy_forward(arrays[0].astype(np.float64), *arrays[1:])
    with pytest.raises(ValueError, match="'q2k_idx.dtype'"):
        vsa.numpy_forward(*arrays[:3], arrays[3].astype(np.float32), *arrays[4:])
    with pytest.raises(ValueError, match="'scale'"):
        vsa.numpy_forward(*arrays, scale=0)
    # An empty batch is refused by its extents (its strides, which numpy sets to 0, say nothing).
    with pytest.raises(ValueError, match="'q.shape'"):
        vsa.numpy_forward(*(a[:0] for a in arrays[:5]), arrays[5])


def test_runs_without_torch():
    """With torch made unimportable, `import vsa` still works and numpy_forward computes."""
    script = textwrap.dedent("""
        import sys
        sys.modules["torch"] = None  # any `import torch` now fails
        import numpy as np
        import vsa
        assert not hasattr(vsa, "block_sparse_attn")
        rng = np.random.default_rng()
        q, k, v = (rng.standard_normal((1, 1, 128, 64), dtype=np.float32) for _ in range(3))
        idx = np.array([[[[0], [1]]]], dtype=np.int32)
        num = np.ones((1, 1, 2), dtype=np.int32)
        out, lse = vsa.numpy_forward(q, k, v, idx, num, np.array([64, 64]))
        assert np.isfinite(out).all() and np.abs(out).sum() > 0
        print("ok")
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
