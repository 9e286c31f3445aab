"""The Transformer against ground truth: torch.nn.Transformer, causality, padding, incremental decoding."""

import math
import threading
from types import SimpleNamespace

import pytest
import torch

from mt.decoding.search import beam_search
from mt.fastpath import cpu_ops
from mt.model import Transformer, layers
from mt.model.layers import Dropout, LayerNorm, sinusoidal_positions

PAD = 0


def small_model(norm_first=False, tie=True, seed=0):
    torch.manual_seed(seed)
    return Transformer(
        50,
        50,
        d_model=32,
        heads=4,
        ffn_dim=64,
        encoder_layers=2,
        decoder_layers=2,
        dropout=0.0,
        norm_first=norm_first,
        tie_embeddings=tie,
    ).eval()


def padded_batch(lengths, max_len, vocab=50, seed=1):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(4, vocab, (len(lengths), max_len), generator=g)
    for row, n in enumerate(lengths):
        tokens[row, n:] = PAD
    return tokens


def copy_into_torch_transformer(ours: Transformer) -> torch.nn.Transformer:
    """An nn.Transformer with our weights (post-norm, no final norms, dropout off)."""
    layer0 = ours.encoder_layers[0]
    d_model, heads, ffn = ours.d_model, layer0.self_attn.heads, layer0.ffn.linear1.out_features
    ref = torch.nn.Transformer(
        d_model,
        heads,
        len(ours.encoder_layers),
        len(ours.decoder_layers),
        ffn,
        dropout=0.0,
        batch_first=True,
        norm_first=ours.norm_first,
    ).eval()

    def copy_attn(dst, src):
        dst.in_proj_weight.copy_(torch.cat([src.q_proj.weight, src.kv_proj.weight]))
        dst.in_proj_bias.copy_(torch.cat([src.q_proj.bias, src.kv_proj.bias]))
        dst.out_proj.load_state_dict(src.out_proj.state_dict())

    with torch.no_grad():
        for dst, src in zip(ref.encoder.layers, ours.encoder_layers):
            copy_attn(dst.self_attn, src.self_attn)
            dst.linear1.load_state_dict(src.ffn.linear1.state_dict())
            dst.linear2.load_state_dict(src.ffn.linear2.state_dict())
            dst.norm1.load_state_dict(src.attn_sublayer.norm.state_dict())
            dst.norm2.load_state_dict(src.ffn_sublayer.norm.state_dict())
        for dst, src in zip(ref.decoder.layers, ours.decoder_layers):
            copy_attn(dst.self_attn, src.self_attn)
            copy_attn(dst.multihead_attn, src.cross_attn)
            dst.linear1.load_state_dict(src.ffn.linear1.state_dict())
            dst.linear2.load_state_dict(src.ffn.linear2.state_dict())
            dst.norm1.load_state_dict(src.self_sublayer.norm.state_dict())
            dst.norm2.load_state_dict(src.cross_sublayer.norm.state_dict())
            dst.norm3.load_state_dict(src.ffn_sublayer.norm.state_dict())
        if ours.norm_first:
            ref.encoder.norm.load_state_dict(ours.encoder_norm.state_dict())
            ref.decoder.norm.load_state_dict(ours.decoder_norm.state_dict())
    if not ours.norm_first:  # the paper's post-norm stack has no final LayerNorm
        ref.encoder.norm = None
        ref.decoder.norm = None
    return ref


@pytest.mark.parametrize("norm_first", [False, True])
def test_matches_torch_nn_transformer(norm_first):
    ours = small_model(norm_first=norm_first)
    ref = copy_into_torch_transformer(ours)
    src = padded_batch([9, 5, 2], 9)
    tgt = padded_batch([7, 7, 3], 7, seed=2)
    src_emb = ours.embed(ours.src_embed, src)
    tgt_emb = ours.embed(ours.tgt_embed, tgt)
    with torch.no_grad():
        memory, src_mask = ours.encode(src)
        x = tgt_emb
        for layer in ours.decoder_layers:
            x = layer(x, memory, src_mask)
        ours_out = ours.decoder_norm(x)
        ref_out = ref(
            src_emb,
            tgt_emb,
            src_key_padding_mask=src == PAD,
            memory_key_padding_mask=src == PAD,
            tgt_mask=ref.generate_square_subsequent_mask(7),
            tgt_is_causal=True,
        )
    real_tgt = tgt != PAD  # torch's fast path may zero padded query rows; compare real positions
    torch.testing.assert_close(ours_out[real_tgt], ref_out[real_tgt], atol=1e-5, rtol=1e-5)


