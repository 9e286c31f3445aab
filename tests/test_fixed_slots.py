"""Search in fixed slots (mt/decoding/fixed_slots.py), the form a CUDA graph replays: a static decoder cache
gives the dynamic cache's logits, and greedy and beam search give search.py's translations, on any device
(here the CPU, eagerly; on CUDA also captured)."""

import copy
import gzip
import importlib.util
import json
import random
import re
import time
from collections import Counter

import pytest
import torch

from mt import fastpath
from mt.data.batching import token_batches
from mt.data.tokenizer import EOS
from mt.decoding.fixed_slots import FixedSlotBeam, FixedSlotGreedy, full_rows, run, slot_batches, slot_shape
from mt.decoding.search import beam_search, greedy_search
from mt.inference import load_translator
from mt.model import Transformer

from conftest import REPO, OpCounter, overfit, pad_ids, reversal_task, run_cli

VOCAB = 20


@pytest.fixture(scope="module")
def reversal_model():
    """A model that has learnt to reverse its input (it ends its outputs), and one that has not (it rarely does)."""
    torch.manual_seed(0)
    data = reversal_task(64, VOCAB, seed=0)
    kwargs = dict(d_model=64, heads=4, ffn_dim=128, encoder_layers=2, decoder_layers=2, dropout=0.0, norm_first=True)
    trained = overfit(Transformer(VOCAB, VOCAB, **kwargs), data, steps=150)
    return trained, Transformer(VOCAB, VOCAB, **kwargs).eval(), data


def sources(data, n=12):
    return pad_ids([s for s, _ in data[:n]], suffix=[EOS])


def same(found, expected):
    """Equal tokens, and scores equal but for float rounding (attention over more, masked, keys)."""
    for got, want in zip(found, expected):
        assert [h.tokens for h in got] == [h.tokens for h in want]
        assert [h.score for h in got] == pytest.approx([h.score for h in want], rel=1e-5, abs=1e-5)
    assert len(found) == len(expected)


def test_a_static_cache_gives_the_dynamic_caches_logits_and_reorders_in_place(reversal_model):
    model, _, data = reversal_model
    src = sources(data, 3)
    tokens = torch.tensor([[1, 5, 9, 4], [1, 7, 7, 3], [1, 12, 6, 8]])
    with torch.no_grad():
        dynamic, static = model.start_state(src), model.start_static_state(src, 1, 6)
        storage = static.caches[0].past["kv"].data_ptr()
        for t in range(tokens.size(1)):
            want, dynamic = model.step(tokens[:, t], dynamic)
            got, static = model.step(tokens[:, t], static)
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
        order = torch.tensor([2, 0, 1])
        dynamic, static = dynamic.reorder_same_source(order), static.reorder_same_source(order)
        want, _ = model.step(torch.tensor([3, 4, 5]), dynamic)
        got, _ = model.step(torch.tensor([3, 4, 5]), static)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert static.caches[0].past["kv"].data_ptr() == storage and int(static.position) == 5
    beams = model.start_static_state(src, 4, 6)  # a sentence's 4 hypotheses share its memory and source keys
    assert beams.memory.size(0) == beams.caches[0].source["k"].size(0) == 3 and beams.caches[0].past["kv"].size(1) == 12


def test_a_static_cache_in_a_window_attends_over_and_reorders_its_first_slots_alone(reversal_model):
    """A step over the first `window` slots gives the logits of one over all of them (the slots past the
    position are not written), and reordering leaves the slots past the window as they were."""
    model, _, data = reversal_model
    src = sources(data, 3)
    tokens = torch.tensor([[1, 5, 9, 4, 6], [1, 7, 7, 3, 5], [1, 12, 6, 8, 4]])
    with torch.no_grad():
        whole, windowed = model.start_static_state(src, 1, 40), model.start_static_state(src, 1, 40)
        seen = []
        for t in range(tokens.size(1)):
            windowed.set_window(t + 2)
            want, whole = model.step(tokens[:, t], whole)
            got, windowed = model.step(tokens[:, t], windowed)
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
            seen.append(windowed.caches[0].extend_past(torch.zeros(2, 3, 4, 1, 16))[0].size(2))
        past = windowed.caches[1].past["kv"][1]  # the values
        past[:, :, 30:] = torch.arange(3.0)[:, None, None, None]  # beyond the window: left where it is
        before = past.clone()
        windowed.reorder_same_source(torch.tensor([2, 0, 1]))
    assert seen == [2, 3, 4, 5, 6]
    torch.testing.assert_close(past[:, :, :6], before[[2, 0, 1], :, :6])
    torch.testing.assert_close(past[:, :, 30:], before[:, :, 30:])
    search = FixedSlotGreedy(reversal_model[1], src, max_len_a=0.0, max_len_b=20)  # untrained: runs on
    windows = []
    run(search, step=lambda form: windows.append(form[0]) or search.step())
    assert windows[:17] == [16] * 16 + [20] and search.state.caches[-1].window == windows[-1] == 20


