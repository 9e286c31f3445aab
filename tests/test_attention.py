"""Attention against independent references: torch's SDPA and nn.MultiheadAttention."""

import pytest
import torch
import torch.nn.functional as F

from mt.fastpath import cpu_ops
from mt.model import MultiHeadAttention, attention, causal_mask, padding_mask


def random_qkv(batch=3, heads=4, tq=5, tk=7, d_k=8, dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(batch, heads, t, d_k, generator=g).to(dtype) for t in (tq, tk, tk)]


def key_mask(batch=3, tk=7):
    lengths = torch.tensor([7, 4, 1])[:batch]
    tokens = torch.where(torch.arange(tk)[None, :] < lengths[:, None], 5, 0)
    return padding_mask(tokens, pad_id=0)


def test_masks_shapes_and_meaning():
    m = causal_mask(4)
    assert m.tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]
    pm = padding_mask(torch.tensor([[5, 6, 0], [7, 0, 0]]), pad_id=0)
    assert pm.shape == (2, 1, 1, 3)
    assert pm[:, 0, 0].tolist() == [[True, True, False], [True, False, False]]


@pytest.mark.parametrize("masked", ["none", "padding", "causal", "both"])
def test_explicit_attention_matches_sdpa(masked):
    q, k, v = random_qkv(tq=7)
    mask = key_mask() if masked in ("padding", "both") else None
    is_causal = masked in ("causal", "both")
    ours, weights = attention(q, k, v, mask, is_causal=is_causal)
    ref_mask = mask
    if is_causal:
        ref_mask = causal_mask(7) if mask is None else mask & causal_mask(7)
    reference = F.scaled_dot_product_attention(q, k, v, attn_mask=ref_mask)
    torch.testing.assert_close(ours, reference, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]), atol=1e-5, rtol=0)
    if mask is not None:  # nothing flows from padding keys
        assert weights.masked_select(~mask.expand_as(weights)).abs().max() == 0


def test_explicit_attention_bf16_close_to_fp32():
    q, k, v = random_qkv()
    mask = key_mask()
    ours, _ = attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), mask)
    reference, _ = attention(q, k, v, mask)
    torch.testing.assert_close(ours.float(), reference, atol=3e-2, rtol=3e-2)


@pytest.mark.parametrize("keys", [1, 7, 15, 16, 40])  # below 16 keys the rows are padded
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cpu_padded_softmax_equals_torch_softmax_with_gradient(keys, dtype):
    scores = (torch.randn(2, 3, 5, keys, generator=torch.Generator().manual_seed(1)) * 4).to(dtype)
    if keys > 1:  # a masked key (a row with no key left is attention()'s to zero)
        scores[0, 0, :, -1] = torch.finfo(dtype).min
    ours_in, ref_in = scores.clone().requires_grad_(), scores.clone().requires_grad_()
    ours, ref = cpu_ops.masked_softmax_padded(ours_in, None), torch.softmax(ref_in.float(), dim=-1)
    assert ours.dtype == torch.float32 and ours.shape == ref.shape
    torch.testing.assert_close(ours, ref, atol=1e-6, rtol=1e-6)
    upstream = torch.randn(ref.shape, generator=torch.Generator().manual_seed(2))
    ours.backward(upstream)
    ref.backward(upstream)
    torch.testing.assert_close(ours_in.grad, ref_in.grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_fully_masked_row_gives_zeros_not_nan(dtype):
    q, k, v = random_qkv(dtype=dtype)
    mask = torch.zeros(3, 1, 1, 7, dtype=torch.bool)
    mask[0, ..., :3] = True
    out, weights = attention(q, k, v, mask)
    assert not torch.isnan(out).any() and not torch.isnan(weights).any()
    assert out[1:].abs().max() == 0


def test_multihead_attention_matches_torch():
    torch.manual_seed(0)
    d_model, heads = 32, 4
    ours = MultiHeadAttention(d_model, heads).eval()
    ref = torch.nn.MultiheadAttention(d_model, heads, batch_first=True).eval()
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.kv_proj.weight]))
        ref.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.kv_proj.bias]))
        ref.out_proj.weight.copy_(ours.out_proj.weight)
        ref.out_proj.bias.copy_(ours.out_proj.bias)
    query, memory = torch.randn(3, 5, d_model), torch.randn(3, 7, d_model)
    mask = key_mask()
    for need_weights in (False, True):
        out, weights = ours(query, memory, mask=mask, need_weights=need_weights)
        ref_out, ref_weights = ref(query, memory, memory, key_padding_mask=~mask[:, 0, 0], average_attn_weights=False)
        torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
        if need_weights:
            torch.testing.assert_close(weights, ref_weights, atol=1e-5, rtol=1e-5)
    # causal self-attention
    x = torch.randn(2, 6, d_model)
    out, _ = ours(x, x, is_causal=True)
    ref_out, _ = ref(x, x, x, attn_mask=~causal_mask(6))
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_a_shared_mask_gives_what_its_boolean_mask_gives(dtype, causal):
    """SharedMask hands SDPA the float form SDPA would make of the boolean mask itself: the same outputs, bit
    for bit, a query that sees no key included; the written-out path reads the boolean mask."""
    from mt import fastpath
    from mt.model.attention import SharedMask

    torch.manual_seed(0)
    layer = MultiHeadAttention(32, 4).eval().to(dtype)
    query, memory = torch.randn(3, 7, 32, dtype=dtype), torch.randn(3, 7, 32, dtype=dtype)
    mask = key_mask()
    mask[2] = False  # the third sentence: no key at all
    shared = SharedMask(mask)
    for need_weights in (False, True):
        with fastpath.stock_ops():  # SDPA unless the weights are asked for
            plain, plain_weights = layer(query, memory, mask=mask, is_causal=causal, need_weights=need_weights)
            ours, our_weights = layer(query, memory, mask=shared, is_causal=causal, need_weights=need_weights)
        assert torch.equal(ours, plain) and not ours.isnan().any()
        assert (our_weights is None) == (not need_weights)
        if need_weights:
            assert torch.equal(our_weights, plain_weights)
    assert list(shared._additive) == ([] if causal else [dtype])  # made once, for SDPA alone
    assert shared.additive(dtype) is shared.additive(dtype)
    assert shared.additive(dtype)[1, 0, 0].tolist() == [0, 0, 0, 0] + [float("-inf")] * 3
