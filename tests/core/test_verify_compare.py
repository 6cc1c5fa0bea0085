"""aieg_fast.verify.spearman / compare_scores: the agreement numbers `aieg-fast verify` and the
benchmarks print must be Spearman's rho (ties averaged), with the constant cases defined."""
import torch
from scipy.stats import spearmanr

from aieg_fast.verify import compare_scores, spearman


def test_spearman_matches_scipy_with_ties_and_flattens():
    a = torch.tensor([[0.1, 0.5], [0.5, -2.0]])
    b = torch.tensor([3.0, 1.0, 2.0, 2.0])
    assert abs(spearman(a, b) - spearmanr(a.flatten().numpy(), b.numpy()).statistic) < 1e-12
    assert spearman(b, -b) == -1.0 and spearman(b, 2 * b + 1) == 1.0


def test_spearman_constant_and_tiny_inputs():
    z = torch.zeros(5)
    assert spearman(z, z) == 1.0  # equal constants agree
    assert spearman(z, torch.arange(5.0)) == 0.0  # one side constant: no agreement
    assert spearman(torch.tensor([1.0]), torch.tensor([7.0])) == 1.0


def test_compare_scores_reports_abs_rel_and_rank_agreement():
    ref = torch.tensor([1.0, -2.0, 4.0])
    mad, rel, rho = compare_scores(ref, ref + torch.tensor([0.0, 0.5, 0.0]))
    assert (mad, rel, rho) == (0.5, 0.125, 1.0)
