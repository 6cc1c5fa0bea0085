"""The shared argument checks of aieg_fast.core.validation and the training schedule: every
refusal names the argument and the value; accepted values pass unchanged."""
import math

import numpy as np
import pytest
import torch

from aieg_fast.core.validation import check_int, check_number, check_positive_int
from aieg_fast.training.schedule import warmup_cosine


@pytest.mark.parametrize("bad", [0, -2, 1.0, True, "3", None])
def test_check_positive_int_refuses(bad):
    with pytest.raises(ValueError, match=rf"batch_size must be a positive int, got {bad!r}"):
        check_positive_int("batch_size", bad)


def test_check_positive_int_optional():
    assert check_positive_int("n", 3) == 3
    assert check_positive_int("n", None, optional=True) is None
    with pytest.raises(ValueError, match=r"n must be a positive int or None, got 0"):
        check_positive_int("n", 0, optional=True)


def test_check_int_optional_and_range():
    check_int("max_train", None, 2, optional=True)
    check_int("max_train", 2, 2, optional=True)
    with pytest.raises(ValueError, match=r"max_train must be an int >= 2 or None, got 1"):
        check_int("max_train", 1, 2, optional=True)
    with pytest.raises(ValueError, match=r"max_train must be an int >= 2, got None"):
        check_int("max_train", None, 2)
    with pytest.raises(ValueError, match=r"k must be an int in \[0, 3\], got 4"):
        check_int("k", 4, 0, 3)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), True, "0.1", None, -1e-9])
def test_check_number_refuses(bad):
    with pytest.raises(ValueError, match=rf"beta must be a finite number >= 0, got {bad!r}"):
        check_number("beta", bad)


def test_check_number_strict_and_optional():
    check_number("beta", 0.0)
    check_number("beta", np.float32(0.5))
    check_number("sigma", None, optional=True)
    with pytest.raises(ValueError, match=r"lr must be a finite number > 0, got 0.0"):
        check_number("lr", 0.0, strict=True)
    check_number("lr", 1e-12, strict=True)
    with pytest.raises(ValueError, match=r"sigma must be a finite number >= 0 or None, got nan"):
        check_number("sigma", float("nan"), optional=True)


def test_warmup_cosine_schedule():
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=2.0)
    sched = warmup_cosine(opt, 40)  # warm-up over max(1, 40 // 20) = 2 steps
    lrs = []
    for _ in range(40):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs[0] == pytest.approx(1.0) and lrs[1] == pytest.approx(2.0)
    s = 21  # half-way through the 38 decay steps
    assert lrs[s] == pytest.approx(2.0 * 0.5 * (1 + math.cos(math.pi * (s - 2) / 38)))
    assert all(a >= b for a, b in zip(lrs[1:], lrs[2:]))
    assert lrs[-1] < 0.01


@pytest.mark.parametrize("template, text, want", [
    ("Q {{text}} {text}", "x", "Q {{text}} x"),               # {{text}} is text, {text} the field
    ("Q {{p}} {p} / {q}", {"p": "a", "q": "b"}, "Q {{p}} a / b"),
    # a brace beside a field that is not its double: JSON around the field was refused ("exactly once")
    ('{"a": {text}}', "x", '{"a": x}'),
    ("{{text}}{text}}", "x", "{{text}}x}"),
])
def test_fill_template_double_braces_are_text(template, text, want):
    """fill_template counts and splits at the {name} fields only: '{{text}}' was taken for the
    field (filled inside the braces) or made the template 'contain {text} twice'."""
    from aieg_fast.core.inputs import fill_template

    full, spans = fill_template(text, template)
    assert full == want
    pieces = [full[a:b] for a, b in spans]
    assert pieces == ([text] if isinstance(text, str) else [text["p"], text["q"]])
    with pytest.raises(ValueError, match="exactly once"):
        fill_template("x", "Q {{text}}")
