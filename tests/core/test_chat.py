"""chat_template (aieg_fast.core.chat) and explain --chat: a chat model's conversation held fixed,
only the new user message attributed; bad conversations refused naming the argument."""
from __future__ import annotations

import json
import re

import pytest

import aieg_fast
from aieg_fast import cli
from aieg_fast.cli import explain as cli_explain
from builders import make_tiny_llama

#: a ChatML-like template (SmolLM2's and Qwen's kind), set on the tiny tokenizer; role names are
#: words of the tiny vocabulary, which has no newline
CHATML = ("{% for m in messages %}<s>{{ {'system': 'a', 'user': 'the', 'assistant': 'it'}[m['role']] }} "
          "{{ m['content'] }}</s>{% endfor %}{% if add_generation_prompt %}<s>it {% endif %}")


@pytest.fixture(scope="module")
def chat_ex():
    m, t = make_tiny_llama()
    t.chat_template = CHATML
    return aieg_fast.load_model(m, t)


def test_the_conversation_is_held_fixed_and_the_message_attributed(chat_ex):
    history = [{"role": "user", "content": "great"}, {"role": "assistant", "content": "bad"}]
    tpl = aieg_fast.chat_template(chat_ex, history, system="slow")
    expected = chat_ex.tokenizer.apply_chat_template(
        [{"role": "system", "content": "slow"}, *history, {"role": "user", "content": "{text}"}], tokenize=False,
        add_generation_prompt=True)
    assert tpl == expected and tpl.count("{text}") == 1 and tpl.endswith("<s>it ")
    res = chat_ex.attribute("the movie is good", template=tpl, method="saliency")
    prompt, msg = tpl.replace("{text}", "the movie is good"), "the movie is good"
    start = prompt.index(msg)
    spans = [o for o, a in zip(res.offsets, res.attributable) if a]
    assert all(start - 1 <= s and e <= start + len(msg) for s, e in spans)  # nothing of the template attributed (a token may hold the space before the message)
    assert "".join(prompt[s:e] for s, e in spans).replace(" ", "") == "themovieisgood"  # the whole message


def test_explain_chat_wraps_the_text_in_the_chat_template(chat_ex, tmp_path, monkeypatch):
    monkeypatch.setattr(cli_explain, "load_model", lambda model=None, **placement: chat_ex)
    out = tmp_path / "r.json"
    assert cli.main(["explain", "the movie is good", "--chat", "--system", "slow", "--method", "saliency",
                     "--no-progress", "--json", str(out)]) == 0
    saved = json.loads(out.read_text())
    tpl = aieg_fast.chat_template(chat_ex, system="slow")
    assert saved["text"] == tpl.replace("{text}", "the movie is good")
    assert sum(saved["attributable"]) < len(saved["attributable"]) // 2  # the template's tokens held fixed


@pytest.mark.parametrize("argv, match", [
    (["--chat", "--template", "Q: {text} A:"], "--chat wraps the text .* not with --template or --task"),
    (["--chat", "--task", "sentiment"], "--chat wraps the text .* not with --template or --task"),
    (["--system", "be brief"], "--system is the system message of --chat"),
])
def test_explain_chat_option_errors_before_the_model_loads(argv, match, monkeypatch, capsys):
    monkeypatch.setattr(cli_explain, "load_model", lambda *a, **k: pytest.fail("the model was loaded"))
    assert cli.main(["explain", "the movie is good", *argv]) == 2
    assert re.search(match, capsys.readouterr().err)


@pytest.mark.parametrize("kw, err, match", [
    (dict(messages={"role": "user", "content": "hi"}), TypeError, r"messages must be a list of .* got dict"),
    (dict(messages=[{"role": "user"}]), TypeError, r"messages\[0\] must be a dict with str 'role' and 'content'"),
    (dict(messages=[{"role": "user", "content": "what does {x} do?"}]), ValueError,
     r"messages\[0\]\['content'\] holds '\{x\}', which a template reads as a field"),
    (dict(system="use {text}"), ValueError, r"system holds '\{text\}'"),
    (dict(system="a", messages=[{"role": "system", "content": "b"}]), ValueError, "system is given and messages\\[0\\] is a system turn"),
    (dict(system=3), TypeError, "system must be a str or None, got int"),
    (dict(add_generation_prompt="yes"), TypeError, "add_generation_prompt must be a bool"),
])
def test_bad_conversations_are_refused_naming_the_argument(chat_ex, kw, err, match):
    with pytest.raises(err, match=match):
        aieg_fast.chat_template(chat_ex, **kw)


def test_a_conversation_the_chat_template_refuses_is_a_value_error(tiny_llama):
    """A template that refuses a conversation (Gemma's and Mistral's refuse a system turn) raised
    jinja's TemplateError: explain --chat --system ended in a traceback, not 'error: ...'."""
    m, t = make_tiny_llama()
    t.chat_template = ("{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
                       "{% for m in messages %}{{ m['content'] }}{% endfor %}")
    with pytest.raises(ValueError, match="the tokenizer's chat template refused this conversation: System role not supported"):
        aieg_fast.chat_template(t, system="slow")
    assert aieg_fast.chat_template(t) == "{text}"


def test_a_tokenizer_without_a_chat_template_is_refused(tiny_llama):
    with pytest.raises(ValueError, match="has no chat template"):
        aieg_fast.chat_template(tiny_llama.tokenizer)
    with pytest.raises(TypeError, match="tokenizer must be a Hugging Face tokenizer or an Explainer, got str"):
        aieg_fast.chat_template("ChatML")


def test_the_embedded_chat_model_attributes_only_the_message(smollm):
    """SmolLM2-135M-Instruct's own chat template (with its default system prompt): of the rendered
    conversation only the user's words are attributable."""
    tpl = aieg_fast.chat_template(smollm)
    text = "What is the capital of France?"
    res = smollm.attribute(text, template=tpl, method="saliency")
    prompt = tpl.replace("{text}", text)
    start = prompt.index(text)
    spans = [o for o, a in zip(res.offsets, res.attributable) if a]
    assert spans and all(start <= s and e <= start + len(text) for s, e in spans)
    assert sum(res.attributable) == len(smollm.tokenizer(text, add_special_tokens=False)["input_ids"])
