"""The method contract: a :class:`Method` with a frozen :class:`Options` dataclass, ``run(ctx, opts)``
returning a :class:`MethodOutput`, and optionally ``run_sequence(sctx, opts)`` for the shared
generation pass."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, List, Optional, Sequence, Tuple

from torch import Tensor

from ..core.diagnostics import warn
from ..core.path import BYTES_PER_STEP
from ..core.validation import as_bool, as_ints, check_options

__all__ = ["Method", "MethodOutput", "Options"]


@dataclass(frozen=True)
class Options:
    """Base of a method's options: a frozen dataclass whose fields are the options, with their
    defaults; :meth:`validate` checks the values once, when the options are built (before any
    model work). Checks that need the model (layer ranges) run in the method. An integer of
    another library (``np.int64(4)``, a 0-d integer tensor, also as an item of a list) is stored
    as the Python int it holds, and a 1-D NumPy integer array (``np.arange(2)``) as a list of them
    (:func:`~aieg_fast.core.validation.as_ints`), and a NumPy bool as the bool it holds, so the
    options record as JSON; floats stay as given, for ``validate`` to refuse."""

    def __post_init__(self):
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, as_ints(as_bool(getattr(self, f.name))))
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
            shared by all (kept whole in every result; the degeneracy flags read a ``[B, L]``
            tensor of ``raw_signal`` row by row). A per-token value covers the example's own
            tokens, not its padded row (:meth:`~aieg_fast.core.batch.Batch.per_example`).
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
    #: whether the method integrates along a path of ``n_steps`` steps (recorded in its results'
    #: options only then; the others take no steps)
    uses_steps: ClassVar[bool] = False
    #: whether the method explains a multi-token target (F = Σ_t log p(y_t), teacher-forced):
    #: methods that reach the model only through the context's F and gradients
    multi_token_targets: ClassVar[bool] = False
    shares_pilot: ClassVar[bool] = False
    #: the baseline a call without ``baseline=`` uses (a :mod:`~aieg_fast.core.baselines` kind;
    #: None = the reference token), for methods with :attr:`uses_baseline`
    default_baseline: ClassVar[Any] = None
    #: option holding the pilot size, when :attr:`shares_pilot`
    pilot_option: ClassVar[Optional[str]] = None
    #: the ``info`` key of the raw signal before any normalisation (AIEG: ``"ieg"``); None = the
    #: scores are the raw signal. Read by the degenerate-signal checks (:mod:`aieg_fast.core.diagnostics`).
    raw_signal: ClassVar[Optional[str]] = None
    #: the ``info`` keys holding one number per token of each example (AIEG's ``ieg``); with
    #: ``n_baseline_samples`` they are averaged over the draws as the scores are
    token_info: ClassVar[Tuple[str, ...]] = ()
    #: whether the scores should sum to F(x) − F(x′) (IG): a large error is flagged
    completeness: ClassVar[bool] = False
    #: whether the method takes gradients of F (refused inside ``torch.inference_mode()``,
    #: where autograd cannot be turned back on)
    gradients: ClassVar[bool] = True
    #: whether ``n_steps="auto"`` (steps chosen by accuracy, :mod:`~aieg_fast.core.adaptive_quadrature`)
    #: is supported; :attr:`auto_steps_refusal` says why not where it is not
    auto_steps: ClassVar[bool] = False
    #: the options under which a method that needs attention by default runs without it
    #: (named when a family without attention refuses the default), or None
    without_attention: ClassVar[Optional[str]] = None
    auto_steps_refusal: ClassVar[str] = (
        "it takes no path steps (n_steps is not used); leave n_steps out"
    )

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

    def normalisation(self, opts) -> Optional[str]:
        """The normalisation these options apply to the raw signal (e.g. ``"PosNorm (minmax)"``),
        or None: a flat raw signal that a normalisation stretches is flagged ``"inflated"``."""
        return None

    def step_bytes(self, opts, n_steps: int) -> int:
        """Memory (bytes) of the per-step arrays of one example: path methods (:attr:`uses_steps`)
        keep about :data:`~aieg_fast.core.path.BYTES_PER_STEP` per step of the main grid and of
        the pilot grid; other methods take no steps (0). Checked before any work, so that a huge
        ``n_steps`` is refused with the memory it would need."""
        if not self.uses_steps:
            return 0
        pilot = getattr(opts, self.pilot_option, None) if self.pilot_option else None
        extra = (pilot or n_steps) if self.pilot_option else 0
        return (n_steps + extra) * BYTES_PER_STEP

    def non_finite_hint(self, opts, baseline: str, dtype) -> str:
        """What a warning of scores that are not finite adds: for a method that integrates from a
        baseline, that its path may be degenerate for this model and what to try; "" otherwise.

        Args:
            opts: the method's options. baseline: the baseline as recorded. dtype: the model's
                parameter dtype."""
        if not self.uses_baseline:
            return ""
        return (f"; with baseline {baseline!r} the path may be numerically degenerate for this model (try "
                "baseline='mean' or alpha_range=(0.05, 1))")

    def largest_grid(self, opts, n_steps: int) -> Tuple[str, int]:
        """(option, steps) of the larger of the main grid (``n_steps``) and the pilot grid
        (:attr:`pilot_option`), the one a memory refusal names."""
        pilot = getattr(opts, self.pilot_option, None) if self.pilot_option else None
        return (self.pilot_option, int(pilot)) if isinstance(pilot, int) and pilot > n_steps else ("n_steps", n_steps)

    def check_steps(self, opts, n_steps) -> None:
        """Refuse, before any work, ``n_steps="auto"`` where this method (with these options)
        cannot choose its steps by accuracy. A pilot of more points than ``n_steps`` is warned
        (:class:`~aieg_fast.core.diagnostics.AttributionWarning`): the adaptive grid deals the
        ``n_steps`` points over the pilot's intervals and leaves the intervals without one out
        of the integral (IDG's rule; its authors vary N and M apart), so with a pilot much
        larger than ``n_steps`` the scores can cover a small part of the path.

        Raises:
            ValueError: naming the method and why, and what to pass instead.
        """
        if n_steps == "auto" and not self.auto_steps:
            raise ValueError(f"n_steps='auto' is not available for method {self.name!r}: {self.auto_steps_refusal}")
        pilot = getattr(opts, self.pilot_option, None) if self.pilot_option else None
        if isinstance(pilot, int) and isinstance(n_steps, int) and pilot > n_steps:
            warn(f"{self.name}: {self.pilot_option}={pilot} > n_steps={n_steps}: the adaptive grid puts the {n_steps} points "
                 f"over the pilot's {pilot - 1} intervals and leaves the intervals without a point out of the integral, so "
                 f"the scores can cover a small part of the path (info['alphas'] holds the grid; the default "
                 f"{self.pilot_option} is n_steps)")

    def check_target(self, opts, contrast: bool) -> None:
        """Refuse, before any model work, a contrast these options cannot explain (``contrast``:
        a contrast token is given); called by ``Explainer.attribute`` and ``attribute_generation``
        (through :func:`~aieg_fast.core.call.resolve_call`). Nothing by default.

        Raises:
            ValueError: naming the option and the target setting, and what to pass instead.
        """

    def check_adapter(self, opts, adapter) -> None:
        """Refuse, before any work, options this model cannot take (Grad-ELLM's ``n_layers``
        above the model's layers); called by :func:`~aieg_fast.methods.registry.check_model`
        after its attention check, so before an evaluation writes its folder. Nothing by default.

        Raises:
            ValueError: naming the option, the value and what the model allows.
        """

    def needs_words(self, opts) -> bool:
        """Whether the method groups tokens into words with these options; the caller then fills
        ``ctx.word_ids`` (the word of each position, from the tokenizer's offsets)."""
        return False

    def run(self, ctx, opts) -> MethodOutput:
        """Explain ``ctx.batch``: one score row per example (see :class:`MethodOutput`)."""
        raise NotImplementedError

    #: ``run_sequence(sctx, opts) -> MethodOutput`` with one row per generation step, or None
    run_sequence = None
