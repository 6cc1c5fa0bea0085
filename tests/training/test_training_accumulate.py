"""The LoRA recipe's memory savers on a tiny random LLaMA: logits of the last position only, and
gradient accumulation that adds up to the whole batch's gradient."""
from __future__ import annotations

import pytest
import torch

from builders import make_tiny_llama


def _batch():
    model, _ = make_tiny_llama()
    model.eval()  # no dropout: the pieces must give the same numbers as the whole batch
    g = torch.Generator().manual_seed(0)
    seqs = [torch.randint(3, model.config.vocab_size, (n,), generator=g).tolist() for n in (5, 9, 3, 7, 6)]
    targets = torch.tensor([4, 7, 4, 7, 4])
    return model, seqs, targets


def test_last_logits_match_the_full_logits_at_each_rows_end():
    from aieg_fast.core.batch import right_pad
    from aieg_fast.training.sentiment import last_logits

    model, seqs, _ = _batch()
    ids, mask = right_pad(seqs, 0)
    with torch.no_grad():
        full = model(input_ids=ids, attention_mask=mask).logits
        last = last_logits(model, seqs, 0)
    assert last.shape == (len(seqs), model.config.vocab_size)
    torch.testing.assert_close(last, full[torch.arange(len(seqs)), mask.sum(1) - 1], rtol=1e-5, atol=1e-5)


def test_last_logits_are_right_where_logits_to_keep_is_sliced_as_transformers_5_15_does(monkeypatch):
    """transformers 5.15 (the declared minimum) slices ``hidden[:, logits_to_keep, :]`` whatever
    the tensor's shape (5.25 takes a [B, 1] tensor along dim 1); a [B, 1] tensor then gave
    [B, 1, V] logits, every row at row 0's last position, and training failed on the targets."""
    import transformers.models.llama.modeling_llama as modeling_llama

    from aieg_fast.core.batch import right_pad
    from aieg_fast.training.sentiment import accumulate_grads, last_logits

    model, seqs, targets = _batch()
    ids, mask = right_pad(seqs, 0)
    with torch.no_grad():
        full = model(input_ids=ids, attention_mask=mask).logits[torch.arange(len(seqs)), mask.sum(1) - 1]
    monkeypatch.setattr(modeling_llama, "slice_logits_to_keep",  # absent under 5.15 itself, which slices so inline
                        lambda h, keep: h[:, slice(-keep, None) if isinstance(keep, int) else keep, :], raising=False)
    with torch.no_grad():
        last = last_logits(model, seqs, 0)
    assert last.shape == (len(seqs), model.config.vocab_size)
    torch.testing.assert_close(last, full, rtol=1e-5, atol=1e-5)
    assert accumulate_grads(model, seqs, targets, [0, 1, 2, 3, 4], 2, 0) > 0


def test_last_logits_refuse_logits_of_another_shape():
    from aieg_fast.training.sentiment import last_logits

    class AllPositions(torch.nn.Module):  # a model that ignores logits_to_keep
        def forward(self, input_ids, logits_to_keep):
            return type("Out", (), {"logits": torch.zeros(*input_ids.shape, 7)})()

    with pytest.raises(RuntimeError, match=r"logits of shape \(2, 4, 7\) for logits_to_keep of 2 positions"):
        last_logits(AllPositions(), [[1, 2, 3], [1, 2, 3, 4]], 0)


@pytest.mark.parametrize("micro", [1, 2, 3])
def test_accumulated_gradients_equal_the_whole_batch(micro):
    from aieg_fast.training.sentiment import accumulate_grads

    model, seqs, targets = _batch()
    idx = [0, 1, 2, 3, 4]
    params = [p for p in model.parameters() if p.requires_grad]
    whole = accumulate_grads(model, seqs, targets, idx, len(idx), 0)
    g_whole = [p.grad.clone() for p in params]
    model.zero_grad(set_to_none=True)
    pieces = accumulate_grads(model, seqs, targets, idx, micro, 0)
    assert pieces == pytest.approx(whole, rel=1e-5)
    for p, g in zip(params, g_whole):
        torch.testing.assert_close(p.grad, g, rtol=1e-4, atol=1e-6)


def test_micro_batch_size_is_checked_before_any_work(tmp_path):
    from aieg_fast.training import train_sentiment

    with pytest.raises(ValueError, match="micro_batch_size must be a positive int, got 0"):
        train_sentiment(out_dir=tmp_path, micro_batch_size=0)