def test_a_beam_reorder_gathers_into_the_spare_store_and_the_host_swaps_the_two(reversal_model):
    """With a spare store the reorder's kernels write the gathered rows there and leave the past as it was
    (what a captured step records); the swap, host work alone, makes them the past the next step reads: the
    dynamic cache's logits again, and the two stores' storage kept."""
    model, _, data = reversal_model
    src = sources(data, 3)
    tokens = torch.tensor([[1, 5, 9, 4], [1, 7, 7, 3], [1, 12, 6, 8]])
    with torch.no_grad():
        dynamic, static = model.start_state(src), model.start_static_state(src, 1, 6)
        static.keep_spare()
        stores = {static.past.data_ptr(), static.spare.data_ptr()}
        for t in range(tokens.size(1)):
            want, dynamic = model.step(tokens[:, t], dynamic)
            got, static = model.step(tokens[:, t], static)
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
            if t == 1:  # the reorder in two halves, mid-sentence
                order = torch.tensor([2, 0, 1])
                dynamic = dynamic.reorder_same_source(order)
                before = static.past.clone()
                static.reorder_into_spare(order)
                assert torch.equal(static.past, before) and static.parity == 0
                torch.testing.assert_close(static.spare, before[:, order])
                static.swap_stores()
                assert static.parity == 1 and static.caches[1].past["kv"].data_ptr() == static.past[2:].data_ptr()
                tokens = tokens[order]
        order = torch.tensor([1, 2, 0])
        dynamic, static = dynamic.reorder_same_source(order), static.reorder_same_source(order)  # both halves
        want, _ = model.step(torch.tensor([3, 4, 5]), dynamic)
        got, _ = model.step(torch.tensor([3, 4, 5]), static)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert {static.past.data_ptr(), static.spare.data_ptr()} == stores and static.parity == 0


@pytest.mark.parametrize(("beam", "alpha", "nbest"), [(4, 0.6, 1), (5, 1.0, 3), (3, 0.0, 3)])
def test_fixed_slot_beam_search_gives_beam_searchs_hypotheses(reversal_model, beam, alpha, nbest):
    for model in reversal_model[:2]:
        src = sources(reversal_model[2])
        with torch.no_grad():
            expected = beam_search(model, src, beam, alpha, max_len_a=1.0, max_len_b=4, nbest=nbest)
            search = FixedSlotBeam(model, src, beam, alpha, max_len_a=1.0, max_len_b=4, nbest=nbest)
            run(search, check_every=3)
        same(search.results(), expected)
    assert all(len(hyps) == nbest for hyps in expected)


def test_fixed_slot_greedy_search_gives_greedy_searchs_outputs(reversal_model):
    trained, untrained, data = reversal_model
    for model in (trained, untrained):
        with torch.no_grad():
            expected = greedy_search(model, sources(data), max_len_a=1.0, max_len_b=4)
            search = FixedSlotGreedy(model, sources(data), max_len_a=1.0, max_len_b=4)
            run(search)
        same([[h] for h in search.results()], [[h] for h in expected])
    assert sum(h.tokens == t for h, (_, t) in zip(search.results(), data)) < 12  # the untrained one: not the task
    with torch.no_grad():
        trained_found = FixedSlotGreedy(trained, sources(data), max_len_a=1.0, max_len_b=4)
        run(trained_found)
    assert [h.tokens for h in trained_found.results()] == [t for _, t in data[:12]]


def test_a_search_loads_another_batch_into_the_same_storage(reversal_model):
    model, _, data = reversal_model
    first, second = sources(data[:8]), sources(data[20:28])
    width = max(first.size(1), second.size(1))  # one shape: source padded alike
    first, second = (torch.nn.functional.pad(x, (0, width - x.size(1))) for x in (first, second))
    with torch.no_grad():
        search = FixedSlotBeam(model, first, beam=4, max_len_a=1.0, max_len_b=4, nbest=2, length=20)
        state = search.state

        def buffers():  # the caches' two stores swap roles each step: as a pair, the same
            stores = sorted(t.data_ptr() for t in (state.past, state.spare))
            return [t.data_ptr() for t in (search.history, search.kept_tokens, state.memory)] + stores

        before = buffers()
        run(search)
        for store in (state.past, state.spare):
            store.fill_(float("nan"))  # whatever the batch before left there reaches no later batch
        search.load(second, max_len_a=1.0, max_len_b=4)
        run(search)
        expected = beam_search(model, second, beam=4, max_len_a=1.0, max_len_b=4, nbest=2)
        same(search.results(), expected)
        assert buffers() == before
        with pytest.raises(ValueError, match="holds 20"):
            search.load(torch.full_like(second, 5), max_len_a=2.0, max_len_b=4)  # 2 x 9 + 4 positions


