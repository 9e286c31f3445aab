"""train.bf16_weights on the eager path (mt.precision.WorkingCopy): forward and backward on a bf16 copy of the
model, clipping and Adam on the fp32 weights, the copy refreshed from them after each update."""

import copy

import torch

from mt import fastpath
from mt.data.batching import collate
from mt.model import Transformer
from mt.precision import WorkingCopy
from mt.training.graphed_steps import target_tokens
from mt.training.loss import label_smoothed_loss

from conftest import tiny_trainer

COMMON = ["train.log_every=4", "train.valid_every=1000", "train.save_every=1000", "data.test_split=null"]
BF16_COPY = ["train.precision=bf16", "train.bf16_weights=true"]


def test_the_copy_hands_its_gradients_over_in_fp32_and_takes_the_weights_back_rounded():
    torch.manual_seed(0)
    model = Transformer(50, 50, d_model=32, heads=4, ffn_dim=64, encoder_layers=1, decoder_layers=1, dropout=0.0)
    model.src_embed.weight.requires_grad_(False)  # a frozen weight is neither handed over nor refreshed
    working = WorkingCopy(model)
    assert {p.dtype for p in working.module.parameters()} == {torch.bfloat16}
    assert len(working.params) == len(working.working) == len(list(model.parameters())) - 1
    src, tgt = torch.randint(3, 50, (4, 7)), torch.randint(3, 50, (4, 6))
    loss, _ = label_smoothed_loss(working.module(src, tgt[:, :-1]), tgt[:, 1:], 0.1, pad_id=0)
    loss.backward()
    expected = [None if w.grad is None else w.grad.float() for w in working.working]
    assert sum(g is not None for g in expected) > 10
    working.widen_gradients()
    for param, grad, work in zip(working.params, expected, working.working):
        assert work.grad is None
        if grad is None:
            assert param.grad is None
        else:
            assert param.grad.dtype == torch.float32 and torch.equal(param.grad, grad)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(0.01)
    working.refresh()
    for param, work in zip(working.params, working.working):
        assert torch.equal(work, param.to(torch.bfloat16))
    frozen = working.module.src_embed.weight
    assert not torch.equal(frozen, model.src_embed.weight.to(torch.bfloat16))  # left as it was copied


def test_an_eager_update_on_the_copy_is_the_fp32_master_weights_recipe_written_out(tiny_corpus, tmp_path):
    # two batches an update (gradients accumulate in the copy), clipped
    settings = [*COMMON, *BF16_COPY, "train.update_freq=2", "train.clip_norm=0.5"]
    trainer = tiny_trainer(tiny_corpus, tmp_path / "trainer", *settings)
    by_hand = tiny_trainer(tiny_corpus, tmp_path / "by_hand", *settings)
    assert trainer.graphs_off is not None  # the eager path
    torch.manual_seed(5)  # dropout draws the same masks in both
    stats = trainer.train_step()
    assert stats["finite"] and trainer.progress.step == 1

    update = by_hand.data_order.take(by_hand.progress, 2)
    total = target_tokens(update)
    work = copy.deepcopy(by_hand.model).to(torch.bfloat16).train()
    torch.manual_seed(5)
    for pairs, idx in update:
        loss, _ = by_hand.batch_loss(collate(pairs, idx), work)
        (loss / total).backward()
    for param, w in zip(by_hand.model.parameters(), work.parameters()):
        param.grad = w.grad.float()
    assert torch.nn.utils.clip_grad_norm_(by_hand.model.parameters(), 0.5) > 0.5  # the clipping bites
    for group in by_hand.optimizer.param_groups:
        group["lr"] = stats["lr"]
    by_hand.optimizer.step()
    for mine, written_out in zip(trainer.model.parameters(), by_hand.model.parameters()):
        assert mine.dtype == torch.float32 and torch.equal(mine, written_out)
    for work_param, param in zip(trainer.working.module.parameters(), trainer.model.parameters()):
        assert torch.equal(work_param, param.to(torch.bfloat16))

    seen = []
    for module in (trainer.model, trainer.working.module):
        module.register_forward_hook(lambda module, args, out: seen.append((module, torch.is_autocast_enabled("cpu"))))
    trainer.train_step()
    assert seen == [(trainer.working.module, False)] * 2  # each batch on the copy, without autocast


def test_an_eager_run_on_a_bf16_copy_resumes_exactly(tiny_corpus, tmp_path):
    settings = [*COMMON, *BF16_COPY, "train.update_freq=2"]
    straight = tiny_trainer(tiny_corpus, tmp_path / "straight", "train.max_steps=20", *settings)
    batch = collate(*straight.data_order.take(copy.deepcopy(straight.progress), 1)[0])
    straight.model.eval()
    loss_before = straight.batch_loss(batch)[0].item()
    assert straight.fit().step == 20
    straight.model.eval()
    assert straight.batch_loss(batch)[0].item() < 0.8 * loss_before
    saved = torch.load(tmp_path / "straight" / "checkpoints" / "last.pt", weights_only=True)
    assert {t.dtype for t in saved["model"].values() if t.is_floating_point()} == {torch.float32}
    tiny_trainer(tiny_corpus, tmp_path / "resumed", "train.max_steps=9", *settings).fit()
    resumed = tiny_trainer(tiny_corpus, tmp_path / "resumed", "train.max_steps=20", *settings)
    assert resumed.fit().step == 20
    for a, b in zip(straight.model.parameters(), resumed.model.parameters()):
        assert torch.equal(a, b)


def test_train_compile_compiles_the_copy_that_runs_forward(tiny_corpus, tmp_path, monkeypatch):
    compiled = []

    def as_is(module, dynamic):
        compiled.append((module, dynamic))
        return module

    monkeypatch.setattr(fastpath, "compiled_for_training", as_is)
    trainer = tiny_trainer(tiny_corpus, tmp_path, *COMMON, *BF16_COPY, "train.compile=true")
    trainer.train_step()
    assert [(module, dynamic) for module, dynamic in compiled] == [
        (trainer.model, True),
        (trainer.working.module, True),
    ]