def test_causality_future_tokens_change_nothing_before():
    model = small_model()
    src = padded_batch([6, 4], 6)
    tgt = padded_batch([8, 8], 8, seed=3)
    changed = tgt.clone()
    changed[:, 5:] = padded_batch([3, 3], 3, seed=9)
    with torch.no_grad():
        a, b = model(src, tgt), model(src, changed)
    torch.testing.assert_close(a[:, :5], b[:, :5], atol=1e-6, rtol=0)
    assert not torch.allclose(a[:, 5:], b[:, 5:])


def test_source_padding_changes_nothing():
    model = small_model()
    src = padded_batch([6, 4], 6)
    tgt = padded_batch([5, 5], 5, seed=3)
    more_padding = torch.cat([src, torch.zeros(2, 11, dtype=torch.long)], dim=1)
    with torch.no_grad():
        torch.testing.assert_close(model(src, tgt), model(more_padding, tgt), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_incremental_decoding_equals_full_forward(norm_first):
    model = small_model(norm_first=norm_first, tie=False)
    src = padded_batch([9, 3, 6], 9)
    tgt = padded_batch([8, 8, 8], 8, seed=4)
    with torch.no_grad():
        full = model(src, tgt)  # (B, T, V)
        state = model.start_state(src)
        steps = []
        for t in range(tgt.size(1)):
            logits, state = model.step(tgt[:, t], state)
            steps.append(logits)
    torch.testing.assert_close(torch.stack(steps, dim=1), full, atol=1e-5, rtol=1e-5)


def test_cached_steps_through_reorders_and_dropped_rows_equal_a_full_forward_pass():
    """Over 40 steps, with hypotheses reordered, duplicated and dropped on the way, every step's logits
    equal a full forward pass over the hypotheses' histories."""
    model = small_model(tie=False)
    src = padded_batch([9, 3, 6, 5], 9)
    tokens = torch.randint(3, 50, (4, 40), generator=torch.Generator().manual_seed(7))
    moves = {5: torch.tensor([1, 1, 3, 0]), 19: torch.tensor([2, 0, 3]), 30: torch.tensor([2, 1, 0])}
    with torch.no_grad():
        state = model.start_state(src)
        rows = torch.arange(4)  # the source sentence of each hypothesis
        history = torch.empty(4, 0, dtype=torch.long)
        for t in range(tokens.size(1)):
            logits, state = model.step(tokens[: len(rows), t], state)
            history = torch.cat([history, tokens[: len(rows), t : t + 1]], dim=1)
            full = model(src[rows], history)[:, -1]
            torch.testing.assert_close(logits, full, atol=1e-5, rtol=1e-5)
            if t in moves:
                state, rows, history = state.select(moves[t]), rows[moves[t]], history[moves[t]]


def test_state_select_reorders_hypotheses():
    model = small_model()
    src = padded_batch([5, 3], 5)
    with torch.no_grad():
        state = model.start_state(src)
        first, state = model.step(torch.tensor([2, 2]), state)
        swapped = state.select(torch.tensor([1, 0]))
        a, _ = model.step(torch.tensor([7, 9]), state)
        b, _ = model.step(torch.tensor([9, 7]), swapped)
    torch.testing.assert_close(a.flip(0), b, atol=1e-5, rtol=1e-5)


def test_hypotheses_sharing_their_sentences_memory_step_as_with_copies_of_it():
    """Beam search's hypotheses of one sentence read one memory row: logits and cross-attention weights
    as if each had its own copy, through steps, reorders within sentences and a dropped sentence."""
    model = small_model(tie=False)
    src = padded_batch([5, 3, 7], 7)
    tokens = torch.randint(3, 50, (6, 9), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        shared, copied = model.start_state(src, copies=3), model.start_state(src).repeat_rows(3)
        assert shared.memory.size(0) == 3 and copied.memory.size(0) == 9
        for t in range(6):
            a, shared = model.step(tokens[t], shared, need_weights=True)
            weights_a = model.cross_attention()
            b, copied = model.step(tokens[t], copied, need_weights=True)
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(weights_a, model.cross_attention(), atol=1e-6, rtol=1e-5)
            if t == 2:  # hypotheses move within their sentences
                within = torch.tensor([2, 2, 0, 4, 3, 3, 6, 8, 7])
                shared, copied = shared.reorder_same_source(within), copied.reorder_same_source(within)
            if t == 4:  # the middle sentence is done and leaves
                keep = torch.tensor([1, 0, 2, 8, 8, 6])
                shared, copied = shared.select(keep), copied.select(keep)
                tokens = tokens[:, [0, 1, 2, 6, 7, 8]]
                assert shared.memory.size(0) == 2


def test_each_thread_reads_back_the_attention_weights_of_its_own_decode():
    """Two threads decoding with one model (mt-serve's decoding threads): each one's cross_attention is its
    own decode's, though the other decoded in between."""
    model = small_model()
    src = padded_batch([5, 3], 7)
    inputs = [torch.randint(3, 50, (2, n), generator=torch.Generator().manual_seed(n)) for n in (4, 6)]
    first, second, seen = threading.Barrier(2), threading.Barrier(2), {}

    def decode(i: int) -> None:  # thread 1 decodes after thread 0 has, and before thread 0 reads its weights
        with torch.no_grad():
            memory, mask = model.encode(src)
            if i == 1:
                first.wait()
            model.decode(inputs[i], memory, mask, need_weights=True)
            if i == 0:
                first.wait()
            second.wait()
            seen[i] = model.cross_attention()

    threads = [threading.Thread(target=decode, args=(i,)) for i in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [tuple(seen[i].shape[2:]) for i in (0, 1)] == [(4, 7), (6, 7)]  # (T, S) of each one's own decode
    with torch.no_grad():
        memory, mask = model.encode(src)
        model.decode(inputs[0], memory, mask, need_weights=True)
    torch.testing.assert_close(seen[0], model.cross_attention())


def test_beam_search_over_shared_memory_equals_search_over_copies():
    model = small_model(tie=False)

    class CopiedMemory(torch.nn.Module):  # every hypothesis with its own copy of the memory
        def start_state(self, src, copies=1):
            return model.start_state(src).repeat_rows(copies)

        def step(self, tokens, state):
            return model.step(tokens, state)

    src = padded_batch([9, 3, 6, 4, 8], 9)  # sentences end at different steps: some leave the batch early
    shared = beam_search(model, src, beam=4, max_len_a=1.0, max_len_b=2, nbest=3)
    copied = beam_search(CopiedMemory(), src, beam=4, max_len_a=1.0, max_len_b=2, nbest=3)
    assert [[h.tokens for h in hyps] for hyps in shared] == [[h.tokens for h in hyps] for hyps in copied]
    for hyps, others in zip(shared, copied):
        assert [h.score for h in hyps] == pytest.approx([h.score for h in others], abs=1e-5)


def test_sinusoidal_positions_formula_and_any_length():
    table = sinusoidal_positions(torch.arange(10_000), 16)
    pos, i = 9_999, 3
    assert table[pos, 2 * i].item() == pytest.approx(math.sin(pos / 10000 ** (2 * i / 16)), abs=1e-3)
    assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(pos / 10000 ** (2 * i / 16)), abs=1e-3)
    model = small_model()
    src = padded_batch([600], 600)
    with torch.no_grad():
        out = model(src, padded_batch([700], 700))
    assert out.shape == (1, 700, 50) and torch.isfinite(out).all()


def test_an_outgrown_position_table_stays_allocated():
    """CUDA graphs captured before the table grew read the old one by address (see
    test_graphed_training's CUDA test): it must not be freed and its memory handed to other tensors."""
    positions = layers.PositionalEncoding(16, 0.0)
    first = positions.table.data_ptr()
    positions(torch.zeros(1, 300, 16))
    positions.reserve(1000)
    assert positions.table.size(0) == 1000
    kept = [t.data_ptr() for t in positions.outgrown]
    assert kept[0] == first and len(kept) == 2 and positions.table.data_ptr() not in kept


def test_a_position_table_grown_while_decoding_is_one_training_can_save_for_backward():
    """Validation decodes under inference_mode; a table grown there must not be an inference tensor, which
    autograd refuses to save when training next uses it."""
    positions = layers.PositionalEncoding(16, 0.0)
    with torch.inference_mode():
        positions(torch.zeros(1, 300, 16))
    weight = torch.ones(16, requires_grad=True)
    (positions.table[:300] * weight).sum().backward()  # mul saves the table to give weight its gradient
    assert weight.grad is not None and not positions.table.is_inference()


@pytest.mark.parametrize("preset, paper", [("transformer_base", 65e6), ("transformer_big", 213e6)])
def test_model_presets_have_the_papers_size(preset, paper):
    """Table 3's parameter counts, with a shared 37k vocabulary (the paper's WMT14 en-de)."""
    from hydra import compose, initialize_config_dir

    from mt.config.model import build_model
    from mt.config.schema import CONFIG_DIR, register_configs

    register_configs()
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("config", overrides=[f"model={preset}"])
    with torch.device("meta"):  # shapes only: no memory, no initialisation
        model = build_model(cfg.model, SimpleNamespace(src_vocab_size=37_000, tgt_vocab_size=37_000))
    n = sum(p.numel() for p in model.parameters())
    assert abs(n / paper - 1) < 0.04, n  # 63.1M and 214.2M


@pytest.mark.parametrize("init", ["xavier", "fairseq"])
def test_initial_weight_scales(init):
    """xavier: each projection Xavier-uniform. fairseq: Q/K/V as one packed 3d x d Xavier matrix, feed-forward
    at nn.Linear's default. Both: embeddings N(0, d^-1/2), attention biases zero."""
    d, ffn = 64, 256
    torch.manual_seed(0)
    model = Transformer(50, 50, d_model=d, heads=4, ffn_dim=ffn, encoder_layers=1, decoder_layers=1, init=init)
    params = dict(model.named_parameters())

    def spans(name, bound):  # uniform within bound: the largest of thousands of draws lies just below it
        top = params[name].abs().max().item()
        assert 0.97 * bound < top <= bound, (name, top, bound)

    fairseq = init == "fairseq"
    for attn in ("encoder_layers.0.self_attn", "decoder_layers.0.self_attn", "decoder_layers.0.cross_attn"):
        spans(f"{attn}.q_proj.weight", math.sqrt(6 / ((4 if fairseq else 2) * d)))
        spans(f"{attn}.kv_proj.weight", math.sqrt(6 / ((4 if fairseq else 2) * d)))
        spans(f"{attn}.out_proj.weight", math.sqrt(6 / (2 * d)))
        assert not params[f"{attn}.kv_proj.bias"].any()
    spans("encoder_layers.0.ffn.linear1.weight", 1 / math.sqrt(d) if fairseq else math.sqrt(6 / (d + ffn)))
    spans("decoder_layers.0.ffn.linear2.weight", 1 / math.sqrt(ffn) if fairseq else math.sqrt(6 / (d + ffn)))
    assert params["decoder_layers.0.ffn.linear2.bias"].any() == fairseq  # nn.Linear's default bias is not zero
    assert abs(params["src_embed.weight"][1:].std().item() - d**-0.5) < 0.1 * d**-0.5


def test_an_unknown_init_is_a_config_error():
    from mt.config.model import TransformerConfig
    from mt.errors import MTError

    with pytest.raises(MTError, match="model.init"):
        TransformerConfig(init="kaiming").check()


def test_pad_embedding_is_zero_and_tied_weights_shared():
    model = small_model()
    assert model.src_embed.weight[PAD].abs().max() == 0
    assert model.tgt_embed is model.src_embed


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dropout_drops_p_and_rescales_the_rest(dtype):
    torch.manual_seed(0)
    dropout = Dropout(0.1).train()
    x = torch.rand(200, 500).add_(0.5).to(dtype).requires_grad_()
    y = dropout(x)
    y.backward(torch.ones_like(y))
    kept = y != 0
    assert y.dtype == dtype
    assert abs(1 - kept.float().mean().item() - 0.1) < 0.005
    torch.testing.assert_close(y[kept], (x[kept] / 0.9).detach())
    torch.testing.assert_close(x.grad, kept.to(dtype) / 0.9)  # gradient flows through kept units only
    assert torch.equal(dropout.eval()(x), x)


def test_dropout_masks_follow_torch_manual_seed():
    """The masks come from numpy's generator seeded by torch's: torch.manual_seed (and the RNG
    state a checkpoint restores) decides them."""
    dropout, x = Dropout(0.3).train(), torch.ones(64, 64)
    torch.manual_seed(5)
    first, second = dropout(x), dropout(x)
    torch.manual_seed(5)
    assert torch.equal(dropout(x), first)
    assert not torch.equal(first, second)


def test_pre_norm_layer_norm_hands_autocast_its_dtype():
    torch.manual_seed(0)
    norm, reference = LayerNorm(16), torch.nn.LayerNorm(16)
    x = torch.randn(4, 16)
    torch.testing.assert_close(norm(x), reference(x))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = norm(x)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), reference(x), atol=0.03, rtol=0.02)