def test_translate_with_cuda_graphs_gives_the_same_lines(trained_run):
    """Through the Translator: batches padded to multiples of 8 (filler rows), searches kept by shape, an
    empty line and n-best lists; on a CPU the fixed-slot search runs eagerly."""
    lines = ["ein kleiner hund läuft", "", "zwei männer spielen fußball im park", "eine frau", "a"] * 3
    checkpoint = trained_run / "checkpoints" / "best.pt"
    for beam, nbest in [(1, 1), (4, 2)]:
        loop = load_translator(checkpoint, "cpu", beam=beam, nbest=nbest, batch_tokens=40)
        fixed = load_translator(checkpoint, "cpu", beam=beam, nbest=nbest, batch_tokens=40, cuda_graphs=True)
        want, got = loop.translate_nbest(lines), fixed.translate_nbest(lines)
        assert [[t.text for t in found] for found in got] == [[t.text for t in found] for found in want]
        assert len(fixed._searches) >= 2  # several batch shapes
        assert not loop._searches


def test_a_long_inputs_batches_fall_into_a_few_shapes_most_of_them_full():
    """Each padded length has one full shape (the budget over it, in multiples of 8 sentences), a smaller
    batch the next power of two of sentences below it: shapes repeat from batch to batch and call to call,
    and the batches are hardly more than the token batches of the default search."""
    lengths = [random.Random(n).randint(2, 60) for n in range(3000)]
    budget = 3200
    batches = slot_batches(lengths, budget)
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    shapes = [slot_shape(len(batch), max(lengths[i] for i in batch), budget) for batch in batches]
    for batch, (rows, cols) in zip(batches, shapes):
        assert len(batch) <= rows and max(lengths[i] for i in batch) <= cols and rows * cols <= budget
        assert cols % 8 == 0 and rows % 8 == 0
    full = [len(batch) == rows == full_rows(cols, budget) for batch, (rows, cols) in zip(batches, shapes)]
    padded_lengths = len({cols for _, cols in shapes})  # 8: 8, 16, ..., 64
    assert sum(full) >= len(batches) - padded_lengths  # a smaller batch only where the padded length grows
    assert len(set(shapes)) <= 2 * padded_lengths
    lengths_without_eos = [n - 1 for n in lengths]
    assert len(batches) <= 1.2 * len(token_batches(lengths_without_eos, lengths_without_eos, budget))
    assert slot_shape(1, 5, budget) == (8, 8) and slot_shape(20, 30, budget) == (32, 32)
    assert slot_shape(90, 30, budget) == (96, 32)  # the full shape, not 128 rows
    assert slot_shape(300, 9, 1000) == (304, 16)  # a batch formed elsewhere, larger than the full shape


def varied_lines(n: int) -> list[str]:
    words = "ein mann eine frau ein hund eine katze zwei männer spielen im park und laufen".split()
    return [" ".join(words[: 1 + i % len(words)] * (1 + i % 3)) for i in range(n)]


def test_a_translator_keeps_the_searches_of_its_shapes_from_one_call_to_the_next(trained_run, monkeypatch):
    """On CUDA each new search captures its step again: a second call on lines of the same lengths
    allocates none, where it had thrashed through more shapes than it kept."""
    lines = varied_lines(90)
    checkpoint = trained_run / "checkpoints" / "best.pt"
    fixed = load_translator(checkpoint, "cpu", beam=2, batch_tokens=600, cuda_graphs=True)
    first = fixed.translate(lines)
    assert len(fixed._searches) >= 5  # more shapes than the 4 it once kept
    assert all(rows in (full_rows(cols, 300), 8, 16, 32, 64) for rows, cols, *_ in fixed._searches)  # 600 / beam 2
    kept = dict(fixed._searches)
    made = []
    real_init = FixedSlotBeam.__init__
    monkeypatch.setattr(FixedSlotBeam, "__init__", lambda self, *a, **k: made.append(1) or real_init(self, *a, **k))
    assert fixed.translate(lines) == first and not made
    assert all(fixed._searches[key] is search for key, search in kept.items())
    loop = load_translator(checkpoint, "cpu", beam=2, batch_tokens=600)
    assert loop.translate(lines) == first


def test_the_searches_kept_hold_no_more_memory_than_allowed(trained_run, monkeypatch):
    """Past the memory allowed (a quarter of a GPU's), the least recently used searches go, the one running stays."""
    lines = varied_lines(60)
    checkpoint = trained_run / "checkpoints" / "best.pt"
    roomy = load_translator(checkpoint, "cpu", beam=2, batch_tokens=600, cuda_graphs=True)
    want = roomy.translate(lines)
    sizes = sorted(search.nbytes() for search in roomy._searches.values())
    assert len(sizes) >= 3 and sizes[0] > 0
    monkeypatch.setattr(fastpath, "fixed_slot_memory", lambda device: sizes[-1] + sizes[0])
    tight = load_translator(checkpoint, "cpu", beam=2, batch_tokens=600, cuda_graphs=True)
    assert tight.translate(lines) == want
    held = [search.nbytes() for search in tight._searches.values()]
    assert 1 <= len(held) < len(sizes) and (len(held) == 1 or sum(held) <= sizes[-1] + sizes[0])
    monkeypatch.setattr(fastpath, "fixed_slot_memory", lambda device: 1)
    assert tight.translate(lines) == want and len(tight._searches) == 1


