"""The label-smoothed loss in both its forms (the CPU's: blocked rows, closed-form gradient; the stock
ops every other device runs) against torch's own cross_entropy(label_smoothing=...)."""

import pytest
import torch
import torch.nn.functional as F

from mt import fastpath
from mt.fastpath import cpu_ops
from mt.training.loss import label_smoothed_loss


@pytest.fixture(params=["cpu", "stock"])
def form(request):
    """Runs a test with the CPU's form of the loss, then with the stock ops."""
    with fastpath.stock_ops(request.param == "stock"):
        yield request.param


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_loss_and_gradient_match_torch_cross_entropy(smoothing, form):
    torch.manual_seed(0)
    rows = 2 * cpu_ops.LOSS_ROWS_PER_BLOCK + 5  # several blocks and a partial one
    logits = (torch.randn(rows, 37, dtype=torch.float64) * 3).float().requires_grad_()
    target = torch.randint(0, 37, (rows,))
    reference = logits.detach().clone().requires_grad_()

    loss, nll = label_smoothed_loss(logits, target, smoothing)
    (loss * 0.5).backward()
    expected = F.cross_entropy(reference, target, label_smoothing=smoothing, reduction="sum")
    (expected * 0.5).backward()

    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(nll, F.cross_entropy(reference.detach(), target, reduction="sum"))
    torch.testing.assert_close(logits.grad, reference.grad)


def test_padding_positions_are_left_out(form):
    torch.manual_seed(0)
    logits = torch.randn(2, 5, 11, requires_grad=True)
    target = torch.randint(1, 11, (2, 5))
    target[0, 3:] = 0
    loss, nll = label_smoothed_loss(logits, target, 0.1, pad_id=0)
    loss.backward()
    real = target != 0
    expected = F.cross_entropy(logits[real], target[real], label_smoothing=0.1, reduction="sum")
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(nll, F.cross_entropy(logits[real], target[real], reduction="sum"))
    assert logits.grad[0, 3:].abs().max() == 0 and logits.grad[real].abs().min() > 0


def test_bf16_logits_give_a_bf16_gradient_close_to_fp32(form):
    torch.manual_seed(0)
    logits16 = (torch.randn(100, 500) * 4).bfloat16().requires_grad_()
    logits32 = logits16.detach().float().requires_grad_()  # the same values
    target = torch.randint(0, 500, (100,))
    loss32, _ = label_smoothed_loss(logits32, target, 0.1)
    loss16, _ = label_smoothed_loss(logits16, target, 0.1)
    loss32.backward()
    loss16.backward()
    assert logits16.grad.dtype == torch.bfloat16
    torch.testing.assert_close(loss16, loss32)  # taken in fp32 either way
    # Two bf16 roundings (softmax, then the gradient) of values within [-1, 1]: at most 2 x 2^-9 apart.
    difference = (logits16.grad.float() - logits32.grad).abs()
    assert difference.max() <= 2**-8
    assert difference.mean() < 1e-5