@pytest.mark.parametrize("autocast", [False, True])
def test_row_blocked_output_layer_equals_linear_with_gradients(autocast, monkeypatch):
    monkeypatch.setattr(cpu_ops, "OUTPUT_ROWS_PER_BLOCK", 16)  # 50 rows: three full blocks and a partial one
    g = torch.Generator().manual_seed(0)
    h0, w0 = torch.randn(50, 8, generator=g), torch.randn(30, 8, generator=g)
    upstream = torch.randn(50, 30, generator=g)
    results = []
    for logits_fn in (layers.vocabulary_logits, torch.nn.functional.linear):
        h, w = h0.clone().requires_grad_(), w0.clone().requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out = logits_fn(h, w)
        out.float().backward(upstream)
        results.append((out, h.grad, w.grad))
    (ours, ours_dh, ours_dw), (ref, ref_dh, ref_dw) = results
    assert ours.dtype == ref.dtype == (torch.bfloat16 if autocast else torch.float32)
    assert ours_dw.dtype == torch.float32  # the gradient reaches the fp32 weight
    torch.testing.assert_close(ours, ref)
    torch.testing.assert_close(ours_dh, ref_dh)
    torch.testing.assert_close(ours_dw, ref_dw)


MASK_CONVERSIONS = {"aten.where", "aten.scalar_tensor", "aten.masked_fill_", "aten.bitwise_not", "aten.full"}