def test_a_servers_decoding_threads_take_turns_at_the_fixed_slot_searches(trained_run, monkeypatch):
    """A server's decoding threads share one translator's fixed-slot searches (and on CUDA the steps
    captured on their buffers) through with_settings copies: one search runs at a time, and each thread
    gets the lines a lone translator gives."""
    import threading
    import time

    from mt.decoding import translator as translator_module

    lines = ["ein kleiner hund läuft", "zwei männer spielen fußball im park", "eine frau"]
    shared = load_translator(trained_run / "checkpoints" / "best.pt", "cpu", beam=2, cuda_graphs=True)
    want = shared.translate(lines)
    inside, most, count = [0], [0], threading.Lock()
    real_run = translator_module.run_search

    def slow_run(search, step):
        with count:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.05)  # long enough for the other thread to arrive
        try:
            real_run(search, step)
        finally:
            with count:
                inside[0] -= 1

    monkeypatch.setattr(translator_module, "run_search", slow_run)
    got = [None, None]

    def serve(i):
        got[i] = shared.with_settings(shared.settings).translate(lines)

    threads = [threading.Thread(target=serve, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert got == [want, want] and most[0] == 1


def test_fixed_slots_are_for_a_static_state_and_no_prefix(reversal_model, rnn_model):
    model = reversal_model[0]
    assert fastpath.fixed_slot_search(model, True, search_py_only=False)
    assert not fastpath.fixed_slot_search(model, False, search_py_only=False)  # off unless asked for
    assert not fastpath.fixed_slot_search(model, True, search_py_only=True)
    assert not fastpath.fixed_slot_search(rnn_model, True, search_py_only=False)


@pytest.fixture
def rnn_model():
    from mt.model.rnn import RNNAttention

    return RNNAttention(VOCAB, VOCAB, d_model=16)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_replayed_cuda_graphs_give_the_eager_searchs_translations(trained_run):
    lines = [f"ein hund und {n} katzen laufen über die straße" for n in range(40)] + ["", "eine frau"]
    checkpoint = trained_run / "checkpoints" / "best.pt"
    for beam in (1, 4):
        loop = load_translator(checkpoint, "cuda", beam=beam)
        graphed = load_translator(checkpoint, "cuda", beam=beam, cuda_graphs=True)
        want = loop.translate(lines)
        assert graphed.translate(lines) == want  # each window's step run eagerly, then captured
        before = Counter(graphed.replays.counts)
        assert graphed.translate(lines) == want  # the same batches: their captured steps replayed
        steps = Counter(graphed.replays.counts) - before
        assert graphed.replays.graphs and steps["replayed"] > steps["eager"]  # a failed capture never replays


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("kind", ["beam", "greedy"])
def test_a_fixed_slot_step_captured_by_hand_replays_as_the_eager_steps_run(reversal_model, kind):
    """One search steps eagerly; its twin runs the same first steps, then each window's step captured with
    torch.cuda.graph directly (no fallback, so a capture that fails shows its whole traceback here) and
    replayed: the twins find the same hypotheses. Where this fails and the translator's replay test does too,
    the traceback names the op that capture refuses."""
    model = copy.deepcopy(reversal_model[0]).cuda()
    src = sources(reversal_model[2]).cuda()
    make = (lambda: FixedSlotBeam(model, src, 4, 0.6, 1.0, 4, 2)) if kind == "beam" else (
        lambda: FixedSlotGreedy(model, src, 1.0, 4)
    )  # fmt: skip
    with torch.inference_mode():
        eager, graphed = make(), make()
        run(eager, check_every=1000)
        graphs, warmed, side, replays = {}, set(), torch.cuda.Stream(), 0
        for t in range(graphed.length):  # step by step: replayed, a warm-up run, captured, or eagerly
            window = graphed.window(t)
            graphed.state.set_window(window)
            form = (window, graphed.state.parity)  # a beam's steps alternate between its caches' two stores
            if form in graphs:
                graphs[form].replay()
                replays += 1
            elif graphed.window(t + 1) != window or t + 1 == graphed.length:  # the window's last step: eagerly
                graphed.step()
            elif window not in warmed:  # a warm-up run on a side stream, as torch's guidance asks
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    graphed.step()
                torch.cuda.current_stream().wait_stream(side)
                warmed.add(window)
            else:  # this form's step captured (its shapes warmed up), then run
                graphs[form] = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graphs[form]):
                    graphed.step()
                graphs[form].replay()
            graphed.end_step()
        torch.cuda.synchronize()
    assert replays > 0 and {parity for _, parity in graphs} == ({0, 1} if kind == "beam" else {0})
    found, expected = graphed.results(), eager.results()
    same(found, expected) if kind == "beam" else same([[h] for h in found], [[h] for h in expected])


def test_forgetting_a_search_drops_the_steps_captured_for_each_of_its_windows():
    from mt.fastpath.cuda_graphs import Replays

    replays = Replays(torch.device("cpu"), capture=False)
    replays.graphs = {("gone", 16): "graph", ("gone", 32): "graph", ("kept", 16): "graph"}
    replays.runs = {("gone", 48): 1, ("kept", 32): 2}
    replays.forget(lambda key: key[0] == "gone")
    assert list(replays.graphs) == [("kept", 16)] and list(replays.runs) == [("kept", 32)]


def test_a_failed_capture_says_which_line_called_the_op_and_goes_on_eagerly(monkeypatch, caplog):
    """A capture that meets an op it cannot record (here: a shape error raised inside torch's own Python, as
    a host sync raises inside an op) warns naming the caller's line, not a frame of torch, then runs the
    body eagerly, now and at every later call. torch.cuda's capture is stood in for: this is about the
    fallback, which a CPU can check."""
    import contextlib

    from mt.fastpath import cuda_graphs

    capturing = []

    @contextlib.contextmanager
    def graph(_graph, pool=None):
        capturing.append(True)
        try:
            yield
        finally:
            capturing.pop()

    monkeypatch.setattr(torch.cuda, "CUDAGraph", lambda: "graph")
    monkeypatch.setattr(torch.cuda, "graph", graph)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    layer, runs = torch.nn.Linear(2, 3), []

    def body():
        runs.append(bool(capturing))
        layer(torch.zeros(1, 4 if capturing else 2))  # the line the warning must name

    replays = cuda_graphs.Replays(torch.device("cpu"), capture=False, warmup=0, what="the test")
    replays.capture = True
    with caplog.at_level("WARNING", logger=cuda_graphs.__name__):
        replays.run("key", body)
        replays.run("key", body)
    line = body.__code__.co_firstlineno + 2
    assert f"test_fixed_slots.py:{line} in body" in caplog.text and "the test goes on without graphs" in caplog.text
    assert runs == [True, False, False] and replays.counts == Counter(eager=2) and not replays.graphs


class CaptureOnTheHost:
    """torch.cuda's capture stood in for on a CPU, for Replays: capturing a fixed-slot step notes the search and
    the caches' stores it reads, without running it; replay() checks the search reads those stores still (a
    real graph replays on the buffers it was captured on, whatever the search's attributes say), then steps."""

    real_steps = {FixedSlotBeam: FixedSlotBeam.step, FixedSlotGreedy: FixedSlotGreedy.step}
    capturing = None
    eager = Counter()  # steps run eagerly, by (search, window)

    def __init__(self):
        self.search = self.stores = None

    def replay(self):
        state = self.search.state
        assert (state.past, state.spare) == self.stores, "a replay on the other store"
        self.real_steps[type(self.search)](self.search)

    @classmethod
    def install(cls, monkeypatch):
        import contextlib

        @contextlib.contextmanager
        def graph(captured, pool=None):
            cls.capturing = captured
            try:
                yield
            finally:
                cls.capturing = None

        def step(search):
            if cls.capturing is None:
                cls.eager[id(search), search.state.window] += 1
                return cls.real_steps[type(search)](search)
            cls.capturing.search, cls.capturing.stores = search, (search.state.past, search.state.spare)

        class Stream:
            def wait_stream(self, other):
                pass

        cls.eager = Counter()
        for kind in cls.real_steps:
            monkeypatch.setattr(kind, "step", step)
        monkeypatch.setattr(torch.cuda, "CUDAGraph", cls)
        monkeypatch.setattr(torch.cuda, "graph", graph)
        monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: Stream())
        monkeypatch.setattr(torch.cuda, "stream", lambda stream: contextlib.nullcontext())
        return Stream()


