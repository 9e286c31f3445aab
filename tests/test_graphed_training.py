"""The CUDA-graph training path (mt.fastpath.cuda_graphs, mt.data.buckets): batches in a few fixed shapes
that change no loss, an update that equals the eager trainer's, skipped on the device when not finite,
and a trainer on this path that resumes exactly. Without a GPU the same calls run eagerly (capture off);
the one test that captures and replays needs CUDA."""

import copy
import importlib.util
import itertools

import numpy as np
import pytest
import torch

import mt.training.trainer as trainer_module
from mt.data.batching import Ragged, collate, filter_pairs
from mt.data.buckets import LengthBuckets, least_padding_lengths
from mt.fastpath import INDUCTOR_DROPOUT_REPEATS, cuda_graphs_off_because, stock_ops
from mt.fastpath.cuda_graphs import CompiledPerShape, GraphedTraining, capturable_adam
from mt.model import Transformer
from mt.training.loss import label_smoothed_loss

from conftest import REPO, tiny_trainer


def padded_cost(cost, lengths):
    return sum(lengths[np.searchsorted(lengths, c)] for c in cost)


def test_bucket_lengths_pad_least_of_all_choices():
    rng = np.random.default_rng(0)
    for _ in range(20):
        cost = rng.integers(2, 30, size=int(rng.integers(5, 60)))
        count = int(rng.integers(1, 5))
        found = least_padding_lengths(cost, count)
        assert len(found) <= count and found[-1] == cost.max()
        values = np.unique(cost)
        brute = min(
            padded_cost(cost, list(tops) + [int(cost.max())])
            for k in range(count)
            for tops in itertools.combinations(values[:-1].tolist(), k)
        )
        assert padded_cost(cost, found) == brute


def toy_corpus(n=300, seed=0):
    rng = np.random.default_rng(seed)
    src = [rng.integers(4, 60, size=int(rng.integers(1, 25))).tolist() for _ in range(n)]
    tgt = [rng.integers(4, 60, size=int(rng.integers(1, 25))).tolist() for _ in range(n)]
    return filter_pairs(Ragged.from_lists(src), Ragged.from_lists(tgt))[0]


def test_bucketed_batches_take_every_pair_once_in_few_shapes():
    corpus = toy_corpus()
    buckets = LengthBuckets.fit(corpus.src_lens, corpus.tgt_lens, max_tokens=400)
    batches = buckets.batches(corpus.src_lens, corpus.tgt_lens, np.random.default_rng(1))
    assert sorted(np.concatenate(batches).tolist()) == list(range(len(corpus)))
    shapes = set()
    for indices in batches:
        batch = buckets.pad(collate(corpus, indices))
        rows, length = batch.src.shape
        assert batch.tgt_in.shape == batch.tgt_out.shape == (rows, length) and rows % 8 == 0
        assert rows * length <= 400 or rows == 8
        shapes.add((rows, length))
    assert shapes <= set(buckets.shapes()) and len(buckets.shapes()) <= 8


def test_padding_to_the_bucket_changes_no_loss_and_no_gradient():
    corpus = toy_corpus()
    buckets = LengthBuckets([10, 30], max_tokens=400)
    batch = collate(corpus, np.arange(5))
    padded = buckets.pad(batch)
    assert padded.src.shape == (8, 30) and (padded.tgt_out[5:] == 0).all()
    torch.manual_seed(0)
    model = Transformer(60, 60, d_model=32, heads=4, ffn_dim=64, encoder_layers=2, decoder_layers=2, dropout=0.0)
    with stock_ops():  # the GPU's path: every position scored, padding left to the loss
        results = []
        for b in (batch, padded):
            model.zero_grad()
            loss, nll = label_smoothed_loss(model(b.src, b.tgt_in), b.tgt_out, 0.1, pad_id=0)
            loss.backward()
            results.append((loss.detach(), nll, [p.grad.clone() for p in model.parameters()]))
    (loss_a, nll_a, grads_a), (loss_b, nll_b, grads_b) = results
    torch.testing.assert_close(loss_a, loss_b)
    torch.testing.assert_close(nll_a, nll_b)
    for a, b in zip(grads_a, grads_b):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def small_model(seed=0):
    torch.manual_seed(seed)
    return Transformer(50, 50, d_model=32, heads=4, ffn_dim=64, encoder_layers=2, decoder_layers=2, dropout=0.0)


