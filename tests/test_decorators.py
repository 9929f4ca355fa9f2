"""``@tool``: a function becomes a ToolSpec from its signature, hints and docstring."""

from __future__ import annotations

import asyncio
import datetime
import enum
import functools
import inspect
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel, Field, create_model

import tooldb
from tests import sample_tools
from tooldb import ArgumentError, Binder, DefinitionError, Returns, ToolKind, ToolSpec, tool
from tooldb.decorators import (
    SPEC_ATTRIBUTE,
    parse_docstring,
    schema_for_hint,
    spec_from_function,
    tools_of_module,
)


def params(func: Any) -> dict[str, Any]:
    parameters: dict[str, Any] = spec_from_function(func).parameters
    return parameters


# -- the decorator -------------------------------------------------------------------


def test_sample_tool_spec() -> None:
    spec = getattr(sample_tools.add, SPEC_ATTRIBUTE)
    assert spec == ToolSpec(
        name="add",
        description="Add two integers.",
        category="math",
        kind=ToolKind.PYTHON,
        target="tests.sample_tools:add",
        parameters={
            "type": "object",
            "properties": {
                "a": {"type": "integer", "description": "First addend."},
                "b": {"type": "integer", "description": "Second addend.", "default": 1},
            },
            "required": ["a"],
            "additionalProperties": False,
        },
        returns=Returns.SCALAR,
    )


def test_decorated_function_stays_callable_unchanged() -> None:
    assert sample_tools.add(2, 3) == 5
    assert sample_tools.add(a=2) == 3
    assert sample_tools.add.__name__ == "add"
    assert sample_tools.add.__doc__ is not None and "Add two integers" in sample_tools.add.__doc__


def plain(x: int) -> int:
    """Double it."""
    return 2 * x


def test_tool_returns_the_same_function() -> None:
    def local(x: int) -> int:
        return x

    assert tool(local) is local
    assert tool(category="c")(local) is local
    assert getattr(local, SPEC_ATTRIBUTE).category == "c"


def test_decorator_overrides() -> None:
    @tool(
        name="double it",
        description="Override.",
        category="math",
        returns="json",
        timeout_s=2.5,
        metadata={"owner": "ops"},
    )
    def double(x: int) -> int:
        """Ignored description."""
        return 2 * x

    spec = getattr(double, SPEC_ATTRIBUTE)
    assert (spec.name, spec.description, spec.category) == ("double it", "Override.", "math")
    assert spec.returns is Returns.JSON
    assert spec.timeout_s == 2.5
    assert spec.metadata == {"owner": "ops"}
    assert double(4) == 8


