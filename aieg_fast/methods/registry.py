"""The method registry: ``register``, ``get_method``, ``list_methods``, ``method_options`` and the
``name:option=value`` spec parser used by ``evaluate`` and the CLI."""
from __future__ import annotations

import json
from typing import Any, Dict, List, Tuple

import torch

from .base import Method, Options

__all__ = ["METHODS", "FORMER_DEFAULTS", "register", "unregister", "get_method", "list_methods", "method_options", "resolved_options",
           "attention_missing", "check_model", "parse_method_spec", "split_method_specs", "option_value", "PYTHON_CONSTANTS"]

#: name → method instance, in registration order
METHODS: Dict[str, Method] = {}

#: Option defaults that changed, with the value each had before. Run folders written before
#: they recorded each method's resolved options (``methods.json``, December 2026) computed their
#: records with these values where a method spec left the option out, so a resume is checked
#: against them. AIEG's default reading was ``preset="v1"`` until issue 19's study.
FORMER_DEFAULTS: Dict[str, Dict[str, Any]] = {"aieg": {"preset": "v1"}}


#: the keywords of ``Explainer.attribute`` and ``attribute_generation``: a method option of one of
#: these names could never be given (the call takes it), so :func:`register` refuses it
CALL_KEYWORDS = frozenset({
    "self", "alpha_range", "backend", "baseline", "baseline_noise", "compile", "contrast_target", "generated_text", "input_ids",
    "internal_batch_size", "interpolate_generated", "label_set", "max_memory", "max_new_tokens", "max_steps", "method",
    "n_baseline_samples", "n_steps", "padding_side", "progress", "prompt", "seed", "shared", "target", "target_fn",
    "template", "text", "tolerance",
})


def register(cls):
    """Class decorator: add a :class:`Method` subclass to the registry under ``cls.name``.

    Raises:
        TypeError: not a Method subclass; a class that does not override :meth:`Method.run`
            (names the class: every call would fail with NotImplementedError; ``run_sequence``
            alone is not enough); a name that is not a str; ``Options`` that is not a
            subclass of :class:`~aieg_fast.methods.base.Options` made a dataclass itself
            (``@dataclass(frozen=True)``; without it its fields would be no options).
        ValueError: no name, a name with whitespace or one of ``: , = [ ]`` (the
            ``name:option=value`` specs of ``evaluate`` and the CLI could not name it), a name
            that is taken, an option named like a keyword of the attribution calls
            (:data:`CALL_KEYWORDS`: it could never be given), or defaults that the options' own
            ``validate()`` refuses (every call left at its defaults would fail).
    """
    if not (isinstance(cls, type) and issubclass(cls, Method)):
        raise TypeError(f"register expects a Method subclass, got {cls!r}")
    if not callable(getattr(cls, "run", None)) or cls.run is Method.run:
        raise TypeError(f"{cls.__name__} does not define run(self, ctx, opts) -> MethodOutput, which every method "
                        "must (run_sequence is optional, for generation); define it before registering")
    if not isinstance(cls.name, str):
        raise TypeError(f"{cls.__name__}.name must be a str, got {cls.name!r}")
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    if any(c.isspace() or c in ":,=[]" for c in cls.name):
        raise ValueError(f"{cls.__name__}.name {cls.name!r} holds whitespace or one of ': , = [ ]'; a method spec "
                         "('name:option=value') could not name it")
    if cls.name in METHODS:
        raise ValueError(f"a method named {cls.name!r} is already registered ({type(METHODS[cls.name]).__name__}); "
                         f"aieg_fast.unregister({cls.name!r}) removes it (e.g. before running a notebook cell again)")
    if not (isinstance(cls.Options, type) and issubclass(cls.Options, Options) and "__dataclass_fields__" in vars(cls.Options)):
        raise TypeError(f"{cls.__name__}.Options must be a dataclass subclassing aieg_fast.Options (with "
                        f"@dataclass(frozen=True)), got {cls.Options!r}")
    taken = sorted(set(cls.option_names()) & CALL_KEYWORDS)
    if taken:
        raise ValueError(f"{cls.__name__}.Options has option(s) {taken} named like keywords of Explainer.attribute / "
                         "attribute_generation: the call would take them, never the method; rename them")
    try:
        cls.options()
    except (TypeError, ValueError) as err:
        raise ValueError(f"{cls.__name__}: its default options are refused by its own checks ({err})") from None
    METHODS[cls.name] = cls()
    return cls


def unregister(name: str) -> None:
    """Remove the method registered as ``name`` (a method of your own, before registering a new
    version of it; a package method too, until the process restarts).

    Raises:
        ValueError: no method is registered as ``name`` (lists the methods).
    """
    if not isinstance(name, str) or name not in METHODS:
        raise ValueError(f"no method is registered as {name!r}; registered: {list_methods()}")
    del METHODS[name]


def list_methods() -> List[str]:
    """Names of the attribution methods, in the order they were registered."""
    return list(METHODS)


def get_method(name: str) -> Method:
    """The registered method called ``name``.

    Raises:
        ValueError: unknown name, or a name that is not a str (lists the methods).
    """
    if not isinstance(name, str) or name not in METHODS:
        raise ValueError(f"method must be one of {list_methods()}, got {name!r}")
    return METHODS[name]


def method_options(method: str) -> Dict[str, Any]:
    """The options of a method with their defaults, e.g. ``method_options("aieg")["ef_mode"] == "fd"``.
    A default of None (e.g. AIEG's ``posnorm``, Grad-ELLM's ``rope``, HETA's ``window``) is
    resolved at call time from the method's preset or the call (AIEG's ``n_pilot``: ``n_steps``);
    ``res.options`` records the value used.

    Raises:
        ValueError: unknown method.
    """
    return get_method(method).defaults()