def loss_of(model):
    """The loss of `model` itself, or GraphedTraining's loss_fn: that of the module it passes."""

    def loss_fn(*args):
        net, (src, tgt_in, tgt_out) = (args[0], args[1:]) if len(args) == 4 else (model, args)
        return label_smoothed_loss(net(src, tgt_in), tgt_out, 0.1, pad_id=0)

    return loss_fn


def toy_batches(device, count=3):
    g = torch.Generator().manual_seed(3)
    out = []
    for _ in range(count):
        src, tgt = torch.randint(4, 50, (8, 9), generator=g), torch.randint(4, 50, (8, 7), generator=g)
        tgt_out = tgt.clone()
        tgt_out[:, 5:] = 0
        out.append((src.to(device), tgt.to(device), tgt_out.to(device)))
    return out


def test_an_update_equals_the_eager_one_and_a_non_finite_one_is_skipped_on_the_device():
    graphed_model, eager_model = small_model(), small_model()
    optimizer = capturable_adam(graphed_model.parameters(), (0.9, 0.98), 1e-9, 0.0, torch.device("cpu"))
    optimizer.param_groups[0]["lr"] = 0.0  # as a checkpoint of the eager path restores it: a float
    graphed = GraphedTraining(graphed_model, optimizer, loss_of(graphed_model), clip_norm=0.5, capture=False)
    assert optimizer.param_groups[0]["lr"] is graphed.lr  # one tensor, filled before every update
    reference = torch.optim.Adam(eager_model.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9)
    with stock_ops():
        for src, tgt_in, tgt_out in toy_batches("cpu", 2):  # update_freq 2: two batches, then the update
            graphed.accumulate(src, tgt_in, tgt_out, 1 / 80)
            loss, _ = loss_of(eager_model)(src, tgt_in, tgt_out)
            (loss / 80).backward()
        stats = graphed.apply(1e-3).values()
        norm = torch.nn.utils.clip_grad_norm_(eager_model.parameters(), 0.5)
        reference.step()
        assert stats[2] == pytest.approx(float(norm), rel=1e-5) and not stats[3]
        for a, b in zip(graphed_model.parameters(), eager_model.parameters()):
            torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
        assert all((p.grad == 0).all() for p in graphed_model.parameters())  # zeroed for the next update

        before = [p.detach().clone() for p in graphed_model.parameters()]
        src, tgt_in, tgt_out = toy_batches("cpu", 1)[0]
        graphed.accumulate(src, tgt_in, tgt_out, float("nan"))
        loss_sum, _, norm, skipped = graphed.apply(1e-3).values()
    assert skipped and np.isnan(norm)
    assert all(torch.equal(a, b) for a, b in zip(before, graphed_model.parameters()))
    assert int(optimizer.state[graphed.params[0]]["step"]) == 1  # Adam's step count was not advanced


def test_a_bf16_working_copy_steps_the_fp32_weights_with_its_widened_gradients():
    """weights_dtype=bf16: forward and backward run a bf16 copy, Adam steps the fp32 model (master weights),
    whose rounding is the copy after every update; a skipped update changes neither."""
    model, reference = small_model(), small_model()
    optimizer = capturable_adam(model.parameters(), (0.9, 0.98), 1e-9, 0.0, torch.device("cpu"))
    graphed = GraphedTraining(
        model, optimizer, loss_of(model), clip_norm=0.5, capture=False, weights_dtype=torch.bfloat16
    )
    assert {p.dtype for p in graphed.working.parameters()} == {torch.bfloat16}
    working = copy.deepcopy(reference).to(torch.bfloat16)  # the same by hand
    adam = torch.optim.Adam(reference.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9)
    with stock_ops():
        for _ in range(2):
            for src, tgt_in, tgt_out in toy_batches("cpu", 2):
                graphed.accumulate(src, tgt_in, tgt_out, 1 / 80)
                loss, _ = loss_of(working)(src, tgt_in, tgt_out)
                (loss * (1 / 80)).backward()
            stats = graphed.apply(1e-3).values()
            for p, w in zip(reference.parameters(), working.parameters()):
                p.grad, w.grad = w.grad.float(), None
            norm = torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.5)
            adam.step()
            adam.zero_grad(set_to_none=True)
            with torch.no_grad():
                for w, p in zip(working.parameters(), reference.parameters()):
                    w.copy_(p)
            assert stats[2] == pytest.approx(float(norm), rel=1e-4) and not stats[3]
        for a, b in zip(model.parameters(), reference.parameters()):
            assert a.dtype == torch.float32
            torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
        for w, p in zip(graphed.working.parameters(), model.parameters()):
            assert torch.equal(w, p.detach().to(torch.bfloat16))
        assert all((w.grad == 0).all() for w in graphed.working.parameters())

        before = [p.detach().clone() for p in [*model.parameters(), *graphed.working.parameters()]]
        src, tgt_in, tgt_out = toy_batches("cpu", 1)[0]
        graphed.accumulate(src, tgt_in, tgt_out, float("nan"))
        assert graphed.apply(1e-3).values()[3]
    assert all(torch.equal(a, b) for a, b in zip(before, [*model.parameters(), *graphed.working.parameters()]))


