"""mt.fastpath: every CPU form computes what its stock op computes, and the path other devices take
(the stock ops) launches the same ops whatever the batch and compiles without graph breaks."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest
import torch
import torch.fx.experimental._config as fx_config
import torch.nn.functional as F

from mt import fastpath
from mt.data.lines import read_lines
from mt.data.tokenizer import BOS, EOS, PAD
from mt.decoding.fixed_slots import slot_shape
from mt.decoding.search import beam_search, greedy_search, packed_copy
from mt.decoding.translator import DecodeSettings, Translator
from mt.fastpath import cpu_ops, cpu_process
from mt.inference import load_for_inference
from mt.model import MultiHeadAttention, Transformer
from mt.training.loss import label_smoothed_loss

from conftest import REPO, OpCounter, overfit, pad_ids, reversal_task


def both_forms(fn):
    """fn() with the CPU forms, then with the stock ops: (cpu result, stock result)."""
    with fastpath.stock_ops(False):
        cpu = fn()
    with fastpath.stock_ops(True):
        stock = fn()
    return cpu, stock


def test_stock_ops_switch_and_restore():
    x = torch.zeros(3)
    assert fastpath.rows_to_score(x > 0) is not None  # the CPU form: rows picked by the mask
    with fastpath.stock_ops():
        assert fastpath.rows_to_score(x > 0) is None
        with fastpath.stock_ops(False):
            assert fastpath.rows_to_score(x > 0) is not None
        assert fastpath.rows_to_score(x > 0) is None
    assert fastpath.rows_to_score(x > 0) is not None


# ---- each CPU form against its stock op --------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_output_layer_forms_agree_with_gradients(dtype):
    g = torch.Generator().manual_seed(0)
    h0, w0 = torch.randn(2500, 16, generator=g), torch.randn(300, 16, generator=g)  # 2500 rows: 3 blocks

    def run():
        h, w = h0.clone().requires_grad_(), w0.clone().requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
            out = fastpath.linear(h, w)
        out.float().square().sum().backward()
        return out, h.grad, w.grad

    for ours, ref in zip(*both_forms(run)):
        assert ours.dtype == ref.dtype
        torch.testing.assert_close(ours, ref)


@pytest.mark.parametrize("keys", [3, 16, 40])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_masked_softmax_forms_agree_including_a_query_that_sees_nothing(keys, dtype):
    g = torch.Generator().manual_seed(0)
    scores0 = (torch.randn(2, 3, 4, keys, generator=g) * 3).to(dtype)
    mask = torch.rand(2, 1, 4, keys, generator=g) > 0.3
    mask[..., 0] = True
    mask[1, 0, 2] = False  # this query may attend to nothing: all-zero weights
    scores0 = scores0.masked_fill(~mask, torch.finfo(dtype).min)
    upstream = torch.randn(2, 3, 4, keys, generator=g)

    def run():
        scores = scores0.clone().requires_grad_()
        weights = fastpath.masked_softmax(scores, mask)
        weights.backward(upstream)
        return weights, scores.grad

    (cpu, cpu_grad), (stock, stock_grad) = both_forms(run)
    assert cpu.dtype == stock.dtype == torch.float32
    torch.testing.assert_close(cpu, stock, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(cpu_grad, stock_grad)
    assert stock[1, :, 2].abs().max() == 0
    torch.testing.assert_close(stock[0].sum(-1), torch.ones(3, 4))


@pytest.mark.parametrize("queries", [1, 6])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_attention_written_out_and_fused_agree(queries, dtype):
    """On a CPU, bf16 and single-query attention are written out (Eq. 1); stock is SDPA."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(32, 4).eval().to(dtype)
    query, memory = torch.randn(3, queries, 32, dtype=dtype), torch.randn(3, 7, 32, dtype=dtype)
    mask = (torch.arange(7) < torch.tensor([7, 4, 1])[:, None])[:, None, None, :]
    cpu, stock = both_forms(lambda: mha(query, memory, mask=mask)[0])
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(cpu, stock, atol=tol, rtol=tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dropout_forms_drop_p_and_rescale_the_rest(dtype):
    x = torch.rand(400, 500).add_(0.5).to(dtype)
    torch.manual_seed(0)
    for y in both_forms(lambda: fastpath.dropout(x, 0.1)):
        kept = y != 0
        assert y.dtype == dtype
        assert abs(1 - kept.float().mean().item() - 0.1) < 0.005
        torch.testing.assert_close(y[kept], x[kept] / 0.9)


def test_top_log_probs_forms_agree():
    torch.manual_seed(0)
    logits = (torch.randn(300, 1000) * 3).bfloat16()  # several blocks of rows
    (values, ids), (ref_values, ref_ids) = both_forms(lambda: fastpath.top_log_probs(logits, 10))
    assert values.dtype == ref_values.dtype == torch.float32
    torch.testing.assert_close(values, ref_values, atol=2e-3, rtol=0)
    torch.testing.assert_close(logits.gather(1, ids), logits.gather(1, ref_ids))  # same scores (ties may swap)


@pytest.mark.parametrize("vocab", [8000, 8003, 1000])  # whole chunks, a tail past the last one, too few chunks
@pytest.mark.parametrize("k", [1, 10])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_top_log_probs_are_log_softmax_topk_in_fp32(vocab, k, dtype):
    """The chunked pick finds exactly topk's tokens, and the log-probabilities are fp32 log_softmax's,
    of bf16 logits too (taken to fp32 before anything is subtracted)."""
    torch.manual_seed(0)
    logits = torch.randn(300, vocab) * 3
    logits[0, 40:] = float("-inf")  # a row with few possible tokens (constraints rule tokens out)
    logits[1, -1] = 50.0  # the best token in the tail
    logits[2, :64] = 20.0 + torch.arange(64.0)  # every best token in one chunk
    logits[3] = torch.randn(vocab).clamp(max=0.5)  # many equal values at the top: ties
    logits = logits.to(dtype)
    with fastpath.stock_ops(False):
        values, ids = fastpath.top_log_probs(logits, k)
    ref_values, ref_ids = logits.float().log_softmax(dim=-1).topk(k, dim=-1)
    assert values.dtype == torch.float32
    torch.testing.assert_close(values, ref_values, atol=1e-5, rtol=0)
    torch.testing.assert_close(logits.gather(1, ids), logits.gather(1, ref_ids), atol=0, rtol=0)  # ties may swap
    assert ids[1, 0] == vocab - 1 and torch.equal(ids[2], torch.arange(63, 63 - k, -1))
    if dtype == torch.float32:  # few ties: the very same tokens (bf16 logits tie often)
        assert torch.equal(ids[[0, 1, 2, *range(4, 300)]], ref_ids[[0, 1, 2, *range(4, 300)]])


def small_model(norm_first: bool, dropout: float = 0.0, vocab: int = 40) -> Transformer:
    torch.manual_seed(0)
    return Transformer(
        vocab,
        vocab,
        d_model=32,
        heads=4,
        ffn_dim=64,
        encoder_layers=2,
        decoder_layers=2,
        dropout=dropout,
        norm_first=norm_first,
    )


def padded_pair(batch: int, length: int = 9, vocab: int = 40, seed: int = 1):
    """(src, tgt_in, tgt_out) with padding at the ends of rows."""
    g = torch.Generator().manual_seed(seed)
    src, tgt = (torch.randint(4, vocab, (batch, length), generator=g) for _ in range(2))
    for row in range(batch):
        src[row, length - row % 4 :] = PAD
        tgt[row, length - (row + 1) % 3 :] = PAD
    return src, tgt, tgt.roll(-1, dims=1)


def training_loss(model, src, tgt_in, tgt_out) -> tuple[torch.Tensor, torch.Tensor]:
    """What the trainer does: score the rows fastpath picks, the loss leaves out padding."""
    keep = fastpath.rows_to_score(tgt_out != PAD)
    logits = model(src, tgt_in, keep=keep)
    return label_smoothed_loss(logits, tgt_out if keep is None else tgt_out[keep], 0.1, pad_id=PAD)


@pytest.mark.parametrize("norm_first", [False, True])
def test_training_step_forms_agree_in_fp32(norm_first):
    """Every form at once (padding rows, output layer, attention, loss): same loss, same gradients."""
    model = small_model(norm_first).train()
    src, tgt_in, tgt_out = padded_pair(8)

    def run():
        model.zero_grad()
        loss, nll = training_loss(model, src, tgt_in, tgt_out)
        loss.backward()
        return loss, nll, {n: p.grad.clone() for n, p in model.named_parameters()}

    (loss, nll, grads), (ref_loss, ref_nll, ref_grads) = both_forms(run)
    torch.testing.assert_close(loss, ref_loss)
    torch.testing.assert_close(nll, ref_nll)
    for name, grad in grads.items():
        torch.testing.assert_close(grad, ref_grads[name], atol=1e-5, rtol=1e-4, msg=name)


def test_bf16_training_loss_forms_agree():
    """Under bf16 autocast the CPU keeps a bf16 residual stream; the stock path lets autocast cast."""
    model = small_model(norm_first=True).train()
    src, tgt_in, tgt_out = padded_pair(8)

    def run():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return training_loss(model, src, tgt_in, tgt_out)[0]

    cpu, stock = both_forms(run)
    torch.testing.assert_close(cpu, stock, rtol=2e-2, atol=0)


def test_search_results_agree_whichever_rows_are_dropped_when():
    """Greedy and beam search over the forms' scoring and row-dropping policies give the same outputs."""
    pairs = reversal_task(40, 20, seed=3)
    torch.manual_seed(0)
    model = Transformer(
        20, 20, d_model=32, heads=4, ffn_dim=64, encoder_layers=1, decoder_layers=1, dropout=0.0, norm_first=True
    )
    model = overfit(model, pairs[:20], steps=60)  # half-trained: outputs of varied lengths
    src = pad_ids([s for s, _ in pairs], suffix=[EOS])
    greedy = both_forms(lambda: [h.tokens for h in greedy_search(model, src, max_len_a=1.0, max_len_b=4)])
    assert greedy[0] == greedy[1]
    cpu, stock = both_forms(lambda: beam_search(model, src, beam=3, max_len_a=1.0, max_len_b=4, nbest=2))
    assert [[h.tokens for h in hyps] for hyps in cpu] == [[h.tokens for h in hyps] for hyps in stock]
    for ours, ref in zip(cpu, stock):
        assert [h.score for h in ours] == pytest.approx([h.score for h in ref], abs=1e-4)


def test_search_reads_the_device_in_one_packed_copy_that_loses_nothing():
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(6, 4, generator=g)
    scores[0, 1] = float("-inf")
    ids = torch.randint(0, 2**40, (6, 4), generator=g)  # any token id a vocabulary can have, and more
    flags = torch.rand(6, 4, generator=g) > 0.5
    copies = packed_copy((scores, ids, flags, scores[:, 0]), torch.device("cpu"))
    for copy, original in zip(copies, (scores, ids, flags, scores[:, 0])):
        assert copy.dtype == original.dtype and torch.equal(copy, original)


def test_worth_dropping_thresholds():
    cpu = torch.device("cpu")
    assert fastpath.worth_dropping(2, 16, cpu) and not fastpath.worth_dropping(1, 16, cpu)  # an eighth
    assert not fastpath.worth_dropping(7, 16, torch.device("meta")) and fastpath.worth_dropping(8, 16, "meta")
    with fastpath.stock_ops():
        assert not fastpath.worth_dropping(2, 16, cpu)
        assert fastpath.worth_dropping(8, 16, cpu)


def test_kept_rows_buckets_are_few_and_add_at_most_an_eighth():
    buckets = {n: cpu_ops.kept_rows_bucket(n) for n in range(1, 5000)}
    assert all(n <= b <= n + n // 8 for n, b in buckets.items())
    assert all(cpu_ops.kept_rows_bucket(b) == b for b in buckets.values())  # a bucket stays itself
    for low in (16, 32, 64, 1024, 2048):
        assert len({b for b in buckets.values() if low <= b < 2 * low}) == 8  # 8 sizes an octave


def test_rows_to_keep_adds_finished_rows_up_to_a_bucket_on_a_cpu_only():
    running = torch.zeros(40, dtype=torch.bool)
    running[torch.tensor([0, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 38, 39, 2, 4, 6])] = True  # 17 running
    keep = fastpath.rows_to_keep(running, torch.device("cpu"))
    assert keep.numel() == 18 and keep.tolist() == sorted(keep.tolist())
    assert set(running.nonzero().squeeze(1).tolist()) < set(keep.tolist())  # all running ones, one finished
    exact = running.nonzero().squeeze(1)
    assert torch.equal(fastpath.rows_to_keep(running, torch.device("meta")), exact)
    with fastpath.stock_ops():
        assert torch.equal(fastpath.rows_to_keep(running, torch.device("cpu")), exact)
    all_running = torch.ones(17, dtype=torch.bool)  # its bucket, 18, is more rows than there are
    assert fastpath.rows_to_keep(all_running, torch.device("cpu")).numel() == 17


def test_greedy_search_steps_over_bucketed_batch_sizes_after_a_drop(monkeypatch):
    """Greedy search on a CPU shrinks the decoder batch to bucket sizes, whose matmul kernels come back;
    test_search_results_agree_whichever_rows_are_dropped_when checks the outputs."""
    pairs = reversal_task(60, 20, seed=5)
    torch.manual_seed(0)
    model = Transformer(
        20, 20, d_model=32, heads=4, ffn_dim=64, encoder_layers=1, decoder_layers=1, dropout=0.0, norm_first=True
    )
    model = overfit(model, pairs[:20], steps=60)
    src = pad_ids([s for s, _ in pairs], suffix=[EOS])
    sizes = []
    step = model.step

    def recording_step(tokens, state):
        sizes.append(tokens.size(0))
        return step(tokens, state)

    model.step = recording_step
    kept = []  # (rows running, rows kept) at each drop
    rows_to_keep = fastpath.rows_to_keep

    def recording_rows_to_keep(running, device):
        keep = rows_to_keep(running, device)
        kept.append((int(running.sum()), keep.numel()))
        return keep

    monkeypatch.setattr(fastpath, "rows_to_keep", recording_rows_to_keep)
    greedy_search(model, src, max_len_a=1.0, max_len_b=4)
    assert any(running < rows for running, rows in kept)  # finished rows rode along to a bucket
    assert all(cpu_ops.kept_rows_bucket(n) == n for n in sizes[1:]) and {n for _, n in kept} <= set(sizes)


def stepped(model, src, steps: int, meddle=None) -> tuple[list[torch.Tensor], list[int]]:
    """Each step's logits and the key slots its self-attention cache held, over `steps` greedy steps;
    meddle(state) runs before every step."""
    state = model.start_state(src)
    tokens = torch.full((src.size(0),), BOS)
    logits, slots = [], []
    for _ in range(steps):
        if meddle is not None:
            meddle(state)
        out, state = model.step(tokens, state)
        logits.append(out)
        slots.append(state.caches[0].past["kv"].size(3))
        tokens = out.argmax(-1)
    return logits, slots


def test_decoding_keys_sit_in_rooms_of_8_masked_on_a_cpu_and_give_the_stock_logits():
    model = small_model(norm_first=True).eval()
    src = padded_pair(3)[0]
    with torch.inference_mode():
        (cpu, cpu_slots), (stock, stock_slots) = both_forms(lambda: stepped(model, src, 10))
    assert cpu_slots == [8] * 8 + [16] * 2 and stock_slots == list(range(1, 11))
    for ours, ref in zip(cpu, stock):
        torch.testing.assert_close(ours, ref, atol=1e-5, rtol=1e-5)


def test_decoding_keys_not_yet_written_never_reach_the_output():
    """Whatever the room's unwritten slots hold, a step's logits stay the same: they are masked."""
    model = small_model(norm_first=False).eval()
    src = padded_pair(3)[0]

    def garbage_in_unwritten_slots(state):
        for cache in state.caches:
            if "kv" in cache.past:
                cache.past["kv"][:, :, :, state.position :] = 1e4

    with torch.inference_mode(), fastpath.stock_ops(False):
        clean, _ = stepped(model, src, 6)
        meddled, slots = stepped(model, src, 6, garbage_in_unwritten_slots)
    assert slots == [8] * 6
    for ours, ref in zip(meddled, clean):
        torch.testing.assert_close(ours, ref)


def test_translation_batches_keep_to_few_shapes_on_a_cpu_and_translate_as_exact_ones(trained_run, monkeypatch):
    """On a CPU, search.py's batches take the fixed-slot search's shapes (sources padded to a multiple of 8
    positions, filler rows up to the shape's); the translations are the exact shapes' (fp32), in order."""
    model, tokenizer, _ = load_for_inference([str(trained_run / "checkpoints" / "best.pt")])
    shapes = []
    search = Translator._search

    def recording_search(self, src, *args, **kwargs):
        shapes.append((fastpath.bounded_shapes(src.device), *src.shape))
        return search(self, src, *args, **kwargs)

    monkeypatch.setattr(Translator, "_search", recording_search)
    settings = DecodeSettings(beam=2, precision="fp32", batch_tokens=300)
    budget = Translator(model, tokenizer, settings)._budget()
    for lines in ([" ".join(["das Haus ist klein"] * n) for n in range(1, 30)], ["ein Hund", "", "zwei Katzen"]):
        shapes.clear()
        bounded, exact = both_forms(lambda lines=lines: Translator(model, tokenizer, settings).translate(lines))
        assert bounded == exact and len(bounded) == len(lines)
        cpu_shapes = [(rows, cols) for bounded_form, rows, cols in shapes if bounded_form]
        stock_shapes = [(rows, cols) for bounded_form, rows, cols in shapes if not bounded_form]
        assert all(slot_shape(rows, cols, budget) == (rows, cols) for rows, cols in cpu_shapes)
        assert any(slot_shape(rows, cols, budget) != (rows, cols) for rows, cols in stock_shapes)


def test_the_memory_script_reports_each_call_over_shuffled_copies(trained_run, tmp_path):
    """scripts/bench_memory.py (the measure of the heap that unbounded shapes grew): copies after the first
    are the same lines in another order, and every call's lines are counted, the last call's short ones too."""
    spec = importlib.util.spec_from_file_location("bench_memory", REPO / "scripts" / "bench_memory.py")
    bench_memory = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_memory)
    src = tmp_path / "src.de"
    lines = [f"das Haus Nummer {i}" for i in range(12)]
    src.write_text("".join(line + "\n" for line in lines))
    copies = bench_memory.input_lines(str(src), 3, seed=0)
    assert copies[:12] == lines and sorted(copies[12:24]) == sorted(lines) == sorted(copies[24:])
    assert copies[12:24] != lines and copies[12:24] != copies[24:]
    report = tmp_path / "memory.jsonl"
    checkpoint = str(trained_run / "checkpoints" / "best.pt")
    bench_memory.main(["--checkpoint", checkpoint, "--src", str(src), "--copies", "2", "--call-lines", "5"]
                      + ["--beam", "2", "--dtype", "fp32", "--json", str(report)])  # fmt: skip
    rows = [json.loads(line) for line in report.read_text().splitlines()]
    assert [row["lines"] for row in rows] == [5, 10, 15, 20, 24]
    assert all(row["rss_gib"] > 0 for row in rows)
    assert bench_memory.malloc_info() is None or all(row["live_gib"] > 0 for row in rows)


def test_tune_process_touches_the_cpu_only(monkeypatch):
    monkeypatch.delenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", raising=False)
    fastpath.tune_process(torch.device("meta"), training=True)
    assert "ONEDNN_PRIMITIVE_CACHE_CAPACITY" not in os.environ
    fastpath.tune_process(torch.device("cpu"), training=True)
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == "64"


def test_tune_process_turns_cudnn_attention_off_for_cuda_training_only(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.backends.cuda, "enable_cudnn_sdp", calls.append)
    for device, training in [("cpu", True), ("meta", True), ("cuda", False)]:
        fastpath.tune_process(torch.device(device), training=training)
    assert calls == []
    with fastpath.stock_ops():
        fastpath.tune_process(torch.device("cuda"), training=True)
    assert calls == []
    fastpath.tune_process(torch.device("cuda"), training=True)
    assert calls == [False]


# ---- the path other devices take ---------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cpu_index_select_as_rows_equals_index_select(dtype):
    x = torch.randn(2, 6, 3, 4, 5).to(dtype)
    for dim, index in [(1, [5, 0, 0, 2]), (2, [2, 1]), (3, [3, 3, 0, 1, 2, 3])]:
        index = torch.tensor(index)
        assert torch.equal(fastpath.index_select(x, dim, index), x.index_select(dim, index))
    view = x.transpose(0, 1)  # not contiguous: the stock op
    assert torch.equal(fastpath.index_select(view, 1, torch.tensor([1, 0])), view.index_select(1, torch.tensor([1, 0])))


def count_ops_script():
    """scripts/count_ops.py as a module."""
    spec = importlib.util.spec_from_file_location("count_ops", REPO / "scripts" / "count_ops.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_base_model_step_off_the_cpu_launches_the_same_ops_at_any_batch():
    count_ops = count_ops_script()
    with fx_config.patch(meta_nonzero_assume_all_nonzero=True):  # h[keep] on meta
        small, large = count_ops.training_step_ops(64, 37000), count_ops.training_step_ops(780, 37000)
    assert small == large
    assert large <= 1400  # 3,842 at 780 sentences while the CPU's row blocks ran everywhere


def test_the_op_count_script_prints_each_steps_count(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["count_ops.py", "--vocab", "200", "--json"])
    printed = []
    monkeypatch.setattr("builtins.print", printed.append)
    count_ops_script().main()
    counts = json.loads(printed[0])
    assert list(counts) == [
        "training step, 64 x 32 tokens",
        "training step, 780 x 32 tokens",
        "beam search: model.step and the reorder",
        "fixed-slot beam search: whole step",
    ]
    assert counts["training step, 64 x 32 tokens"] == counts["training step, 780 x 32 tokens"] > 1000
    assert 100 < counts["beam search: model.step and the reorder"] < counts["fixed-slot beam search: whole step"]


def test_stock_training_step_on_the_cpu_launches_the_same_ops_at_any_batch():
    model = small_model(norm_first=False, dropout=0.1).train()
    counts = []
    with fastpath.stock_ops():
        for batch in (4, 300):
            src, tgt_in, tgt_out = padded_pair(batch, length=40)
            model.zero_grad(set_to_none=True)
            counter = OpCounter()
            with counter:
                training_loss(model, src, tgt_in, tgt_out)[0].backward()
            counts.append(sum(counter.ops.values()))
    assert counts[0] == counts[1]


def test_stock_training_step_compiles_without_graph_breaks():
    torch._dynamo.reset()
    model = small_model(norm_first=False, dropout=0.1).train()
    src, tgt_in, tgt_out = padded_pair(8)

    def step(src, tgt_in, tgt_out):
        return training_loss(model, src, tgt_in, tgt_out)[0]

    with fastpath.stock_ops():
        explanation = torch._dynamo.explain(step)(src, tgt_in, tgt_out)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    assert explanation.graph_count == 1
    torch._dynamo.reset()


def test_cpu_training_step_compiles_to_the_stock_ops():
    """Under torch.compile the CPU forms step aside (the numpy-drawn dropout broke the compiled
    graph, then crashed train.compile=true in AOT autograd): one graph, and the loss of the eager stock
    ops. Compiled through AOT autograd without code generation (aot_eager), where both failures arose:
    inductor's C++ build adds nothing of ours and took ~85 s on a cold cache (23 s in all this way)."""
    torch._dynamo.reset()
    model = small_model(norm_first=True, dropout=0.0).train()
    src, tgt_in, tgt_out = padded_pair(8)

    def step(src, tgt_in, tgt_out):
        return training_loss(model, src, tgt_in, tgt_out)[0]

    explanation = torch._dynamo.explain(step)(src, tgt_in, tgt_out)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    compiled = torch.compile(step, dynamic=True, backend="aot_eager")(src, tgt_in, tgt_out)
    with fastpath.stock_ops():
        torch.testing.assert_close(compiled, step(src, tgt_in, tgt_out), rtol=1e-4, atol=1e-4)
    torch._dynamo.reset()


def test_stock_cross_entropy_equals_torch_with_ignore_index():
    torch.manual_seed(0)
    logits = torch.randn(50, 30).bfloat16()
    target = torch.randint(0, 30, (50,))
    with fastpath.stock_ops():
        loss, nll = fastpath.label_smoothed_cross_entropy(logits, target, 0.2, ignore_index=0)
    expected = F.cross_entropy(logits.float(), target, ignore_index=0, label_smoothing=0.2, reduction="sum")
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(nll, F.cross_entropy(logits.float(), target, ignore_index=0, reduction="sum"))


def test_decoding_precision_and_autocast_per_device(monkeypatch):
    """Off the CPU: fp32 for validation and the test score, and a bf16 copy decodes without autocast
    (under autocast SDPA took cuDNN attention, 7x slower on an H100); on the CPU both as measured there:
    bf16 for a bf16-trained model only where the CPU multiplies bf16 natively, and never fp16."""
    cpu, gpu = torch.device("cpu"), torch.device("meta")
    monkeypatch.setattr(cpu_process, "native_bf16", lambda: True)
    assert fastpath.decode_precision(cpu, "bf16") == "bf16" and fastpath.decode_precision(gpu, "bf16") == "fp32"
    assert fastpath.decode_precision(cpu, "fp32") == "fp32" and fastpath.decode_precision(cpu, "fp16") == "fp32"
    assert fastpath.autocast_decoding(cpu) and not fastpath.autocast_decoding(gpu)
    with fastpath.stock_ops():
        assert not fastpath.autocast_decoding(cpu) and fastpath.decode_precision(cpu, "bf16") == "fp32"
    monkeypatch.setattr(cpu_process, "native_bf16", lambda: False)
    assert fastpath.decode_precision(cpu, "bf16") == "fp32"


def test_bf16_decoding_without_autocast_translates_as_with_it(trained_run, tiny_corpus):
    """The path a GPU takes (stock ops, no autocast over the bf16 copy) gives the CPU's bf16 translations."""
    model, tokenizer, _ = load_for_inference([str(trained_run / "checkpoints" / "best.pt")])
    lines = read_lines(tiny_corpus / "test.de")
    settings = DecodeSettings(beam=3, precision="bf16")
    with_autocast = Translator(model, tokenizer, settings).translate_nbest(lines)
    with fastpath.stock_ops():
        without = Translator(model, tokenizer, settings).translate_nbest(lines)
    same = sum(a[0].text == b[0].text for a, b in zip(with_autocast, without))
    assert same >= 0.9 * len(lines)


def test_bf16_training_falls_back_to_fp32_only_on_a_cpu_without_native_bf16(monkeypatch):
    cpu, gpu = torch.device("cpu"), torch.device("meta")
    monkeypatch.setattr(cpu_process, "native_bf16", lambda: False)
    assert fastpath.training_precision(cpu, "bf16") == "fp32"
    assert fastpath.training_precision(cpu, "fp32") == "fp32"
    assert fastpath.training_precision(gpu, "bf16") == "bf16" and fastpath.training_precision(gpu, "fp16") == "fp16"
    with fastpath.stock_ops():
        assert fastpath.training_precision(cpu, "bf16") == "bf16"  # stock: as asked
    monkeypatch.setattr(cpu_process, "native_bf16", lambda: True)
    assert fastpath.training_precision(cpu, "bf16") == "bf16"


@pytest.mark.skipif(cpu_process.cpu_flags() is None, reason="no /proc/cpuinfo")
def test_native_bf16_agrees_with_the_cpus_own_flags():
    flags = cpu_process.cpu_flags()
    assert cpu_process.native_bf16() == bool(flags & {"avx512_bf16", "amx_bf16", "bf16"})


MKL_PROBE = """
import json
import torch
from mt.fastpath import cpu_process, tune_process
vendor_check = cpu_process.mkl_vendor_check()
before = vendor_check()
tune_process("cpu", training=True)
torch.manual_seed(0)
a, b = torch.randn(300, 200), torch.randn(200, 500)
error = ((a @ b).double() - a.double() @ b.double()).abs().max().item()
print(json.dumps({"before": before, "after": vendor_check(), "error": error}))
"""

on_amd_with_mkl = pytest.mark.skipif(
    not (cpu_process.cpu_vendor() == "AuthenticAMD" and torch.backends.mkl.is_available()),
    reason="needs an AMD CPU and torch with MKL",
)


def probe_mkl(**env) -> dict:
    """MKL_PROBE's answer, in a fresh process (MKL chooses its kernels once, at its first call)."""
    result = subprocess.run(
        [sys.executable, "-c", MKL_PROBE], env={**os.environ, **env}, capture_output=True, text=True, check=True
    )
    return json.loads(result.stdout.splitlines()[-1])


@on_amd_with_mkl
def test_on_an_amd_cpu_mkl_takes_its_fast_kernels_and_multiplies_right():
    probe = probe_mkl()
    assert (probe["before"], probe["after"]) == (0, 1)
    assert probe["error"] < 1e-3
    assert probe_mkl(MT_FASTPATH="stock")["after"] == 0  # the stock process: MKL as torch ships it


def test_mkl_is_left_alone_on_other_cpus(monkeypatch):
    monkeypatch.setattr(cpu_process, "cpu_vendor", lambda: "GenuineIntel")
    assert cpu_process.mkl_fast_kernels_on_amd() is False
