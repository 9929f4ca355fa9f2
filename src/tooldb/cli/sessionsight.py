"""``tooldb sessionsight extract|ask|summarize``: the sessionsight pack's agents with the
pack's guarantees (a partial extraction is never empty, affirmed risk is flagged,
citations are checked). Exit 0 when the result needs no review, 1 when it does."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from .app import JsonOpt, _errors, _out, _print_json, _registry, _text, app

sessionsight_app = typer.Typer(
    help="The sessionsight pack's agents (install it with `tooldb add pack sessionsight`).",
    no_args_is_help=True,
)
app.add_typer(sessionsight_app, name="sessionsight")

ModelOpt = Annotated[
    str | None, typer.Option(help="provider:model (e.g. openai:gpt-4o-mini); default: the setting.")
]


def _finish(result: dict[str, Any], as_json: bool, body: str) -> None:
    if as_json:
        _print_json(result)
    else:
        _out.print(_text(body))
        if result["requires_review"]:
            _out.print(_text("REVIEW: " + "; ".join(result["review_reasons"])))
    if result["requires_review"]:
        raise typer.Exit(1)


@sessionsight_app.command()
def extract(
    session_id: Annotated[str, typer.Argument(help="The session, like P01-S3.")],
    model: ModelOpt = None,
    tool_choice: Annotated[
        str | None, typer.Option(help="auto | required | required:TOOL | none (first turn).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Extract a session's note into the pack's schema, with per-field confidence."""
    from ..packs.sessionsight.runner import extract as run_extract

    with _registry(as_json) as registry, _errors():
        result = run_extract(registry, session_id, model=model, tool_choice=tool_choice)
    body = (
        f"session {session_id}: {result['status']} "
        f"({len(result['completed_sections'])}/9 sections: "
        f"{', '.join(result['completed_sections'])}); run {result['run_id']}"
    )
    _finish(result, as_json, body)


@sessionsight_app.command()
def ask(
    question: Annotated[list[str], typer.Argument(help="The clinician's question.")],
    patient: Annotated[str | None, typer.Option(help="The patient, like P03.")] = None,
    model: ModelOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Answer a question about the sessions, citing the sessions it rests on."""
    from ..packs.sessionsight.runner import ask as run_ask

    with _registry(as_json) as registry, _errors():
        result = run_ask(registry, " ".join(question), patient_id=patient, model=model)
    cited = ", ".join(c["session_id"] for c in result["citations"]) or "none"
    _finish(result, as_json, f"{result['answer']}\n\ncited: {cited}")


@sessionsight_app.command()
def summarize(
    patient: Annotated[str, typer.Argument(help="The patient, like P06.")],
    model: ModelOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Summarize a patient's course: trend, what works, what changed."""
    from ..packs.sessionsight.runner import summarize as run_summarize

    with _registry(as_json) as registry, _errors():
        result = run_summarize(registry, patient, model=model)
    cited = ", ".join(c["session_id"] for c in result["citations"]) or "none"
    _finish(result, as_json, f"{result['answer']}\n\ncited: {cited}")