def test_the_graph_path_is_chosen_on_cuda_only_and_can_be_turned_off():
    assert cuda_graphs_off_because(torch.device("cuda"), True, "bf16", 1) is None
    assert cuda_graphs_off_because(torch.device("cpu"), True, "bf16", 1) == "not on CUDA"
    assert cuda_graphs_off_because(torch.device("cuda"), False, "bf16", 1) == "train.cuda_graphs=false"
    assert cuda_graphs_off_because(torch.device("cuda"), True, "fp16", 1) == "fp16 (loss scaling)"
    assert cuda_graphs_off_because(torch.device("cuda"), True, "bf16", 2) == "several ranks"


@pytest.fixture
def graph_path_on_this_device(monkeypatch):
    """The trainer takes the graph path here too (its calls run eagerly off CUDA)."""
    monkeypatch.setattr(trainer_module.fastpath, "cuda_graphs_off_because", lambda *args: None)


COMMON = ["train.log_every=4", "train.valid_every=1000", "train.save_every=1000", "data.test_split=null"]


@pytest.mark.parametrize("weights", ["fp32", "bf16 copy"])
def test_a_graph_path_run_resumes_exactly(tiny_corpus, tmp_path, graph_path_on_this_device, weights):
    accumulating = [*COMMON, "train.update_freq=2"]  # two batches an update
    if weights == "bf16 copy":
        accumulating += ["train.precision=bf16", "train.bf16_weights=true"]
    straight = tiny_trainer(tiny_corpus, tmp_path / "straight", "train.max_steps=24", *accumulating)
    order = straight.data_order
    first_batch = order.buckets.pad(collate(*order.take(copy.deepcopy(straight.progress), 1)[0]))
    straight.model.eval()
    loss_before = straight.batch_loss(first_batch)[0].item()
    assert straight.fit().step == 24
    straight.model.eval()
    assert straight.batch_loss(first_batch)[0].item() < 0.8 * loss_before
    assert isinstance(straight.optimizer.param_groups[0]["lr"], torch.Tensor)  # the graph path's Adam
    working_dtype = {p.dtype for p in straight.graphed.working.parameters()}
    assert working_dtype == {torch.bfloat16 if weights == "bf16 copy" else torch.float32}
    saved = torch.load(tmp_path / "straight" / "checkpoints" / "last.pt", weights_only=True)
    assert {t.dtype for t in saved["model"].values() if t.is_floating_point()} == {torch.float32}
    epoch_batches = straight.data_order.epoch_length(0)
    assert straight.progress.epoch * epoch_batches + straight.progress.batch_in_epoch == 48
    first = tiny_trainer(tiny_corpus, tmp_path / "resumed", "train.max_steps=11", *accumulating)
    first.fit()
    second = tiny_trainer(tiny_corpus, tmp_path / "resumed", "train.max_steps=24", *accumulating)
    assert second.fit().step == 24
    for a, b in zip(straight.model.parameters(), second.model.parameters()):
        assert torch.equal(a, b)


@pytest.mark.parametrize("bf16_weights", [False, True])
def test_on_the_graph_path_the_model_runs_under_autocast_and_a_bf16_copy_without(
    tiny_corpus, tmp_path, graph_path_on_this_device, bf16_weights
):
    trainer = tiny_trainer(tiny_corpus, tmp_path, "train.precision=bf16", f"train.bf16_weights={bf16_weights}")
    trainer.train_step()  # builds the graphed training (eagerly here)
    seen = []
    trainer.graphed.working.register_forward_hook(
        lambda module, args, out: seen.append((torch.is_autocast_enabled("cpu"), module.src_embed.weight.dtype))
    )
    trainer.train_step()
    assert seen == [(False, torch.bfloat16)] if bf16_weights else seen == [(True, torch.float32)]