@pytest.mark.parametrize("beam", [1, 3])
def test_a_translators_replayed_steps_read_the_store_each_was_captured_on(trained_run, monkeypatch, beam):
    """decode.cuda_graphs with capture stood in for on a CPU (CaptureOnTheHost): the first call warms each
    window's step up (2 eager runs, for both stores: the same shapes), captures it once for each of the
    caches' stores a step may read (both for beam search, one for greedy), and replays it on that store; a
    second call on the same lines replays every step. The lines are search.py's."""
    lines = varied_lines(40)
    checkpoint = trained_run / "checkpoints" / "best.pt"
    want = load_translator(checkpoint, "cpu", beam=beam).translate(lines)
    graphed = load_translator(checkpoint, "cpu", beam=beam, cuda_graphs=True)
    replays = graphed.replays
    replays.capture, replays.side = True, CaptureOnTheHost.install(monkeypatch)
    assert graphed.translate(lines) == want
    first = Counter(replays.counts)
    assert graphed.translate(lines) == want
    later = Counter(replays.counts) - first
    forms = {key[1:] for key in replays.graphs}  # (window, parity)
    assert {parity for _, parity in forms} == ({0, 1} if beam > 1 else {0})
    assert first["captured"] == len(replays.graphs) and first["replayed"] > 0
    warm_ups = CaptureOnTheHost.eager
    assert max(warm_ups.values()) == 2 and sum(warm_ups.values()) == first["eager"]
    assert set(later) == {"replayed"}