def resolved_options(name: str, opts: Dict[str, Any], former: bool = False) -> Dict[str, Any]:
    """Every option of method ``name`` with the value ``opts`` resolves to (defaults and presets
    filled in), as JSON gives it back (tuples as lists): what a run records so that records of
    two readings never meet under one method spec. ``former``: the :data:`FORMER_DEFAULTS`
    where ``opts`` leaves an option out.

    Raises:
        ValueError / TypeError: unknown method, or options its ``Options`` refuse.
    """
    base = {**FORMER_DEFAULTS.get(name, {}), **opts} if former else dict(opts)
    return json.loads(json.dumps(get_method(name).options(**base).as_dict(), default=str))


def attention_missing(method: Method, opts, adapter) -> bool:
    """Whether ``method`` with ``opts`` needs attention layers that ``adapter``'s family lacks
    (a state-space model such as Mamba): the refusal of :func:`check_model` that a family, not a
    setting, causes."""
    return method.needs_attention(opts) and not adapter.has_attention


def check_model(method: Method, opts, adapter) -> None:
    """Refuse, before any work, a method that needs attention on a family without attention
    layers, gradients inside ``torch.inference_mode()``, or options the model cannot take
    (:meth:`~aieg_fast.methods.base.Method.check_adapter`).

    Raises:
        ValueError: names the method, the model's architecture, what it has instead of attention,
            and the methods (with their default options) that work on it; or the option the model
            cannot take.
        RuntimeError: a gradient method called inside ``torch.inference_mode()`` (names the
            methods that work there).
    """
    if method.gradients and torch.is_inference_mode_enabled():
        usable = [n for n, m in METHODS.items() if not m.gradients]
        raise RuntimeError(
            f"method {method.name!r} takes gradients, which torch.inference_mode() turns off for good inside its block; "
            f"call it outside that block (inside torch.no_grad() is fine), or use one of {usable}"
        )
    if attention_missing(method, opts, adapter):
        usable = [n for n, m in METHODS.items() if not m.needs_attention(m.options())]
        hint = "".join(f", or {n} with {m.without_attention}" for n, m in METHODS.items() if m.without_attention)
        raise ValueError(
            f"method {method.name!r} needs attention layers, but {adapter.arch} has none "
            f"({adapter.attention_free_reason}); use one of {usable}{hint}"
        )
    method.check_adapter(opts, adapter)


def split_method_specs(text: str) -> List[str]:
    """The method specs of a comma-separated list (``--methods``, ``evaluate(methods=...)``),
    split at the commas outside square brackets and double quotes, so that a JSON list or
    string value of an option stays whole: ``aieg:attn_layers=[0,1],heta:components="gate,information",saliency``
    is three specs. Blank items are dropped; an unbalanced bracket or quote keeps the rest of
    the text in one spec (refused by :func:`parse_method_spec` or the option's check)."""
    specs, start, depth, quoted, escaped = [], 0, 0, False, False
    for i, ch in enumerate(text):
        if quoted:
            quoted, escaped = (ch != '"' or escaped), (ch == "\\" and not escaped)
        elif ch == '"':
            quoted = True
        elif ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(depth - 1, 0)  # a stray "]" closes nothing
        elif ch == "," and depth == 0:
            specs.append(text[start:i])
            start = i + 1
    specs.append(text[start:])
    return [s.strip() for s in specs if s.strip()]


def parse_method_spec(spec: str) -> Tuple[str, dict]:
    """Split a method spec ``name[:option=value[:option=value ...]]`` into (name, options).

    Values are read as JSON when they parse (``n_pilot=10``, ``adaptive=false``,
    ``attn_layers=[0,1]``, ``components="gate,information"``, ``null``; Python's ``True`` /
    ``False`` too), else kept as strings (``ef_mode=none``): :func:`option_value`. In a
    comma-separated list of specs a value holding a comma is written as JSON (a list, or a
    string in double quotes): :func:`split_method_specs`. Example: ``aieg:ef_mode=none`` is AIEG without the emphasis
    factor; the spec string is the method's name in the records and tables.

    Raises:
        ValueError: an option without ``=``, an empty name.
    """
    parts = [p.strip() for p in str(spec).split(":")]
    name, opts = parts[0], {}
    if not name:
        raise ValueError(f"methods has an empty method name in {spec!r}")
    for part in parts[1:]:
        if "=" not in part:
            raise ValueError(f"methods: option {part!r} of {spec!r} must be NAME=VALUE")
        k, v = part.split("=", 1)
        if k.strip() in opts:
            raise ValueError(f"methods: option {k.strip()!r} is given twice in {spec!r}")
        opts[k.strip()] = option_value(v.strip())
    return name, opts


#: Python's spellings of JSON's true and false, read as them in an option's text (``adaptive=False``; not None: see :func:`option_value`)
PYTHON_CONSTANTS = {"True": True, "False": False}


def option_value(text: str):
    """A method option's value from text: JSON when it parses (``4``, ``false``, ``[0, 1]``,
    ``null``), ``True`` / ``False`` (as Python writes them) as ``true`` / ``false``, else the text
    itself (``none``, ``last``; also ``None``: null is "the preset's value" for options such as
    ``posnorm``, so Python's spelling is refused by the option's check, not read as the default).
    Shared by method specs and ``--option``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return PYTHON_CONSTANTS.get(text.strip(), text)