def test_skipped_updates_on_the_graph_path_are_uncounted_then_stop(tiny_corpus, tmp_path, graph_path_on_this_device):
    trainer = tiny_trainer(tiny_corpus, tmp_path, "train.max_bad_steps=3")
    trainer.train_step()
    real_loss = trainer.batch_loss
    trainer.batch_loss = lambda batch, net=None: tuple(x * float("nan") for x in real_loss(batch, net))
    stats = trainer.train_step()
    trainer.settle()  # figures are read back later on this path
    assert not stats["finite"] and trainer.progress.step == 1 and trainer.progress.skipped_steps == 1
    trainer.batch_loss = real_loss
    trainer.train_step()
    trainer.settle()
    assert trainer.progress.step == 2 and trainer.bad_in_a_row == 0
    trainer.batch_loss = lambda batch, net=None: tuple(x * float("inf") for x in real_loss(batch, net))
    with pytest.raises(Exception, match="3 updates in a row had a non-finite loss"):
        for _ in range(3):
            trainer.train_step()
        trainer.settle()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("weights_dtype", [None, torch.bfloat16])
def test_replayed_graphs_equal_the_eager_updates_on_cuda(weights_dtype):
    cuda = torch.device("cuda")
    runs = []
    for capture in (False, True):
        model = small_model().to(cuda)
        optimizer = capturable_adam(model.parameters(), (0.9, 0.98), 1e-9, 0.0, cuda)
        graphed = GraphedTraining(
            model, optimizer, loss_of(model), clip_norm=1.0, capture=capture, weights_dtype=weights_dtype
        )
        stats = []
        for src, tgt_in, tgt_out in toy_batches(cuda, 6):  # warm-up runs, the capture, then replays
            graphed.accumulate(src, tgt_in, tgt_out, 1 / 40)
            stats.append(graphed.apply(1e-3))
        runs.append(([s.values() for s in stats], [p.detach().clone() for p in model.parameters()]))
        if capture:
            assert graphed.graphs and "update" in graphed.graphs
    (stats_a, weights_a), (stats_b, weights_b) = runs
    np.testing.assert_allclose(np.array(stats_a, dtype=float), np.array(stats_b, dtype=float), rtol=1e-4)
    for a, b in zip(weights_a, weights_b):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_graphs_captured_before_the_position_table_grows_replay_the_same():
    """A batch longer than the position table (256) grows it after a shape was captured; that graph reads the
    old table by address, so the old table must stay allocated for its replays to equal the eager updates."""
    cuda = torch.device("cuda")
    short = toy_batches(cuda, 4)
    g = torch.Generator().manual_seed(5)
    long = tuple(torch.randint(4, 50, (8, 300), generator=g).to(cuda) for _ in range(3))
    order = [*short[:3], long, short[3], short[0]]  # the short shape captured at its 3rd run, then replayed
    runs = []
    for capture in (False, True):
        model = small_model().to(cuda)
        optimizer = capturable_adam(model.parameters(), (0.9, 0.98), 1e-9, 0.0, cuda)
        graphed = GraphedTraining(model, optimizer, loss_of(model), clip_norm=1.0, capture=capture)
        stats = []
        for src, tgt_in, tgt_out in order:
            graphed.accumulate(src, tgt_in, tgt_out, 1 / 40)
            stats.append(graphed.apply(1e-3))
            torch.empty(64 << 20, device=cuda).fill_(7.0)  # freed memory, if any, gets overwritten
        runs.append([s.values() for s in stats])
    np.testing.assert_allclose(np.array(runs[0], dtype=float), np.array(runs[1], dtype=float), rtol=1e-4)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_train_compile_replays_compiled_steps_that_update_as_the_eager_ones_on_cuda():
    """train.compile on CUDA: the model compiled for its shape (inductor), captured after the warm-up runs and
    replayed, gives the uncompiled eager updates' losses and moves the weights the same way (Adam's steps,
    of about the learning rate each, turn rounding differences into different weights: on the CPU, 1.6e-3
    apart after 6 steps of 1e-3, the moves' cosine 0.99996). Slow (compiling): gpu_graphs.sh's own part."""
    cuda = torch.device("cuda")
    runs = []
    for compiled in (False, True):
        model = small_model().to(cuda)
        optimizer = capturable_adam(model.parameters(), (0.9, 0.98), 1e-9, 0.0, cuda)
        per_shape = CompiledPerShape() if compiled else None
        plain = loss_of(model)

        def loss_fn(net, src, tgt_in, tgt_out, plain=plain, per_shape=per_shape):
            return plain(per_shape(net) if per_shape else net, src, tgt_in, tgt_out)

        graphed = GraphedTraining(model, optimizer, loss_fn, clip_norm=1.0, capture=compiled)
        stats = []
        for src, tgt_in, tgt_out in toy_batches(cuda, 6):  # warm-up runs (compiling), the capture, then replays
            graphed.accumulate(src, tgt_in, tgt_out, 1 / 40)
            stats.append(graphed.apply(1e-3))
        runs.append(([s.values() for s in stats], [p.detach().clone() for p in model.parameters()]))
        if compiled:
            assert graphed.graphs and len(per_shape.compiled) == 1
    (stats_a, weights_a), (stats_b, weights_b) = runs
    losses_a, losses_b = (np.array(stats, dtype=float)[:, :2] for stats in (stats_a, stats_b))
    np.testing.assert_allclose(losses_a, losses_b, rtol=1e-4)
    start = [p.detach().to(cuda) for p in small_model().parameters()]
    moves = [torch.cat([(w - w0).flatten() for w, w0 in zip(weights, start)]) for weights in (weights_a, weights_b)]
    assert torch.nn.functional.cosine_similarity(*moves, dim=0) > 0.999


