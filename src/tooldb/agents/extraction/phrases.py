"""Free-text values: the phrase after a parameter's cue word, the words after a colon,
the rest of a sentence for a text parameter, and the command a task says to run."""

from __future__ import annotations

import re
from typing import Any

from .switches import ABLATED
from .text import STOPWORDS, Param, content_stems, stem
from .values import Span, unlabelled

TEXT_CUES = ("text", "query", "message", "content", "prompt", "question", "sentence", "input",
              "keyword", "search", "term", "statement", "answer")  # fmt: skip
_PHRASE_STOP = re.compile(
    r"[,.;:!?()\"]|\b(?:and|or|but|with|from|to|in|on|at|for|by|of|that|which|who|if|"
    r"when|where|using|based|within|between|into|after|before|during|than)\b",
    re.IGNORECASE,
)


COMMANDS = "commands"
_COMMAND = re.compile(
    r"\b(using|use|run|execute)\s+(?:the\s+)?(?:(?:command|instruction)\s+(?:called\s+|named\s+)?)?"
    r"(?!the\b|a\b|an\b|my\b|your\b|it\b|this\b)(\S.*?)"
    r"(?:\s+(?:command|instruction))?(?:\s+to\s+\w.*)?\s*[.?!]?\s*$",
    re.IGNORECASE,
)


def command_after(task: str, param: Param) -> Span | None:
    """For a parameter that takes a shell command, the words after "using"/"use"/"run"
    to the end of the sentence ("check the version using docker --version", "use docker ps
    to find out"), "the echo %date% command" without "command"."""
    names = {w.lower() for w in param.name_words}
    if param.kind not in {"string", "any"} or not names & {"command", "cmd", "instruction"}:
        return None
    m = _COMMAND.search(task)
    if m is None:
        return None
    value = m.group(2).strip()
    return Span(m.start(2), m.start(2) + len(value), "phrase", value, value, unit=m.group(1))


TEXT_TAIL = "text_tail"
_SENTENCE_END = re.compile(r"[.?!;]\s|[.?!;]?$|\n")
_AFTER_COLON = re.compile(r":\s*([^:\n]*\w[^:\n]*?)[\s.?!]*$")


def _text_named(param: Param, word: str) -> bool:
    """Whether ``word`` is part of the name of a parameter that asks for free text: its
    value then runs to the end of the sentence ("add todo with content go to sleep at
    9 pm"), prepositions and all."""
    named = {stem(w) for w in param.name_words}
    return TEXT_TAIL not in ABLATED and stem(word) in named and _asks_text(param)


def _asks_text(param: Param) -> bool:
    """Whether the parameter's own name asks for free text ("content", "message")."""
    return bool({stem(w) for w in param.name_words} & {stem(c) for c in TEXT_CUES})


def after_colon(task: str, param: Param) -> Span | None:
    """The words after the task's last colon, for a parameter that asks for text ("create
    a todo with these words: go shopping at 9 pm")."""
    m = _AFTER_COLON.search(task)
    if TEXT_TAIL in ABLATED or not _asks_text(param) or m is None:
        return None
    value = m.group(1).strip().strip("'\"")
    if len(value.split()) < 2:
        return None
    return Span(m.start(1), m.end(1), "phrase", value, value, unit=":")


def cue_phrase(task: str, param: Param, topic: set[str], free: Any) -> Span | None:
    """The words after the parameter's cue word ("the company Google", "genre: jazz"),
    up to the next preposition or punctuation; topic words alone are no value."""
    for m in re.finditer(r"[A-Za-z][\w'-]*", task):
        if stem(m.group(0)) not in param.cue_stems or m.group(0).lower() in STOPWORDS:
            continue
        rest = task[m.end() :]
        lead = re.match(r"\s*(?:(?:of|is|are|=|:|named|called|for|about|on|the|a|an|as)\s+)*", rest)
        offset = m.end() + (lead.end() if lead else 0)
        tail = _text_named(param, m.group(0))
        stop = (_SENTENCE_END if tail else _PHRASE_STOP).search(task, offset)
        end = stop.start() if stop else len(task)
        phrase = task[offset:end].strip()
        chunk = phrase.split()[: None if tail else 5]
        if not chunk or all(w.lower() in STOPWORDS for w in chunk):
            continue
        if content_stems(" ".join(chunk)) <= topic | param.cue_stems:
            continue
        value = " ".join(chunk).strip("'\"")
        span = Span(offset, offset + len(" ".join(chunk)), "phrase", value, value, unit=m.group(0))
        span = unlabelled(span)
        if free(span):
            return span
    return None
