"""The method contract: a :class:`Method` with a frozen :class:`Options` dataclass, ``run(ctx, opts)``
returning a :class:`MethodOutput`, and optionally ``run_sequence(sctx, opts)`` for the shared
generation pass."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, List, Optional, Sequence

from torch import Tensor

from ..core.validation import check_options

__all__ = ["Method", "MethodOutput", "Options"]


@dataclass(frozen=True)
class Options:
    """Base of a method's options: a frozen dataclass whose fields are the options, with their
    defaults; :meth:`validate` checks the values once, when the options are built (before any
    model work). Checks that need the model (layer ranges) run in the method."""

    def __post_init__(self):
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the option for a bad value."""

    def as_dict(self) -> Dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


@dataclass
class MethodOutput:
    """What a method returns.

    Attributes:
        scores: one Tensor[L] per example (per step for ``run_sequence``), over the padded row;
            fixed positions hold 0.
        options: the settings the method ran with, recorded in the result.
        info: extras; a list entry holds one value per example (per step), anything else is
            shared by all.
    """

    scores: Sequence[Tensor]
    options: Dict[str, Any] = field(default_factory=dict)
    info: Dict[str, Any] = field(default_factory=dict)


class Method:
    """An attribution method. Subclasses set :attr:`name`, :attr:`doc` (one line), :attr:`Options`
    and implement :meth:`run`; methods that can explain every generation step from shared
    forwards over the whole sequence implement :meth:`run_sequence` too. Register a subclass
    with :func:`~aieg_fast.methods.registry.register`."""

    name: ClassVar[str] = ""
    doc: ClassVar[str] = ""
    Options: ClassVar[type] = Options
    #: generation computes the pilot logits of every step in one shared pass (AIEG, IDG)
    #: whether the method integrates from a baseline (``baseline``, ``alpha_range`` and
    #: ``n_baseline_samples`` apply; the baseline is recorded in its results)
    uses_baseline: ClassVar[bool] = False
    #: whether the method explains a multi-token target (F = Σ_t log p(y_t), teacher-forced):
    #: methods that reach the model only through the context's F and gradients
    multi_token_targets: ClassVar[bool] = False
    shares_pilot: ClassVar[bool] = False
    #: the baseline a call without ``baseline=`` uses (a :mod:`~aieg_fast.core.baselines` kind;
    #: None = the reference token), for methods with :attr:`uses_baseline`
    default_baseline: ClassVar[Any] = None
    #: option holding the pilot size, when :attr:`shares_pilot`
    pilot_option: ClassVar[Optional[str]] = None

    @classmethod
    def option_names(cls) -> List[str]:
        return [f.name for f in dataclasses.fields(cls.Options)]

    @classmethod
    def defaults(cls) -> Dict[str, Any]:
        """Each option with its default."""
        return {f.name: f.default for f in dataclasses.fields(cls.Options)}

    @classmethod
    def options(cls, **values) -> "Options":
        """Validated options from keyword values.

        Raises:
            ValueError: an unknown option (names the allowed ones) or a bad value.
        """
        check_options(cls.name, values, cls.option_names())
        return cls.Options(**values)

    def needs_attention(self, opts) -> bool:
        """Whether the method reads attention (probabilities, q/k/v, the output projection) with
        these options; such methods are refused for families without attention layers."""
        return False

    def needs_words(self, opts) -> bool:
        """Whether the method groups tokens into words with these options; the caller then fills
        ``ctx.word_ids`` (the word of each position, from the tokenizer's offsets)."""
        return False

    def run(self, ctx, opts) -> MethodOutput:
        """Explain ``ctx.batch``: one score row per example (see :class:`MethodOutput`)."""
        raise NotImplementedError

    #: ``run_sequence(sctx, opts) -> MethodOutput`` with one row per generation step, or None
    run_sequence = None
