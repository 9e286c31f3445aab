"""The label-smoothed loss in each of its forms (the CPU's: blocked rows, closed-form gradient; the stock
ops every other device runs; the closed form a GPU may take for large logits) against torch's own
cross_entropy(label_smoothing=...)."""

import os
import shutil

import pytest
import torch
import torch.nn.functional as F

from mt import fastpath
from mt.fastpath import cpu_ops, loss_forms
from mt.training import loss as training_loss
from mt.training.loss import label_smoothed_loss


def uncompiled_closed_form(logits, target, smoothing, ignore_index=None):
    return loss_forms.closed_form(logits, target, smoothing, ignore_index, compiled=False)


@pytest.fixture(params=["cpu", "stock", "closed_form"])
def form(request, monkeypatch):
    """Runs a test with the CPU's form of the loss, with the stock ops, then with the closed form (its
    passes uncompiled: the same maths as the compiled passes a GPU runs)."""
    if request.param == "closed_form":
        monkeypatch.setattr(training_loss.fastpath, "label_smoothed_cross_entropy", uncompiled_closed_form)
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


@pytest.mark.skipif(
    not (os.environ.get("CXX") or shutil.which("g++") or shutil.which("clang++")),
    reason="torch.compile on a CPU needs a C++ compiler",
)
def test_the_closed_form_compiles_whole_and_gives_what_it_gives_uncompiled():
    """What a GPU runs for large logits: each pass compiled (here by the CPU's compiler), none falling back
    to the uncompiled one, with the same loss and gradient as the uncompiled passes, padding left out."""
    torch.manual_seed(0)
    logits = (torch.randn(70, 300) * 3).bfloat16().requires_grad_()
    reference = logits.detach().clone().requires_grad_()
    target = torch.randint(1, 300, (70,))
    target[::9] = 0
    loss, nll = loss_forms.closed_form(logits, target, 0.1, 0)
    expected, expected_nll = uncompiled_closed_form(reference, target, 0.1, 0)
    (loss * 0.5).backward()
    (expected * 0.5).backward()
    compiled = [loss_forms.compiled_row_statistics.compiled, loss_forms.compiled_gradient.compiled]
    assert all(form not in (None, False) for form in compiled)
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(nll, expected_nll)
    # the same fp32 maths compiled or not: within half a bf16 step (2^-8 at |g| < 1) of each other
    torch.testing.assert_close(logits.grad, reference.grad, rtol=0, atol=2**-9)
    assert logits.grad[::9].abs().max() == 0


def test_a_loss_pass_that_fails_to_compile_says_so_once_and_runs_uncompiled(monkeypatch, caplog):
    """Where torch.compile cannot build (no C++ compiler or Triton, say), the pass warns once and gives the
    uncompiled result, then and at every later call, without trying again."""
    tries = []

    def failing_compile(fn, dynamic):
        def compiled(*args):
            tries.append(fn.__name__)
            raise RuntimeError("no compiler here")

        return compiled

    monkeypatch.setattr(torch, "compile", failing_compile)
    forward = loss_forms._Compiled(loss_forms.row_statistics, "the test's pass")
    logits, target = torch.randn(6, 11), torch.randint(0, 11, (6,))
    with caplog.at_level("WARNING", logger=loss_forms.__name__):
        results = [forward(logits, target) for _ in range(2)]
    expected = loss_forms.row_statistics(logits, target)
    for got in results:
        for a, b in zip(got, expected):
            torch.testing.assert_close(a, b)
    assert tries == ["row_statistics"] and forward.compiled is False
    assert caplog.text.count("compiling the test's pass failed (no compiler here); it runs uncompiled") == 1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_on_cuda_the_closed_form_gives_the_compiled_stock_losss_loss_and_gradient():
    """Logits as large as the WMT-like batch's (past FUSED_LOSS_MIN_LOGITS) take a compiled form on CUDA:
    the closed form, where chosen, gives the default's loss and gradient."""
    torch.manual_seed(0)
    rows, vocab = 4096, fastpath.FUSED_LOSS_MIN_LOGITS // 4096
    logits = (torch.randn(rows, vocab, device="cuda") * 3).bfloat16().requires_grad_()
    reference = logits.detach().clone().requires_grad_()
    target = torch.randint(1, vocab, (rows,), device="cuda")
    target[::9] = 0
    loss, nll = label_smoothed_loss(logits, target, 0.1, pad_id=0)
    with fastpath.large_loss_form("closed_form"):
        closed, closed_nll = label_smoothed_loss(reference, target, 0.1, pad_id=0)
    loss.backward()
    closed.backward()
    assert loss_forms.compiled_gradient.compiled not in (None, False)  # the closed form ran, compiled
    torch.testing.assert_close(closed, loss, rtol=1e-4, atol=0)  # fp32 sums of 4,096 rows, in other orders
    torch.testing.assert_close(closed_nll, nll, rtol=1e-4, atol=0)
    # fp32 gradients a hair apart may round to neighbouring bf16 values: one step at |g| < 1 is at most 2^-8
    torch.testing.assert_close(reference.grad, logits.grad, rtol=0, atol=2**-8)