def test_a_run_saved_on_one_path_resumes_on_the_other(tiny_corpus, tmp_path, monkeypatch, caplog):
    """A run started with CUDA graphs and resumed without (another machine, or train.cuda_graphs=false):
    the other path's epoch has other batches, so the epoch restarts from its first batch, said in a line."""
    monkeypatch.setattr(trainer_module.fastpath, "cuda_graphs_off_because", lambda *args: None)
    tiny_trainer(tiny_corpus, tmp_path, "train.max_steps=11", *COMMON).fit()
    monkeypatch.undo()
    resumed = tiny_trainer(tiny_corpus, tmp_path, "train.max_steps=30", *COMMON)
    assert resumed.fit().step == 30 and resumed.progress.batching == "tokens"
    assert "saved with buckets batches and resumes with tokens ones" in caplog.text


@pytest.mark.parametrize("weights", ["fp32", "bf16 copy"])
def test_train_compile_on_the_graph_path_compiles_each_batch_shape_once_and_trains_the_same(
    tiny_corpus, tmp_path, graph_path_on_this_device, monkeypatch, weights
):
    """train.compile keeps the graph path (it was eager before) and compiles the model for each fixed batch
    shape (dynamic=False), in training only: validation runs the model as it is. Compiled by a backend that
    runs the traced ops as they are, the run's weights equal the uncompiled run's bit for bit."""
    compiled_shapes = []

    def traced_as_is(graph_module, example_inputs):  # a torch.compile backend
        compiled_shapes.append(tuple(tuple(x.shape) for x in example_inputs if torch.is_tensor(x) and x.dim() == 2))
        return graph_module.forward

    real_compile = torch.compile
    monkeypatch.setattr(torch, "compile", lambda model, **kw: real_compile(model, backend=traced_as_is, **kw))
    steps = ["train.max_steps=10", "train.log_every=5", "train.valid_every=5", "data.test_split=null"]
    steps += ["train.precision=bf16", "train.bf16_weights=true"] if weights == "bf16 copy" else []
    with stock_ops():  # the GPU's forms: the CPU's rows_to_score would index by a boolean mask (a graph break)
        plain = tiny_trainer(tiny_corpus, tmp_path / "plain", *steps)
        plain.fit()
        compiled = tiny_trainer(tiny_corpus, tmp_path / "compiled", *steps, "train.compile=true")
        assert compiled.per_shape is not None and compiled.net is compiled.model  # not compiled for dynamic shapes
        compiled.fit()
    assert compiled.progress.step == 10 and compiled.progress.best_metric is not None  # it validated
    assert (compiled.graphed.working is compiled.model) == (weights == "fp32")
    assert torch._inductor.config.fallback_random or not INDUCTOR_DROPOUT_REPEATS  # torch's own dropout
    trained_shapes = {src_shape for src_shape, _ in compiled.graphed.inputs}  # the batch shapes it trained on
    assert len(trained_shapes) >= 2
    assert sorted(shapes[0] for shapes in compiled_shapes) == sorted(trained_shapes)  # each once; none for validation
    for a, b in zip(plain.model.parameters(), compiled.model.parameters()):
        assert torch.equal(a, b)


