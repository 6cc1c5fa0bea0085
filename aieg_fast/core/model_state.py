"""Preparing a model for attribution and giving it back exactly as it was, one call at a time.

Thread safety: every attribution call takes the model's lock (:func:`model_lock`, a re-entrant
lock per model object) for its whole duration, and :func:`model_prepared` takes it too. Calls
that share a model (one :class:`~aieg_fast.Explainer` used from several threads) therefore run
one after the other: each sees only its own hooks, its own eval-mode switch and its own
attention implementation, and gives the same result as on one thread. The cost: no speed-up
from threads on one model (on a CPU torch already spreads one call over the cores); load one
model per thread for parallel calls. Calls on different models do not wait for each other.
"""
from __future__ import annotations

import contextlib
import functools
import threading
import weakref

import torch

from .diagnostics import warn

__all__ = ["model_prepared", "model_lock", "holding_model_lock", "running_user_code"]

_LOCKS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


def model_lock(model) -> "threading.RLock":
    """The re-entrant lock of ``model`` (one per model object, made on first use). Every
    attribution call holds it while it runs (see the module docstring)."""
    with _LOCKS_GUARD:
        lock = _LOCKS.get(model)
        if lock is None:
            lock = _LOCKS[model] = threading.RLock()
    return lock


#: per thread, the models whose call is running user code (a ``target_fn``) right now
_IN_USER_CODE = threading.local()


@contextlib.contextmanager
def running_user_code(model):
    """Mark, for this thread, that a call on ``model`` is running the user's code (a callable
    ``target_fn``): a call on the same model from inside it is refused
    (:func:`holding_model_lock`), as it would run in the middle of this one, on its hooks."""
    stack = getattr(_IN_USER_CODE, "models", None)
    if stack is None:
        stack = _IN_USER_CODE.models = []
    stack.append(id(model))
    try:
        yield
    finally:
        stack.pop()


def holding_model_lock(fn):
    """Decorator for a function whose first argument has a ``model`` (an explainer): run it
    holding :func:`model_lock` of that model.

    Raises:
        RuntimeError: called from inside a ``target_fn`` of a call on the same model
            (:func:`running_user_code`), before anything is done.
    """

    @functools.wraps(fn)
    def locked(ex, *args, **kwargs):
        if id(ex.model) in getattr(_IN_USER_CODE, "models", ()):
            raise RuntimeError(f"{fn.__name__}() was called from inside a target_fn of a call on the same model; a call cannot run "
                               "in the middle of another on one model (its hooks and hidden states are in use). Compute what "
                               "target_fn needs before the call, or use a second model object")
        with model_lock(ex.model):
            return fn(ex, *args, **kwargs)

    return locked


def _lists(model):
    """(parameters, modules) of ``model`` as they are now, walked at every call (a walk of the
    module tree, small beside a forward): a module or parameter put in place without registering
    it (``model._modules[name] = ...``, as some quantisation and tracing tools do) is switched to
    eval mode and frozen too. (A list kept between calls and renewed when torch registered a
    module missed those; and the LLaMA-type forwards, which register modules at every call,
    renewed it every time anyway.)"""
    return tuple(model.parameters()), tuple(model.modules())


@contextlib.contextmanager
def model_prepared(model, eager: bool = False):
    """Eval mode, parameters frozen, optionally eager attention; everything restored on exit.

    Holds :func:`model_lock` of the model for the whole block. Restored exactly, also after an
    exception: each parameter's ``requires_grad``, each submodule's own ``training`` flag (a
    model whose blocks are in mixed train/eval modes gets each block's mode back), and the
    attention implementation; dtypes and devices are never changed.

    Args:
        model: a ``transformers`` model.
        eager: switch to eager attention (needed to read attention probabilities).

    Raises:
        RuntimeError: ``eager`` and the model cannot switch its attention implementation at run
            time (transformers only logs it for such models); nothing is left changed.

    Warns:
        AttributionWarning: the model (or a dropout layer with p > 0) is in training mode:
            attributions are computed in eval mode (dropout off), and each module's mode is
            given back afterwards.
    """
    with model_lock(model):
        params, modules = _lists(model)
        trainable = [p for p in params if p.requires_grad]  # only these change
        training = [m for m in modules if m.training]
        drop = sum(isinstance(m, torch.nn.modules.dropout._DropoutNd) and m.p > 0 for m in training)
        if model.training or drop:  # a lone submodule in training mode without dropout behaves the same
            warn(
                f"{type(model).__name__} is in training mode ({len(training)} modules, {drop} dropout layers active); "
                "attributions are computed in eval mode (dropout off, deterministic) and every module's mode is given "
                "back afterwards; call model.eval() to silence this warning"
            )
        with _prepared(model, trainable, training, eager):
            yield


@contextlib.contextmanager
def _prepared(model, trainable, training, eager: bool):
    old_impl = getattr(model.config, "_attn_implementation", None)
    switch = eager and old_impl not in (None, "eager")
    try:
        for p in trainable:
            p.requires_grad_(False)
        for m in training:
            m.training = False
        if switch:
            model.set_attn_implementation("eager")
            if model.config._attn_implementation != "eager":  # transformers only logged that it cannot
                raise RuntimeError(
                    f"{type(model).__name__} cannot switch to eager attention at run time, which this method needs to "
                    f"read attention probabilities (it runs {old_impl!r}); load the model with "
                    f"attn_implementation='eager'"
                )
        yield
    finally:
        for p in trainable:
            p.requires_grad_(True)
        for m in training:
            m.training = True
        if switch and model.config._attn_implementation != old_impl:
            model.set_attn_implementation(old_impl)
