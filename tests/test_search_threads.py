"""Beam search of one call's batches in two threads on a CPU (fastpath.search_threads): the same translations
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


def test_which_searches_run_in_two_threads(two_cores, monkeypatch):
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert fastpath.search_threads(cpu, beam_search=True) == 2
    assert fastpath.search_threads(cpu, beam_search=False) == 1  # greedy search measured no faster
    assert fastpath.search_threads(cuda, beam_search=True) == 1
    with fastpath.stock_ops():
        assert fastpath.search_threads(cpu, beam_search=True) == 1
    monkeypatch.setattr(fastpath, "_served", True)  # a server's decoding threads share the cores already
    assert fastpath.search_threads(cpu, beam_search=True) == 1
    monkeypatch.setattr(fastpath, "_served", False)
    torch.set_num_threads(1)  # one thread asked for (train.threads=1, say): one searching thread
    assert fastpath.search_threads(cpu, beam_search=True) == 1


def test_beam_search_in_two_threads_translates_as_one_thread(two_cores, trained_run, tiny_corpus, monkeypatch):
    lines = (tiny_corpus / "test.de").read_text(encoding="utf-8").splitlines()
    lines[3] = ""  # an empty line keeps its place
    translator = mt.load_translator(trained_run / "checkpoints" / "final.pt", device="cpu", beam=3, batch_tokens=40)
    seen = []  # (thread, torch's threads) of each batch's search
    search = Translator._search

    def recorded(self, *args, **kwargs):
        seen.append((threading.current_thread().name, torch.get_num_threads()))
        return search(self, *args, **kwargs)

    monkeypatch.setattr(Translator, "_search", recorded)
    torch.set_num_threads(2)  # loading capped torch's threads at this test worker's cores
    both = translator.translate_nbest(lines, nbest=2)
    assert len({name for name, _ in seen}) == 2 and all(name.startswith("mt-search") for name, _ in seen)
    assert {threads for _, threads in seen} == {1} and torch.get_num_threads() == 2  # shared, then restored
    assert len(seen) > 5  # batches of a line or two
    seen.clear()
    greedy = translator.translate(lines, beam=1)
    assert {name for name, _ in seen} == {threading.current_thread().name}
    monkeypatch.setattr(translator_module.fastpath, "search_threads", lambda device, beam_search: 1)
    seen.clear()
    torch.set_num_threads(1)  # as each of the two had: the same sums in the same order, to the last bit
    assert translator.translate_nbest(lines, nbest=2) == both and translator.translate(lines, beam=1) == greedy
    assert {name for name, _ in seen} == {threading.current_thread().name}
    assert both[3][0].text == "" and len(both) == len(lines)


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