def test_the_training_step_profile_sorts_each_forms_time_into_kinds_that_add_up(monkeypatch, capsys):
    """scripts/profile_train_step.py (run on a GPU, where its time is scarce) on the CPU: both forms of the
    step profile, and their kinds take all of the step's time; CUDA kernel names fall into the right kind."""
    spec = importlib.util.spec_from_file_location("profile_train_step", REPO / "scripts" / "profile_train_step.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    monkeypatch.setitem(script.SHAPES, "multi30k", (16, 8, 200))
    for form in script.FORMS:
        by_kind = script.kernel_table(form, "tiny", "multi30k", torch.device("cpu"), rows=5)
        printed = capsys.readouterr().out
        total = float(printed.split("per step")[1].split("ms")[0])
        assert by_kind["matrix products"] > 0 and sum(by_kind.values()) == pytest.approx(total, rel=0.01, abs=0.05)
        shares = [float(line.split("%")[0]) for line in printed.split("-- by kind")[1].strip().splitlines()[1:]]
        assert sum(shares) == pytest.approx(100, abs=0.5)
    names = {
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64": "matrix products",
        "nvjet_tst_128x256_64x4_2x1_v_bz_coopB_TNN": "matrix products",
        "fmha_cutlassB_bf16_aligned_64x64_k64_sm80": "attention",
        "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128>>": "attention",
        "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>": "layer norm",
        "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)>": (
            "casts and copies"
        ),
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>": (
            "elementwise (adds, relu, masks, ...)"
        ),
        "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float>": (
            "softmax, gathers and reductions (the loss, bias gradients)"
        ),
        "void at::native::(anonymous namespace)::fused_dropout_kernel_vec<c10::BFloat16, float>": "dropout",
        "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamMathFunctor>": (
            "optimizer and clipping"
        ),
    }
    assert {name: script.kind_of(name) for name in names} == names


def test_the_training_step_profile_times_every_form_of_the_loss_on_the_same_logits(monkeypatch, capsys):
    """The profile's loss table (on a GPU, where its time is scarce) runs every form here at a small size,
    and the forms agree on the loss of the same logits."""
    spec = importlib.util.spec_from_file_location("profile_train_step", REPO / "scripts" / "profile_train_step.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    script.loss_table(torch.device("cpu"), [(64, 300)])
    lines = capsys.readouterr().out.strip().splitlines()[1:]
    assert [line.split("  ")[0] for line in lines] == [
        "as the trainer calls it", "F.cross_entropy", "stock ops", "stock ops, compiled", "closed form, compiled"
    ]  # fmt: skip
    losses = [float(line.split("loss ")[1]) for line in lines]
    assert max(losses) - min(losses) <= 0.2 and losses[0] > 0


def test_the_model_bench_runs_every_kind_of_step_on_the_cpu(monkeypatch, capsys):
    """scripts/bench_model.py times the GPU's kinds of step (graphs, bf16 weights, cuDNN) where GPU time is
    scarce: each kind, both precisions, runs here at a tiny size (the graphs without capture) and lands in
    the table beside nn.Transformer and the eager step, with the decode-step rows after it."""
    spec = importlib.util.spec_from_file_location("bench_model", REPO / "scripts" / "bench_model.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    kinds = list(script.MODEL_NAMES)
    argv = ["bench_model.py", "--presets", "tiny", "--shapes", "tiny", "--steps", "1", "--threads", "1"]
    monkeypatch.setattr("sys.argv", argv + ["--precisions", "fp32", "bf16", "--kinds", *kinds])
    script.main()
    table = capsys.readouterr().out.split("\ntraining, ")[1]
    rows = [line.split() for line in table.splitlines()[2:] if line.startswith("mt") or line.startswith("torch")]
    expected = [(script.MODEL_NAMES[k], p) for p in ("fp32", "bf16") for k in kinds if p == "bf16" or "bf16w" not in k]
    assert [(row[0], row[2]) for row in rows] == expected
    for row in rows:
        assert int(row[4]) > 0 and row[-2].endswith("x") and row[-1].endswith("x")  # tok/s, vs torch, vs eager
    decode = table.split("decode step latency, tiny preset")[1].splitlines()[2:]
    assert [int(line.split()[0]) for line in decode] == [8, 32, 128]
