"""Chat models: a conversation rendered by the model's own chat template, as a prompt template
whose ``{text}`` is the user's new message, so that only that message is attributed.

Rendering the whole conversation to text and attributing it (``attribute(rendered)``) attributes
the template's role words, system prompt and newlines too (only the special tokens typed in it are
held fixed); given as ``template=``, the rendered conversation is held fixed and only ``{text}``
is attributed (:func:`~aieg_fast.core.inputs.fill_template`).
"""
from __future__ import annotations

from typing import Mapping, Optional, Sequence

from ..datasets.user import TEMPLATE_FIELD

__all__ = ["chat_template"]

#: the field :func:`chat_template` leaves for the attributed message
_FIELD = "{text}"


def chat_template(tokenizer, messages: Sequence[Mapping[str, str]] = (), system: Optional[str] = None,
                  add_generation_prompt: bool = True) -> str:
    """A prompt template for ``attribute`` / ``attribute_generation`` / ``explain --chat`` made by
    the tokenizer's chat template: the conversation ``messages`` (held fixed), then a user turn
    whose content is ``{text}`` (the attributed text), then the assistant's turn opened.

    Example::

        tpl = aieg_fast.chat_template(ex.tokenizer, system="Answer in one word.")
        ex.attribute("What is the capital of France?", template=tpl, method="integrated_gradients")

    Args:
        tokenizer: a Hugging Face tokenizer with a chat template (``tokenizer.chat_template``),
            or an :class:`~aieg_fast.Explainer` (its tokenizer).
        messages: the earlier turns, ``[{"role": "user" | "assistant" | ..., "content": str}, ...]``,
            rendered as they are and held fixed (a ``{"role": "system", ...}`` first turn too).
        system: a system message put first (not with a system turn in ``messages``).
        add_generation_prompt: open the assistant's turn after ``{text}`` (the model's next token
            is then its answer's first).

    Returns:
        The rendered conversation with ``{text}`` once, where the new user message goes.

    Raises:
        TypeError: ``messages`` not a sequence of mappings with str ``role`` and ``content``;
            ``system`` not a str or None; ``add_generation_prompt`` not a bool.
        ValueError: no chat template on the tokenizer; ``system`` besides a system turn; a fixed
            message holding a ``{name}`` (a template reads it as a field, and a template has no
            escape for it: render such a conversation yourself and attribute it whole); a chat
            template that drops or changes the ``{text}`` placeholder, or refuses the conversation
            (some refuse a system turn, or turns that do not alternate).
    """
    tok = getattr(tokenizer, "tokenizer", None) if not hasattr(tokenizer, "apply_chat_template") else tokenizer
    if tok is None or not hasattr(tok, "apply_chat_template"):
        raise TypeError(f"tokenizer must be a Hugging Face tokenizer or an Explainer, got {type(tokenizer).__name__}")
    if not getattr(tok, "chat_template", None):
        raise ValueError(f"tokenizer {type(tok).__name__} has no chat template (tokenizer.chat_template is empty): "
                         "this model is not a chat model, or its template must be set first")
    if system is not None and not isinstance(system, str):
        raise TypeError(f"system must be a str or None, got {type(system).__name__}")
    if not isinstance(add_generation_prompt, bool):
        raise TypeError(f"add_generation_prompt must be a bool, got {add_generation_prompt!r}")
    turns = [_checked_turn(i, m) for i, m in enumerate(_as_list(messages))]
    if system is not None:
        if turns and turns[0]["role"] == "system":
            raise ValueError("system is given and messages[0] is a system turn already: give one of them")
        turns.insert(0, {"role": "system", "content": system})
    for i, t in enumerate(turns):
        field = TEMPLATE_FIELD.search(t["content"])
        if field:
            name = "system" if system is not None and i == 0 else f"messages[{i - (system is not None)}]['content']"
            raise ValueError(f"{name} holds {field.group(0)!r}, which a template reads as a field, so it cannot be held "
                             "fixed (a template has no escape for it): render this conversation with "
                             "tokenizer.apply_chat_template(..., tokenize=False) and attribute it as text")
    from jinja2 import TemplateError

    try:
        rendered = tok.apply_chat_template(turns + [{"role": "user", "content": _FIELD}], tokenize=False,
                                           add_generation_prompt=add_generation_prompt)
    except TemplateError as err:  # the template's own refusal ("System role not supported", roles that must alternate)
        raise ValueError(f"the tokenizer's chat template refused this conversation: {err}") from None
    if not isinstance(rendered, str) or rendered.count(_FIELD) != 1:
        raise ValueError(f"the tokenizer's chat template did not keep the message {_FIELD} as it is (rendered: {rendered!r}): "
                         "render the conversation yourself and put {text} where the message goes")
    return rendered


def _as_list(messages) -> list:
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise TypeError(f"messages must be a list of {{'role': ..., 'content': ...}} dicts, got {type(messages).__name__}")
    return list(messages)


def _checked_turn(i: int, m) -> dict:
    if not isinstance(m, Mapping) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
        raise TypeError(f"messages[{i}] must be a dict with str 'role' and 'content', got {m!r}")
    return dict(m)