def test_a_translator_counts_its_fixed_slot_steps_by_how_they_ran(trained_run, monkeypatch):
    """What profiles read: on a CPU every step runs eagerly (nothing to capture), one count per step."""
    checkpoint = trained_run / "checkpoints" / "best.pt"
    fixed = load_translator(checkpoint, "cpu", beam=2, cuda_graphs=True)
    steps = []
    real_step = FixedSlotBeam.step
    monkeypatch.setattr(FixedSlotBeam, "step", lambda self: steps.append(1) or real_step(self))
    fixed.translate(varied_lines(20))
    assert steps and dict(fixed.replays.counts) == {"eager": len(steps)}
    loop = load_translator(checkpoint, "cpu", beam=2)
    loop.translate(varied_lines(20))
    assert not loop.replays.counts  # search.py's loop runs no fixed-slot step


def test_the_decoding_profile_reports_each_form_with_its_steps_and_traces(trained_run, tmp_path):
    """scripts/profile_decode.py (run where GPU time is short: it must not fail there on a usage slip). Its
    batches (five here) are searched in the thread it profiles, not in translate's worker threads."""
    src = tmp_path / "src.de"
    src.write_text("".join(line + "\n" for line in varied_lines(40)))
    out = run_cli(
        "python", "scripts/profile_decode.py", "--checkpoint", str(trained_run / "checkpoints" / "best.pt"),
        "--src", str(src), "--device", "cpu", "--beams", "2", "--precisions", "fp32", "--cuda-graphs", "both",
        "--attention", "both", "--rows", "40", "--python-rows", "3", "--trace", str(tmp_path / "traces"),
        "--batch-tokens", "24",
    ).stdout  # fmt: skip
    assert out.startswith("sentencepiece decoding, microseconds a line: a list of one each ")
    forms = [line for line in out.splitlines() if line.startswith("==== ")]
    assert [form.split(", ")[2:4] for form in forms] == [
        ["fixed slots off", "attention sdpa"],
        ["fixed slots off", "attention written"],
        ["fixed slots on", "attention sdpa"],
        ["fixed slots on", "attention written"],
    ]
    steady = [line for line in out.splitlines() if line.startswith("steady call")]
    assert len(steady) == 4 and "steps" not in steady[0] and " eager, 0 captured, 0 replayed)" in steady[2]
    assert out.count("by own time") == 4 and out.count("ops by host time") == 4
    profiled = re.findall(r"^profiled call \d+ ms: ops \d+ ms on the host \(waits included\)$", out, re.MULTILINE)
    tables = out.split("ops by host time")[1:]
    assert len(profiled) == 4 and all("aten::addmm" in table for table in tables)  # the search's ops, seen
    traces = sorted((tmp_path / "traces").glob("*.json.gz"))
    assert len(traces) == 4 and all("traceEvents" in json.loads(gzip.open(t).read()) for t in traces)


class EventOnTheHost:
    """torch.cuda.Event's stand-in on a CPU: the time it was recorded."""

    def __init__(self, enable_timing: bool = False):
        self.at = None

    def record(self):
        self.at = time.perf_counter()

    def elapsed_time(self, end) -> float:
        return (end.at - self.at) * 1e3


class StepAsGraph:
    """A captured step's stand-in on a CPU: replay() runs the search's step eagerly, noting where it wrote."""

    def __init__(self, search):
        self.search, self.positions = search, []

    def replay(self):
        self.positions.append(int(self.search.state.position))
        self.search.step()


