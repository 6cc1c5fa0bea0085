"""Per-step vector-Jacobian products of one shared forward (generation): the per-step backwards
of ``each_row_vjp`` (a CPU's path) and its batched backward (other devices' path) give every
step's own gradient."""
from __future__ import annotations

import pytest
import torch

from aieg_fast.core.model_state import model_prepared
from aieg_fast.core.vjp import each_row_vjp, rows_vjp, sequence_scores


def _path_scores(ex, n_rows=3):
    """F [c, T] of a few scaled copies of a tiny model's sequence, its rows needing gradients."""
    ids = ex.encode("the movie is good and the actors are great")[0]
    E = ex.adapter.embeddings(torch.tensor([ids]))[0].detach()
    X = (E * torch.linspace(0.2, 1.0, n_rows).view(-1, 1, 1)).requires_grad_(True)
    q = torch.arange(len(ids) - 4, len(ids))  # the last four positions predict
    y = torch.tensor(ids[-3:] + ids[:1])
    with torch.enable_grad():
        F = sequence_scores(ex.adapter, X, q, y, "logit")
    return F, X


@pytest.mark.parametrize("batched", [False, True])
def test_each_row_vjp_gives_each_steps_gradient(tiny_llama, batched):
    with model_prepared(tiny_llama.model):  # one forward for each way (a backward frees its graph)
        F, X = _path_scores(tiny_llama)
        T = F.shape[1]
        alone = [torch.autograd.grad(F[:, t].sum(), X, retain_graph=t < T - 1)[0] for t in range(T)]
        F, X = _path_scores(tiny_llama)
        (G,) = rows_vjp(F, X, T)  # [T, c, L, d]
        F, X = _path_scores(tiny_llama)
        got = list(each_row_vjp(F, X, T, batched))
    assert [t for t, _ in got] == list(range(T))
    for t, (g,) in got:
        assert g.shape == X.shape
        torch.testing.assert_close(g, alone[t], atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(g, G[t], atol=1e-6, rtol=1e-5)
    # the steps differ (each row's cotangent is its own), so a mix-up of t would fail above
    assert not torch.allclose(got[0][1][0], got[-1][1][0])
