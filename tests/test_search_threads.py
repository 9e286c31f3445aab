"""A call's batches searched in two threads on a CPU (fastpath.search_threads): the same translations
as one thread, torch's threads shared while they run and restored after, and a stop that waits for the
batches under way alone."""

import threading

import pytest
import torch

import mt
from mt import fastpath
from mt.decoding import translator as translator_module
from mt.decoding.translator import Translator, searched_in_threads


@pytest.fixture
def two_cores(monkeypatch):
    """torch with two threads, in a process that is not a server's."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    monkeypatch.setattr(fastpath, "_served", False)
    yield
    torch.set_num_threads(before)


def test_which_calls_search_in_two_threads(two_cores, monkeypatch):
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert fastpath.search_threads(cpu, batches=4) == 2
    assert fastpath.search_threads(cpu, batches=3) == 1  # the last batches would leave a thread idle
    assert fastpath.search_threads(cuda, batches=10) == 1
    with fastpath.stock_ops():
        assert fastpath.search_threads(cpu, batches=10) == 1
    monkeypatch.setattr(fastpath, "_served", True)  # a server's decoding threads share the cores already
    assert fastpath.search_threads(cpu, batches=10) == 1
    monkeypatch.setattr(fastpath, "_served", False)
    torch.set_num_threads(1)  # one thread asked for (train.threads=1, say): one searching thread
    assert fastpath.search_threads(cpu, batches=10) == 1


def test_a_search_in_two_threads_translates_as_one_thread(two_cores, trained_run, tiny_corpus, monkeypatch):
    lines = (tiny_corpus / "test.de").read_text(encoding="utf-8").splitlines()
    lines[3] = ""  # an empty line keeps its place
    translator = mt.load_translator(trained_run / "checkpoints" / "final.pt", device="cpu", beam=3, batch_tokens=40)
    seen = []  # (thread, torch's threads) of each batch's search
    search = Translator._search

    def recorded(self, *args, **kwargs):
        seen.append((threading.current_thread().name, torch.get_num_threads()))
        return search(self, *args, **kwargs)

    def searched_in(*calls):
        seen.clear()
        found = [call() for call in calls]
        return found, {name for name, _ in seen}

    monkeypatch.setattr(Translator, "_search", recorded)
    torch.set_num_threads(2)  # loading capped torch's threads at this test worker's cores
    beam_in_two = lambda: translator.translate_nbest(lines, nbest=2)  # noqa: E731
    greedy_in_two = lambda: translator.translate(lines, beam=1)  # noqa: E731
    found = {}
    for kind, call in [("beam", beam_in_two), ("greedy", greedy_in_two)]:
        (found[kind],), names = searched_in(call)
        assert len(names) == 2 and all(name.startswith("mt-search") for name in names) and len(seen) >= 4
        assert {threads for _, threads in seen} == {1} and torch.get_num_threads() == 2  # shared, then restored
    (few,), names = searched_in(lambda: translator.translate(lines[:2]))  # one batch: this thread
    assert names == {threading.current_thread().name} and few == translator.translate(lines)[:2]
    _, names = searched_in(lambda: translator.translate(lines, strategy="sample", seed=1))
    assert names == {threading.current_thread().name}  # sampling: one thread (not measured in two)
    monkeypatch.setattr(translator_module.fastpath, "search_threads", lambda device, batches: 1)
    torch.set_num_threads(1)  # as each of the two had: the same sums in the same order, to the last bit
    (beam, greedy), names = searched_in(beam_in_two, greedy_in_two)
    assert names == {threading.current_thread().name}
    assert beam == found["beam"] and greedy == found["greedy"]
    assert beam[3][0].text == "" and len(beam) == len(lines)


def test_a_failed_batch_stops_the_threads_after_the_batches_under_way():
    started, release = [], threading.Event()

    def search(batch):
        started.append(batch)
        if batch == 1:
            release.wait(5)
            raise ValueError("batch 1")
        return batch

    before = torch.get_num_threads()
    results = searched_in_threads(search, list(range(20)), threads=2)
    assert next(results) == 0
    release.set()
    with pytest.raises(ValueError, match="batch 1"):
        list(results)
    assert len(started) <= 5  # one batch more than the threads under way at a time, none started after
    assert not [t for t in threading.enumerate() if t.name.startswith("mt-search")]
    assert torch.get_num_threads() == before
    assert list(searched_in_threads(lambda batch: batch * 2, [1, 2, 3], threads=2)) == [2, 4, 6]  # in order
    assert list(searched_in_threads(lambda batch: batch, [7], threads=2)) == [7]  # one batch: this thread