def test_the_decoding_profile_replays_each_captured_step_alone_within_its_window(trained_run, monkeypatch):
    """profile_decode.replays_alone (CUDA only, so run here with stand-ins): every replay writes inside its
    window's slots (a position past the cache would fail on the device), and the search's position is
    put back, so the profile's next calls search as before."""
    spec = importlib.util.spec_from_file_location("profile_decode", REPO / "scripts" / "profile_decode.py")
    profile_decode = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(profile_decode)
    monkeypatch.setattr(torch.cuda, "Event", EventOnTheHost)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    translator = load_translator(trained_run / "checkpoints" / "best.pt", "cpu", beam=2, cuda_graphs=True)
    lines = varied_lines(12)
    expected = translator.translate(lines)
    assert profile_decode.replays_alone(translator, 3) == "no captured steps"  # nothing is captured on a CPU
    graphs = {}
    for key, search in translator._searches.items():
        for window in (16, search.length):
            graphs[(key, window, search.state.parity)] = StepAsGraph(search)
    translator.replays.graphs.update(graphs)
    before = {key: int(search.state.position) for key, search in translator._searches.items()}
    text = profile_decode.replays_alone(translator, 3)
    assert text.count(" us a replay") == len(graphs) > 0
    for (_, window, _), graph in graphs.items():
        assert graph.positions == [window - 1] * 6  # 3 alone, 3 back to back
    assert {key: int(search.state.position) for key, search in translator._searches.items()} == before
    translator.replays.graphs.clear()
    assert translator.translate(lines) == expected


def on_meta(search):
    """The search with its model and every tensor it steps on moved to the `meta` device (shapes without
    data: a read back to the host or a shape that depends on values fails there), aliases kept."""
    moved = {}

    def meta(value):
        if not torch.is_tensor(value):
            return value
        return moved.setdefault(id(value), value.to("meta"))

    for holder in [search, search.state, *search.state.caches]:
        for name, value in list(vars(holder).items()):
            setattr(holder, name, {k: meta(v) for k, v in value.items()} if isinstance(value, dict) else meta(value))
    search.model.to("meta")
    return search


def test_a_beam_step_reorders_every_layers_cache_in_one_gather_and_masks_once():
    """More decoder layers add their own ops (projections, attention, the cache writes), but no gather or
    copy for the reorder and no mask: a step's kernels that do not grow with the depth."""
    counts = []
    for layers in (2, 4):
        model = Transformer(40, 40, d_model=32, heads=4, ffn_dim=64, encoder_layers=1, decoder_layers=layers).eval()
        src = torch.randint(4, 40, (8, 9))
        src[:, -1] = EOS
        with fastpath.stock_ops(), torch.inference_mode():
            search = on_meta(FixedSlotBeam(model, src, beam=3, length=40))
            counter = OpCounter()
            with counter:
                search.step()
        counts.append({op: counter.ops[op] for op in ("aten.index_select", "aten.copy_", "aten.le")})
    assert counts[0] == counts[1] and counts[0]["aten.le"] == 2  # the visible slots; the best live one beaten


@pytest.mark.parametrize("kind", [FixedSlotBeam, FixedSlotGreedy])
def test_a_fixed_slot_step_reads_nothing_back_and_launches_the_same_ops_at_any_batch(kind):
    """What lets a CUDA graph capture the step (checked without a GPU, as the GPU's stock ops run): on
    `meta` the step runs through, and its op count depends on neither the batch nor the window."""
    counts = set()
    for sentences in (8, 64):
        torch.manual_seed(0)
        model = Transformer(40, 40, d_model=32, heads=4, ffn_dim=64, encoder_layers=2, decoder_layers=2).eval()
        src = torch.randint(4, 40, (sentences, 9))
        src[:, -1] = EOS
        with fastpath.stock_ops(), torch.inference_mode():
            search = on_meta(kind(model, src, length=40))
            for window in (16, 40):
                search.state.set_window(window)
                counter = OpCounter()
                with counter:
                    search.step()
                    search.finished()
                counts.add(sum(counter.ops.values()))
        assert search.t.device.type == "meta" and search.t is search.state.position
    assert len(counts) == 1