def step_ops(stage: str, depth: int):
    """The kernel ops of one training forward or (second) decoding step of a small model `depth` layers deep."""
    from mt import fastpath

    from conftest import OpCounter

    torch.manual_seed(0)
    model = Transformer(50, 50, d_model=32, heads=4, ffn_dim=64, encoder_layers=depth, decoder_layers=depth).eval()
    src = padded_batch([6, 3, 5], 6)
    with fastpath.stock_ops(), torch.no_grad():
        if stage == "training forward":
            tgt_in = padded_batch([4, 2, 3], 4, seed=2)
            with OpCounter() as counter:
                model(src, tgt_in)
        else:
            state = model.start_state(src, 2) if stage == "decoding step" else model.start_static_state(src, 2, 8)
            model.step(torch.full((6,), 4), state)  # the first step, which starts the caches
            with OpCounter() as counter:
                model.step(torch.full((6,), 5), state)
    return counter.ops


@pytest.mark.parametrize("stage", ["training forward", "decoding step", "fixed-slot step"])
def test_a_mask_is_turned_into_sdpas_float_form_once_not_once_per_layer(stage):
    """SDPA makes a float mask of a boolean one at every call (three kernels on a GPU): each pass or step
    makes it once for all its layers (SharedMask). Counted with the stock ops, SDPA's own conversion
    included: the ops two more layers add hold no mask conversion."""
    added = step_ops(stage, 4) - step_ops(stage, 2)
    assert added["aten._scaled_dot_product_flash_attention_for_cpu"] > 0  # the layers added went through SDPA
    assert not MASK_CONVERSIONS & set(added), added


@pytest.mark.parametrize("stage", ["decoding step", "fixed-slot step"])
def test_a_step_appends_a_layers_keys_and_values_in_one_op(stage):
    """The self-attention cache holds a layer's keys and values side by side: the newest position goes in
    with one concatenation or one indexed copy a layer, not two."""
    added = step_ops(stage, 4) - step_ops(stage, 2)
    appended = added["aten.cat"] + added["aten.index_copy_"]
    assert appended == 2, added  # for the 2 layers added


def test_reordering_hypotheses_moves_a_layers_keys_and_values_in_one_op():
    model = small_model()
    state = model.start_state(padded_batch([6, 3], 6), copies=2)
    _, state = model.step(torch.full((4,), 5), state)
    _, state = model.step(torch.full((4,), 6), state)
    from conftest import OpCounter

    with OpCounter() as counter:
        reordered = state.reorder_same_source(torch.tensor([1, 0, 3, 3]))
    assert counter.ops["aten.index_select"] == len(model.decoder_layers)
    before, after = state.caches[1].past["kv"], reordered.caches[1].past["kv"]
    assert torch.equal(after, before[:, [1, 0, 3, 3]])
