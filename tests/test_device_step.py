"""The GPU path of a training step, checked without a GPU: on the `meta` device, tensors have shapes but
no data, so any host sync (`.item()`, `.tolist()`) or data-dependent shape (boolean indexing, `nonzero`)
raises. The step here is the trainer's own `batch_loss` (model, fastpath's non-CPU forms, label-smoothed
loss), backward, gradient clipping and Adam: what a CUDA graph would capture. Its op count must not
depend on the batch's shape, as one captured graph per padded shape requires.

On CUDA the trainer replays this step as CUDA graphs (mt.fastpath.cuda_graphs; tests/test_graphed_training.py),
with the update (clip, finite check, Adam) on the device too; the fused, capturable Adam it uses has no meta
form, so foreach Adam stands in here."""

from types import SimpleNamespace

import pytest
import torch

from mt.fastpath.op_count import OpCounter
from mt.model import Transformer
from mt.training.trainer import Trainer

VOCAB = 8000


@pytest.fixture(scope="module")
def meta_step():
    """A base-sized (6+6, d_model 512) model on `meta` and one training step of it."""
    model = Transformer(VOCAB, VOCAB, d_model=512, heads=8, ffn_dim=2048, encoder_layers=6, decoder_layers=6,
                        dropout=0.1, norm_first=True).to("meta").train()  # fmt: skip
    tc = SimpleNamespace(precision="fp32", label_smoothing=0.1)
    trainer = SimpleNamespace(net=model, device=torch.device("meta"), tc=tc, per_shape=None)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=True)  # the fused kernel has no meta form

    def step(sentences: int, src_len: int, tgt_len: int) -> int:
        """The step's op count at this padded shape."""
        batch = SimpleNamespace(
            src=torch.randint(4, VOCAB, (sentences, src_len), device="meta"),
            tgt_in=torch.randint(4, VOCAB, (sentences, tgt_len), device="meta"),
            tgt_out=torch.randint(4, VOCAB, (sentences, tgt_len), device="meta"),
        )
        with OpCounter() as counter:
            loss, nll = Trainer.batch_loss(trainer, batch)
            (loss / (sentences * tgt_len)).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        assert loss.device.type == "meta" and nll.shape == ()
        return sum(counter.ops.values())

    step(8, 10, 10)  # the first step also creates Adam's state
    return step


def test_the_step_runs_without_a_host_sync_or_a_data_dependent_shape(meta_step):
    assert meta_step(64, 30, 32) > 1000  # every op of the step went through the counter


def test_the_steps_op_count_does_not_grow_with_the_batch(meta_step):
    counts = {shape: meta_step(*shape) for shape in [(64, 30, 32), (780, 30, 32), (96, 100, 90)]}
    assert len(set(counts.values())) == 1, counts


def test_padding_is_left_to_the_loss_off_the_cpu():
    """Off the CPU the output layer scores every position (no boolean indexing of rows): the loss
    ignores the padded ones, so the count of real tokens never decides a shape."""
    from mt import fastpath

    real = torch.ones(4, 5, dtype=torch.bool, device="meta")
    assert fastpath.rows_to_score(real) is None