def bench_decode_module():
    """scripts/bench_decode.py as a module."""
    spec = importlib.util.spec_from_file_location("bench_decode", REPO / "scripts" / "bench_decode.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_the_decoding_bench_compares_fixed_slots_with_search_py_on_the_cpu(
    trained_run, tiny_corpus, monkeypatch, capsys
):
    """scripts/bench_decode.py, the GPU decoding run's measure, on the CPU (where fixed slots run eagerly):
    every form it times (search.py's loop in one thread and in two, fixed slots reading whether they are done
    every 8 or every step) writes the same lines, each fixed-slot call's steps are counted, and the
    references are scored."""
    bench = bench_decode_module()
    monkeypatch.setattr(bench, "startup_seconds", lambda *args: 1.0)  # a translate process: tested elsewhere
    monkeypatch.setattr(bench.translator_module, "run_search", bench.translator_module.run_search)  # put back after
    monkeypatch.setattr(bench.translator_module.fastpath, "search_threads", bench.TRANSLATORS_CHOICE)  # the same
    monkeypatch.setattr("sys.argv", [
        "bench_decode.py", "--checkpoint", str(trained_run / "checkpoints" / "final.pt"),
        "--src", str(tiny_corpus / "test.de"), "--ref", str(tiny_corpus / "test.en"), "--precisions", "fp32",
        "--beams", "1", "3", "--cuda-graphs", "both", "--check-every", "8", "1", "--search-threads", "1", "2",
        "--repeats", "1", "--json",
    ])  # fmt: skip
    bench.main()
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    decoded = [row for row in rows if row["bench"] == "decode"]
    forms = [(row["beam"], row["cuda_graphs"], row.get("check_every"), row.get("search_threads")) for row in decoded]
    each = [(False, None, 1), (False, None, 2), (True, 8, None), (True, 1, None)]  # search.py in 1 and 2 threads,
    assert forms == [(beam, *form) for beam in (1, 3) for form in each]  # fixed slots reading every 8 steps, every 1
    for row in decoded:
        assert row["sentences_per_s"] > 0 and row["bleu"] > 10
        assert row.get("same_lines", 1.0) == 1.0 and ("same_lines" in row) == (row.get("search_threads") != 1)
        if row["cuda_graphs"]:
            assert set(row["steps_a_call"]) == {"eager"}  # nothing captured here
    beam_slots = [row for row in decoded if row["beam"] == 3 and row["cuda_graphs"]]
    slots = {row["check_every"]: row["steps_a_call"]["eager"] for row in beam_slots}
    assert slots[1] <= slots[8]  # reading every step stops no later
    (scored,) = [row for row in rows if row["bench"] == "score"]
    assert scored["perplexity"] > 1 and 0 <= scored["misaligned_auc"] <= 1


def test_the_decoding_bench_times_tf32_as_fp32_weights_and_compares_its_lines(
    trained_run, tiny_corpus, monkeypatch, capsys
):
    """bench_decode's tf32 rows (a what-if for a GPU) decode the fp32 model with CUDA's matmuls switched to TF32,
    and say how many lines equal fp32's: on a CPU, whose matmuls the switch leaves alone, all of them. The
    switch is put back after."""
    bench = bench_decode_module()
    monkeypatch.setattr(bench, "startup_seconds", lambda *args: 1.0)
    switch = torch.backends.cuda.matmul
    name = "fp32_precision" if hasattr(switch, "fp32_precision") else "allow_tf32"
    before = getattr(switch, name)
    seen = []
    translate = bench.Translator.translate_nbest
    monkeypatch.setattr(
        bench.Translator,
        "translate_nbest",
        lambda self, *a, **k: seen.append((self.settings.precision, getattr(switch, name))) or translate(self, *a, **k),
    )
    monkeypatch.setattr("sys.argv", [
        "bench_decode.py", "--checkpoint", str(trained_run / "checkpoints" / "final.pt"),
        "--src", str(tiny_corpus / "test.de"), "--ref", str(tiny_corpus / "test.en"), "--precisions", "fp32", "tf32",
        "--beams", "1", "3", "--cuda-graphs", "off", "--repeats", "1", "--json",
    ])  # fmt: skip
    bench.main()
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    decoded = [row for row in rows if row["bench"] == "decode"]
    assert [(row["precision"], row["beam"]) for row in decoded] == [("fp32", 1), ("fp32", 3), ("tf32", 1), ("tf32", 3)]
    for row in decoded:
        assert ("same_as_fp32" in row) == (row["precision"] == "tf32")
        assert row.get("same_as_fp32", 1.0) == 1.0
    fp32, tf32 = (next(r["bleu"] for r in decoded if r["precision"] == p and r["beam"] == 3) for p in ("fp32", "tf32"))
    assert tf32 == fp32
    assert [row["precision"] for row in rows if row["bench"] == "score"] == ["fp32", "tf32"]
    on = "tf32" if name == "fp32_precision" else True
    assert {switch_was == on for precision, switch_was in seen} == {False, True}  # the tf32 calls alone switched
    assert all(precision == "fp32" for precision, _ in seen)  # the weights stay fp32
    assert getattr(switch, name) == before


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_the_tf32_switch_reaches_cuda_fp32_matmuls_and_is_put_back():
    """On a GPU with TF32 tensor cores bench_decode's switch reaches the matmuls: their results move off full
    fp32's (by about TF32's rounding of the inputs, not more) and come back once it is put back."""
    if torch.cuda.get_device_capability()[0] < 8:
        pytest.skip("TF32 needs an Ampere or newer GPU")
    bench = bench_decode_module()
    a, b = (torch.randn(512, 512, device="cuda", generator=torch.Generator("cuda").manual_seed(i)) for i in (1, 2))
    exact = (a.double() @ b.double()).float()
    full = a @ b
    with bench.matmuls_in_tf32(True):
        rounded = a @ b
    assert torch.equal(a @ b, full)
    scale = exact.abs().max()
    assert (full - exact).abs().max() < 1e-5 * scale
    assert 1e-5 * scale < (rounded - exact).abs().max() < 1e-2 * scale