def test_empty_description_override_is_kept() -> None:
    assert spec_from_function(plain, description="").description == ""


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"returns": "bogus"}, "'bogus' is not a valid Returns"),
        ({"timeout_s": -1}, "timeout_s"),
        ({"name": " padded "}, "leading or trailing whitespace"),
        ({"name": "bad\x00name"}, "control or invisible characters"),
        ({"category": ""}, "category must be a non-empty string"),
    ],
)
def test_invalid_overrides_are_definition_errors(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(DefinitionError, match=message) as info:
        spec_from_function(plain, **overrides)
    assert str(info.value).startswith("@tool plain: ")


async def fetch(url: str, retries: int = 3) -> str:
    """Fetch a URL.

    Args:
        url: Where to go.
        retries: How often to retry.
    """
    await asyncio.sleep(0)
    return url


def test_async_functions() -> None:
    decorated = tool(fetch)
    spec = getattr(decorated, SPEC_ATTRIBUTE)
    assert inspect.iscoroutinefunction(decorated)
    assert spec.returns is Returns.TEXT
    assert spec.parameters["properties"]["retries"] == {
        "type": "integer",
        "description": "How often to retry.",
        "default": 3,
    }
    assert spec.parameters["required"] == ["url"]
    assert asyncio.run(decorated("u")) == "u"


def test_sample_async_tool_runs_through_a_registry(sqlite_url: str) -> None:
    with tooldb.open(sqlite_url) as registry:
        registry.add_module("tests.sample_tools")
        result = registry.call("sleep_async", {"seconds": "0"})
    assert result.success, result.error
    assert result.data == "slept"


# -- parameters from hints -------------------------------------------------------------


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Point(BaseModel):
    """A point."""

    x: int
    y: int = 0


class Shape(BaseModel):
    name: str
    corners: list[Point]
    origin: Point


@pytest.mark.parametrize(
    ("hint", "schema"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (type(None), {"type": "null"}),
        (Any, {}),
        (list, {"type": "array"}),
        (dict, {"type": "object"}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (
            list[list[str]],
            {"type": "array", "items": {"type": "array", "items": {"type": "string"}}},
        ),
        (Sequence[float], {"type": "array", "items": {"type": "number"}}),
        (set[str], {"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
        (frozenset[int], {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}),
        (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
        (
            tuple[int, str],
            {
                "type": "array",
                "prefixItems": [{"type": "integer"}, {"type": "string"}],
                "minItems": 2,
                "maxItems": 2,
            },
        ),
        (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
        (dict[str, Any], {"type": "object"}),
        (Mapping[str, bool], {"type": "object", "additionalProperties": {"type": "boolean"}}),
        (Optional[int], {"type": ["integer", "null"]}),  # noqa: UP045 - the typing spelling
        (int | None, {"type": ["integer", "null"]}),
        (Union[int, str], {"type": ["integer", "string"]}),  # noqa: UP007 - the typing spelling
        (
            list[int] | None,
            {"anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "null"}]},
        ),
        (Literal["a", "b"], {"enum": ["a", "b"], "type": "string"}),
        (Literal[1, 2], {"enum": [1, 2], "type": "integer"}),
        (Literal[1, 2.5], {"enum": [1, 2.5], "type": "number"}),
        (Literal["a", 1], {"enum": ["a", 1]}),
        (Color, {"enum": ["red", "green"], "type": "string"}),
        (Level, {"enum": [1, 2], "type": "integer"}),
        (Annotated[str, "The query."], {"type": "string", "description": "The query."}),
        (
            Annotated[int, "Count", "of items."],
            {"type": "integer", "description": "Count of items."},
        ),
        (
            Annotated[int, Field(ge=1, description="At least one.")],
            {"type": "integer", "minimum": 1, "description": "At least one."},
        ),
        (Annotated[int, {"unhashable": "metadata"}], {"type": "integer"}),
        (datetime.date, {"type": "string", "format": "date"}),
    ],
)
def test_schema_for_hint(hint: Any, schema: dict[str, Any]) -> None:
    assert schema_for_hint(hint) == schema
    Draft202012Validator.check_schema(schema_for_hint(hint))


def test_schema_for_pydantic_model() -> None:
    schema = schema_for_hint(Point)
    assert schema["type"] == "object"
    assert schema["properties"]["x"]["type"] == "integer"
    assert schema["required"] == ["x"]
    assert schema["description"] == "A point."


def test_unsupported_type_is_a_definition_error_naming_the_parameter() -> None:
    class Opaque:
        pass

    def uses(thing: Opaque) -> None:
        """Take something pydantic cannot describe."""

    uses.__annotations__["thing"] = Opaque  # resolvable without the module globals
    with pytest.raises(DefinitionError, match=r"@tool .*uses: parameter 'thing': cannot describe"):
        spec_from_function(uses)


def everything(
    text: str,
    count: int,
    ratio: float,
    flag: bool,
    tags: list[str],
    weights: dict[str, float],
    maybe: int | None,
    mode: Literal["fast", "slow"],
    color: Color,
    query: Annotated[str, "What to look for."],
    limit: int = 10,
    color_default: Color = Color.GREEN,
    pair: tuple[int, int] = (0, 1),
    nothing: int = None,  # type: ignore[assignment]  # noqa: RUF013 - the case under test
    opaque: object = object(),
    ratio_nan: float = float("nan"),
    *args: int,
    keyword_only: bool = False,
    **extra: Any,
) -> list[dict[str, Any]]:
    """Exercise every supported hint."""
    return []


def test_parameters_from_every_kind_of_hint() -> None:
    spec = spec_from_function(everything)
    props = spec.parameters["properties"]
    assert spec.parameters["required"] == [
        "text", "count", "ratio", "flag", "tags", "weights", "maybe", "mode", "color", "query",
    ]  # fmt: skip
    assert props["maybe"] == {"type": ["integer", "null"]}
    assert props["mode"] == {"enum": ["fast", "slow"], "type": "string"}
    assert props["query"] == {"type": "string", "description": "What to look for."}
    assert props["limit"] == {"type": "integer", "default": 10}
    assert props["color_default"]["default"] == "green"
    assert props["pair"]["default"] == [0, 1]  # JSON, not a tuple
    # None does not fit `int`: no default in the schema, the function's own applies.
    assert props["nothing"] == {"type": "integer"}
    assert props["opaque"] == {}  # not JSON: left to the function
    assert props["ratio_nan"] == {"type": "number"}
    assert props["keyword_only"] == {"type": "boolean", "default": False}
    assert "args" not in props and "extra" not in props
    assert spec.parameters["additionalProperties"] is True  # **extra
    assert spec.returns is Returns.TABLE
    json.dumps(spec.parameters, allow_nan=False)  # storable as JSON


def test_defaults_bind_and_none_defaults_are_left_to_the_function() -> None:
    binder = Binder("everything", spec_from_function(everything).parameters)
    bound = binder.bind(
        {
            "text": "t", "count": "2", "ratio": "0.5", "flag": "true", "tags": [], "weights": {},
            "maybe": None, "mode": "fast", "color": "red", "query": "q", "anything": "goes",
        }
    )  # fmt: skip
    assert bound["count"] == 2 and bound["ratio"] == 0.5 and bound["flag"] is True
    assert bound["limit"] == 10 and "nothing" not in bound
    assert bound["anything"] == "goes"
    with pytest.raises(ArgumentError, match="parameter 'color' expected one of"):
        binder.bind({**bound, "color": "blue"})


def draw(shape: Shape, points: list[Point], anchor: Point | None = None) -> dict[str, Any]:
    """Nested pydantic models share their $defs."""
    return {}


def test_nested_pydantic_models_resolve() -> None:
    schema = params(draw)
    assert set(schema["$defs"]) == {"Point"}  # hoisted from inside the Shape schema
    assert schema["properties"]["shape"]["properties"]["origin"] == {"$ref": "#/$defs/Point"}
    assert schema["properties"]["anchor"]["anyOf"][1] == {"type": "null"}
    binder = Binder("draw", schema)
    good = {"shape": {"name": "sq", "corners": [{"x": 1}], "origin": {"x": 0}}, "points": []}
    assert binder.bind(good) == {**good, "anchor": None}
    with pytest.raises(ArgumentError) as info:
        binder.bind(
            {"shape": {"name": "sq", "corners": [{"x": "one"}], "origin": {}}, "points": []}
        )
    text = str(info.value)
    assert "parameter 'shape.corners[0].x' expected integer, got string \"one\"" in text
    assert "missing required parameter 'shape.origin.x' (integer)" in text


def shapes_with_default(
    shapes: list[Shape] = [  # noqa: B006 - never mutated
        Shape(name="dot", corners=[], origin=Point(x=0)),
    ],
    first: Shape | None = None,
) -> int:
    """A list of nested models with a default."""
    return len(shapes)


def test_list_of_nested_models_with_a_default() -> None:
    schema = params(shapes_with_default)
    assert set(schema["$defs"]) == {"Point"}
    assert schema["properties"]["shapes"]["items"]["title"] == "Shape"
    assert "default" not in schema["properties"]["shapes"]  # a model instance is not JSON
    assert schema["properties"]["first"]["default"] is None
    assert Binder("s", schema).bind({"shapes": [{"name": "a", "corners": [], "origin": {"x": 1}}]})


def test_two_different_models_with_one_name_are_rejected() -> None:
    inner_a = create_model("Inner", a=(int, ...))
    inner_b = create_model("Inner", b=(str, ...))

    def clash(x: Any, y: Any) -> None:
        """Two models named Inner."""

    clash.__annotations__ = {
        "x": create_model("OuterA", inner=(inner_a, ...)),
        "y": create_model("OuterB", inner=(inner_b, ...)),
        "return": None,
    }
    with pytest.raises(DefinitionError, match="two different types are both named 'Inner'"):
        spec_from_function(clash)


def takes_model(point: Point) -> int:
    """Take a model."""
    return point.x


def test_single_pydantic_model_parameter() -> None:
    schema = params(takes_model)
    assert schema["properties"]["point"]["properties"]["x"]["type"] == "integer"
    with pytest.raises(ArgumentError, match=r"missing required parameter 'point\.x'"):
        Binder("takes_model", schema).bind({"point": {}})


def positional_only(x: int, /, y: int) -> int:
    return x + y


def test_positional_only_parameters_are_rejected() -> None:
    with pytest.raises(DefinitionError, match="parameter 'x' is positional-only"):
        spec_from_function(positional_only)


def unresolvable(x: NotDefinedAnywhere) -> None:  # type: ignore[name-defined]  # noqa: F821
    """Broken hint."""


def test_unresolvable_hints_are_definition_errors() -> None:
    with pytest.raises(DefinitionError, match="cannot resolve type hints"):
        spec_from_function(unresolvable)


def untyped(a, b=2):  # type: ignore[no-untyped-def]
    """No hints at all."""
    return a


def test_untyped_parameters_accept_anything() -> None:
    spec = spec_from_function(untyped)
    assert spec.parameters["properties"] == {"a": {}, "b": {"default": 2}}
    assert spec.returns is Returns.JSON  # no annotation: nothing known about the result


class Service:
    def lookup(self, key: str) -> str:
        """Look a key up."""
        return key

    @classmethod
    def build(cls, size: int) -> int:
        """Build one."""
        return size


def test_methods_skip_self_and_cls() -> None:
    assert list(params(Service().lookup)["properties"]) == ["key"]
    assert list(params(Service.lookup)["properties"]) == ["key"]
    assert list(params(Service.build)["properties"]) == ["size"]
    assert spec_from_function(Service.lookup).target == "tests.test_decorators:Service.lookup"


class Callable_:
    """A callable object."""

    def __call__(self, n: int) -> int:
        return n


@pytest.mark.parametrize("thing", [Callable_(), functools.partial(plain, 1), Callable_])
def test_non_functions_are_rejected_clearly(thing: Any) -> None:
    with pytest.raises(DefinitionError, match="@tool needs a function or method, got a"):
        spec_from_function(thing)


# -- returns ---------------------------------------------------------------------------


def r_none() -> None: ...
def r_str() -> str: ...
def r_int() -> int: ...
def r_float() -> float: ...
def r_bool() -> bool: ...
def r_dict() -> dict[str, int]: ...
def r_rows() -> list[dict[str, Any]]: ...
def r_bare_rows() -> list[dict]: ...  # type: ignore[type-arg]
def r_list() -> list[int]: ...
def r_optional() -> int | None: ...
def r_annotated() -> Annotated[str, "the answer"]: ...
def r_model() -> Point: ...
def r_missing(): ...  # type: ignore[no-untyped-def]


@pytest.mark.parametrize(
    ("func", "returns"),
    [
        (r_none, Returns.NONE),
        (r_str, Returns.TEXT),
        (r_int, Returns.SCALAR),
        (r_float, Returns.SCALAR),
        (r_bool, Returns.SCALAR),
        (r_dict, Returns.JSON),
        (r_rows, Returns.TABLE),
        (r_bare_rows, Returns.TABLE),
        (r_list, Returns.JSON),
        (r_optional, Returns.JSON),
        (r_annotated, Returns.TEXT),
        (r_model, Returns.JSON),
        (r_missing, Returns.JSON),
    ],
)
def test_returns_from_the_annotation(func: Any, returns: Returns) -> None:
    assert spec_from_function(func).returns is returns


# -- docstrings ------------------------------------------------------------------------


GOOGLE = """Search the catalogue.

Finds items by free text; results are ranked.

Args:
    query (str): What to look for.
    limit (int, optional): How many results
        to return, at most.
    filters (dict(str, str)): Field filters (exact match).
    *args: Extra positional values.
    **kwargs: Passed through.

Returns:
    list: The hits.

Raises:
    ValueError: if query is empty.
"""


def test_google_docstring() -> None:
    description, docs = parse_docstring(GOOGLE)
    assert description == "Search the catalogue.\n\nFinds items by free text; results are ranked."
    assert docs == {
        "query": "What to look for.",
        "limit": "How many results to return, at most.",
        "filters": "Field filters (exact match).",
        "args": "Extra positional values.",
        "kwargs": "Passed through.",
    }


def test_google_continuation_that_looks_like_a_parameter() -> None:
    doc = "Do it.\n\nArgs:\n    mode: How to run.\n        Note: slow on Tuesdays.\n    size: B.\n"
    assert parse_docstring(doc)[1] == {"mode": "How to run. Note: slow on Tuesdays.", "size": "B."}


def test_google_section_ends_at_dedent() -> None:
    doc = "Sum.\n\nArgs:\n    a: First.\n\nTrailing prose is not part of a.\n"
    assert parse_docstring(doc) == ("Sum.", {"a": "First."})


@pytest.mark.parametrize("header", ["Arguments", "Parameters", "Params", "Keyword Args"])
def test_google_section_names(header: str) -> None:
    assert parse_docstring(f"Sum.\n\n{header}:\n    a: First.\n") == ("Sum.", {"a": "First."})


def test_other_sections_do_not_leak_into_the_description() -> None:
    doc = "Sum.\n\nExample:\n    >>> add(1, 2)\n\nNote:\n    Fast.\n\nSee Also:\n    sub\n"
    assert parse_docstring(doc) == ("Sum.", {})


REST = """Resize an image.

:param path: Where the image is.
:param int width: Target width
    in pixels.
:type width: int
:param height: Target height.
:returns: The new path.
:raises OSError: when unreadable.
"""


def test_rest_docstring() -> None:
    description, docs = parse_docstring(REST)
    assert description == "Resize an image."
    assert docs == {
        "path": "Where the image is.",
        "width": "Target width in pixels.",
        "height": "Target height.",
    }


NUMPY = """Resample a series.

Markdown Heading
---
Only known NumPy titles start a section.

Parameters
----------
values : list of float
    The samples,
    oldest first.
rate : int, optional
    Samples per second.
*args
    Ignored.

Returns
-------
list of float
    The resampled series.

Examples
--------
>>> resample([1.0], 2)
"""


def test_numpy_docstring() -> None:
    description, docs = parse_docstring(NUMPY)
    assert description == (
        "Resample a series.\n\nMarkdown Heading\n---\nOnly known NumPy titles start a section."
    )
    assert docs == {
        "values": "The samples, oldest first.",
        "rate": "Samples per second.",
        "args": "Ignored.",
    }


@pytest.mark.parametrize("doc", ["", "   ", "\n\n"])
def test_empty_docstring(doc: str) -> None:
    assert parse_docstring(doc) == ("", {})


def documented(path: str, width: int, height: int = 0) -> str:
    """Resize an image.

    :param path: Where the image is.
    :param int width: Target width
        in pixels.
    :param height: Target height.
    """
    return path


def no_docstring(x: int) -> int:
    return x


def test_docstrings_feed_the_spec() -> None:
    spec = spec_from_function(documented)
    assert spec.description == "Resize an image."
    assert spec.parameters["properties"]["width"]["description"] == "Target width in pixels."
    assert spec_from_function(no_docstring).description == ""


def annotated_and_documented(q: Annotated[str, "From Annotated."]) -> str:
    """Search.

    Args:
        q: From the docstring.
    """
    return q


def test_annotated_description_wins_over_the_docstring() -> None:
    assert params(annotated_and_documented)["properties"]["q"]["description"] == "From Annotated."


# -- modules ---------------------------------------------------------------------------


def test_tools_of_module() -> None:
    found = tools_of_module("tests.sample_tools")
    names = [spec.name for spec, _ in found]
    assert names == sorted(names)
    assert {"add", "echo", "noop", "fail", "sleep_async"} <= set(names)
    spec, func = dict((s.name, (s, f)) for s, f in found)["add"]
    assert func is sample_tools.add and spec.target == "tests.sample_tools:add"


def write_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, source: str) -> str:
    (tmp_path / f"{name}.py").write_text(source, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return name


def test_tools_of_module_ignores_aliases_and_plain_functions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = write_module(
        tmp_path,
        monkeypatch,
        "tooldb_alias_mod",
        "from tooldb import tool\n"
        "@tool\ndef one(x: int) -> int:\n    return x\n"
        "alias = one\n"
        "def plain(x: int) -> int:\n    return x\n",
    )
    assert [spec.name for spec, _ in tools_of_module(name)] == ["one"]


def test_tools_of_module_rejects_two_functions_with_one_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = write_module(
        tmp_path,
        monkeypatch,
        "tooldb_dupe_mod",
        "from tooldb import tool\n"
        "@tool(name='same')\ndef one(x: int) -> int:\n    return x\n"
        "@tool(name='same')\ndef two(x: int) -> int:\n    return x\n",
    )
    with pytest.raises(DefinitionError, match="tool name 'same' is used by both"):
        tools_of_module(name)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("raise RuntimeError('boom at import')\n", "RuntimeError: boom at import"),
        ("def broken(:\n", "SyntaxError"),
        ("import tooldb_module_that_does_not_exist\n", "ModuleNotFoundError"),
    ],
)
def test_modules_failing_on_import_are_definition_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, message: str
) -> None:
    name = write_module(tmp_path, monkeypatch, "tooldb_broken_mod", source)
    with pytest.raises(
        DefinitionError, match=f"cannot import module 'tooldb_broken_mod': .*{message}"
    ):
        tools_of_module(name)


def test_missing_module_is_a_definition_error() -> None:
    with pytest.raises(DefinitionError, match="cannot import module 'no_such_module_xyz'"):
        tools_of_module("no_such_module_xyz")


# -- hostile names, end to end -----------------------------------------------------------

HOSTILE = ["it's", 'say "hi"', "a;b", "'; DROP TABLE tools; --", "naïve 名前", "🔧 wrench"]


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_tool_names_and_arguments_round_trip(sqlite_url: str, name: str) -> None:
    def echo(text: str, times: int = 1) -> str:
        """Repeat the text."""
        return text * times

    with tooldb.open(sqlite_url) as registry:
        record = registry.add_function(echo, name=name, description=name, category=name)
        assert (record.name, record.spec.description, record.spec.category) == (name, name, name)
        result = registry.call(name, {"text": name, "times": "2"})
        assert result.success and result.data == name * 2
        assert registry.get(name).spec.description == name
        assert [t.name for t in registry.list()] == [name]
