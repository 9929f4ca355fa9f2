"""Arguments from plain language (agents/extraction): each kind of value, the evidence
that ties a value to a parameter, several calls, and the honest decline."""

from __future__ import annotations

from typing import Any

import pytest

from tooldb.agents.extraction import Offered, extract_arguments, find_spans, plan_calls


def schema(required: list[str] | None = None, **props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required or list(props)}


INT = {"type": "integer"}
NUM = {"type": "number"}
STR = {"type": "string"}


def args(task: str, spec: dict[str, Any]) -> dict[str, Any]:
    return extract_arguments(task, spec).arguments


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        ("five trees", "word number", 5),
        ("twenty five apples", "word number", 25),
        ("a budget of $1,250.50", "number", 1250.5),
        ("2 million people", "number", 2_000_000),
        ("on 2024-03-01", "date", "2024-03-01"),
        ("on March 1, 2024", "date", "2024-03-01"),
        ("on 1st of March 2024", "date", "2024-03-01"),
        ("at 3:30 pm", "time", "15:30"),
        ("at 18:05", "time", "18:05"),
        ("mail bob@example.org now", "email", "bob@example.org"),
        ("see https://example.org/a?b=1.", "url", "https://example.org/a?b=1"),
        ("read /var/log/syslog", "path", "/var/log/syslog"),
        ("open C:/data/cars.csv", "path", "C:/data/cars.csv"),
        ("set it to true", "boolean", True),
        ("say 'hello there'", "quoted", "hello there"),
        ("fly to New York, NY tomorrow", "name", "New York, NY"),
        ("the function 3x^2 + 2x - 1", "expression", "3x^2 + 2x - 1"),
        ("use dataset my_data_set", "identifier", "my_data_set"),
    ],
)
def test_each_kind_of_value_is_found(text: str, kind: str, value: Any) -> None:
    spans = find_spans(text)
    assert [(s.kind, s.value) for s in spans if s.kind == kind] == [(kind, value)]


def test_quantities_keep_their_unit_and_a_relative_date_is_a_date() -> None:
    spans = find_spans("walk 5 km in 2 hours, then 100g of sugar, tomorrow")
    assert [(s.value, s.unit) for s in spans if s.kind == "number"] == [
        (5, "km"), (2, "hours"), (100, "g"),
    ]  # fmt: skip
    assert [s.kind for s in spans][-1] == "date"


def test_named_values_win_over_order() -> None:
    spec = schema(height=INT, base=INT)
    assert args("a triangle with a base of 10 and height of 5", spec) == {"base": 10, "height": 5}
    assert args("depth=3, width: 4", schema(width=INT, depth=INT)) == {"width": 4, "depth": 3}


def test_a_unit_named_by_the_parameter_ties_the_value() -> None:
    spec = schema(
        duration={"type": "integer", "description": "How long, in years."},
        amount={"type": "number", "description": "Principal in dollars."},
    )
    assert args("invest for 5 years a sum of 2000 dollars", spec) == {"duration": 5, "amount": 2000}


def test_relational_phrases_and_dates() -> None:
    spec = schema(
        start_date={"type": "string", "description": "First day, YYYY-MM-DD."},
        end_date={"type": "string", "description": "Last day, YYYY-MM-DD."},
    )
    got = args("between 2024-03-01 and 2024-01-01", spec)
    assert got == {"start_date": "2024-03-01", "end_date": "2024-01-01"}
    route = schema(origin=STR, destination=STR)
    assert args("drive from the Earth to the Moon", route) == {
        "origin": "Earth",
        "destination": "Moon",
    }


def test_a_date_is_written_in_the_layout_the_description_shows() -> None:
    spec = schema(day={"type": "string", "description": "The date in MM/DD/YYYY format."})
    assert args("book it for March 5, 2024", spec) == {"day": "03/05/2024"}


def test_percent_becomes_a_fraction_only_when_the_description_asks() -> None:
    decimal = schema(rate={"type": "number", "description": "Annual rate as a decimal."})
    plain = schema(rate={"type": "number", "description": "Annual rate in percent."})
    assert args("at an annual rate of 4%", decimal) == {"rate": 0.04}
    assert args("at an annual rate of 4%", plain) == {"rate": 4}


def test_lists_fill_arrays() -> None:
    spec = schema(values={"type": "array", "items": {"type": "number"}})
    assert args("the mean of 1, 2.5 and 10", spec) == {"values": [1, 2.5, 10]}
    names = schema(people={"type": "array", "items": {"type": "string"}})
    assert args("invite Ada Lovelace, Alan Turing and Grace Hopper", names) == {
        "people": ["Ada Lovelace", "Alan Turing", "Grace Hopper"],
    }  # fmt: skip


def test_enum_values_options_in_the_description_and_booleans() -> None:
    spec = schema(
        ["city"],
        city=STR,
        units={"type": "string", "enum": ["metric", "imperial"]},
        phase={"type": "string", "description": "Can be 'melting' or 'freezing'."},
        avoid_tolls={"type": "boolean", "description": "Avoid toll roads."},
    )
    got = args("weather in Oslo in imperial units while melting, with tolls avoided", spec)
    assert got == {"city": "Oslo", "units": "imperial", "phase": "melting", "avoid_tolls": True}
    assert args("a route in Oslo without tolls to avoid", spec)["avoid_tolls"] is False


def test_cue_phrase_and_text_parameters() -> None:
    genre = schema(genre={"type": "string", "description": "The music genre."})
    assert args("find concerts of the genre smooth jazz in town", genre) == {"genre": "smooth jazz"}
    query = schema(query={"type": "string", "description": "The search query."})
    assert args("look up cheap flights", query) == {"query": "look up cheap flights"}


def test_a_url_parameter_takes_only_a_url() -> None:
    spec = schema(url={"type": "string"})
    assert args("fetch the page of Toronto", spec) == {}
    assert args("fetch https://example.org for Toronto", spec) == {"url": "https://example.org"}


def test_every_argument_says_why() -> None:
    found = extract_arguments("a base of 10 on 2024-03-01", schema(base=INT, day=STR))
    assert found.notes["base"].startswith("named") and "2024-03-01" in found.notes["day"]


FIRST = {"type": "string", "description": "The first date, YYYY-MM-DD."}
LAST = {"type": "string", "description": "The last date, YYYY-MM-DD."}
DAYS = Offered(
    "days_between",
    "Count the days from a start date to an end date.",
    schema(start=FIRST, end=LAST),
)
AREA = Offered("circle_area", "Area of a circle.", schema(radius=NUM))
WEATHER = Offered("weather", "Weather forecast for a city.", schema(city=STR))
INVEST = Offered("invest", "Invest an amount in a company.", schema(company=STR, amount=NUM))
WITHDRAW = Offered("withdraw", "Withdraw an amount from a company.",
                   schema(company=STR, amount=NUM))  # fmt: skip


def test_decline_names_the_tool_and_what_is_missing() -> None:
    plan = plan_calls("count the days from 2024-01-01", [DAYS])
    assert plan.calls == [] and plan.tool == "days_between" and plan.missing == ["end"]
    assert plan.arguments == {"start": "2024-01-01"} and "'end'" in plan.declined
    supplied = plan_calls("count the days from 2024-01-01", [DAYS], supplied={"end": "2024-03-01"})
    assert [(c.tool, c.arguments) for c in supplied.calls] == [
        ("days_between", {"start": "2024-01-01", "end": "2024-03-01"}),
    ]  # fmt: skip
    assert supplied.calls[0].why["end"] == "supplied by the caller"


def test_decline_when_no_offered_tool_fits() -> None:
    plan = plan_calls("what is the capital of France?", [AREA, DAYS])
    assert plan.calls == [] and "no offered tool fits" in plan.declined
    assert plan_calls("anything", []).declined


def test_several_calls_of_one_tool_from_a_list_or_a_repeated_parameter() -> None:
    listed = plan_calls("area of circles with radius 3, 5 and 7", [AREA])
    assert [c.arguments for c in listed.calls] == [{"radius": 3}, {"radius": 5}, {"radius": 7}]
    cities = plan_calls("weather forecast for Berlin and Madrid", [WEATHER])
    assert [c.arguments for c in cities.calls] == [{"city": "Berlin"}, {"city": "Madrid"}]
    repeated = plan_calls("area of a circle with a radius of 2, and then one with a radius of 4",
                          [AREA])  # fmt: skip
    assert [c.arguments for c in repeated.calls] == [{"radius": 2}, {"radius": 4}]
    pair = plan_calls("count the days between 2024-01-01 and 2024-03-01", [DAYS])
    assert len(pair.calls) == 1  # "between X and Y" is a range, not a list


def test_several_tools_when_parts_of_the_task_fit_different_tools() -> None:
    plan = plan_calls("Invest $2000 in Google and withdraw $1000 from Apple", [WITHDRAW, INVEST])
    assert [(c.tool, c.arguments) for c in plan.calls] == [
        ("invest", {"company": "Google", "amount": 2000}),
        ("withdraw", {"company": "Apple", "amount": 1000}),
    ]  # fmt: skip


LOAN = Offered(
    "loan_schedule",
    "Monthly payment of a loan.",
    schema(
        principal={"type": "number", "description": "Amount borrowed."},
        months={"type": "integer", "description": "How many monthly payments."},
    ),
)
LISTING = Offered(
    "flat_price",
    "Estimate the price of a flat.",
    schema(
        rooms={"type": "integer", "description": "Number of rooms."},
        floors={"type": "integer", "description": "Number of floors."},
    ),
)


def test_a_part_that_restates_every_required_value_is_a_new_call() -> None:
    task = ("Work out the monthly payment of a loan: 20000 over 48 months. "
            "Also the monthly payment for 15000 over 36 months.")  # fmt: skip
    plan = plan_calls(task, [LOAN])
    assert [c.arguments for c in plan.calls] == [
        {"principal": 20000, "months": 48}, {"principal": 15000, "months": 36},
    ]  # fmt: skip


def test_names_in_a_comma_list_are_items_not_a_city_and_region() -> None:
    spans = find_spans("prices for Apple, Microsoft, Amazon, and Tesla today")
    assert [s.text for s in spans if s.kind == "name"] == ["Apple", "Microsoft", "Amazon", "Tesla"]
    assert find_spans("I am at Riga, Latvia, Can you help?")[0].text == "Riga, Latvia"
    assert find_spans("fly to Boston, MA and Denver, CO")[0].text == "Boston, MA"
    plan = plan_calls("weather forecast in Paris, Lyon, Nice and Lille, if you can", [WEATHER])
    assert [c.arguments["city"] for c in plan.calls] == ["Paris", "Lyon", "Nice", "Lille"]


def test_a_number_followed_by_a_parameter_name_is_not_taken_by_the_name_before_a_comma() -> None:
    plan = plan_calls("price of a flat with 3 rooms, 2 floors", [LISTING])
    assert [c.arguments for c in plan.calls] == [{"rooms": 3, "floors": 2}]


def test_the_whole_task_is_text_but_never_a_place_or_an_address() -> None:
    place = schema(city={"type": "string", "description": "City to search for hotels."})
    assert "city" in extract_arguments("find me a quiet hotel please", place).missing
    url = schema(url={"type": "string", "description": "The URL to query."})
    assert "url" in extract_arguments("show me the prices of the top stocks", url).missing
    text = schema(statement={"type": "string", "description": "The user's statement or query."})
    task = "my parcel never arrived"
    assert extract_arguments(task, text).arguments == {"statement": task}


def test_a_possessive_is_no_part_of_a_name_and_a_whole_parameter_name_ties_its_value() -> None:
    spec = schema(author=STR)
    assert args("list the novels of Jane Austen's early years", spec) == {"author": "Jane Austen"}
    ticket = schema(
        ["ticket_number"],
        ticket_number={"type": "string", "description": "The ticket's id."},
        queue={"type": "string", "description": "Queue name."},
    )
    assert args("close the issue filed as ticket number 48213 today", ticket) == {
        "ticket_number": "48213"
    }


PLAY = Offered(
    "play_artist",
    "Start playback of the specified artist's tracks.",
    schema(
        ["artist_name"],
        artist_name={"type": "string", "description": "The name of the artist."},
        room={"type": "string", "description": "Where to play."},
    ),
)


def test_a_name_after_by_is_the_maker() -> None:
    found = extract_arguments("put on tracks by Tove Lo in the Kitchen", PLAY.parameters)
    assert found.arguments["artist_name"] == "Tove Lo" and "artist_name" in found.strong
    assert "after 'by'" in found.notes["artist_name"]
    # a parameter that names no maker takes nothing by "by" alone
    other = schema(["owner"], owner={"type": "string", "description": "Who owns it."})
    assert "owner" not in extract_arguments("a song by Tove Lo", other).strong


def test_a_whole_parameter_name_matches_its_camel_case_spelling() -> None:
    spec = schema(["column_count"], column_count=INT, row_count=INT)
    assert args("set rowCount 4 and columnCount to 8", spec) == {"column_count": 8, "row_count": 4}


def test_a_tool_sharing_one_word_with_the_task_needs_an_argument_with_evidence() -> None:
    forecast = Offered(
        "forecast_weather",
        "Weather forecast for a city.",
        schema(city={"type": "string", "description": "The city."}),
    )
    # one description word ("city"), the name taken by order alone: a near miss, declined
    weak = plan_calls("is Rome the oldest city?", [forecast])
    assert weak.calls == [] and "no argument is named" in weak.declined
    assert weak.tool == "forecast_weather"
    # the same word, but a value tied by evidence (a place after "in", the name before it)
    tied = plan_calls("the oldest street of the city in Rome", [forecast])
    assert [c.arguments for c in tied.calls] == [{"city": "Rome"}]
    assert [c.arguments for c in plan_calls("the city is Rome", [forecast]).calls] == [
        {"city": "Rome"}
    ]
    # a word of the tool's name in the task: order alone is enough
    named = plan_calls("is Rome warm, weather wise?", [forecast])
    assert [c.arguments for c in named.calls] == [{"city": "Rome"}]


@pytest.fixture
def ablated() -> Any:
    """Switch techniques off for one test (as bench/bfcl.py --ablate does), then on again."""
    from tooldb.agents.extraction.switches import ABLATED

    yield ABLATED
    ABLATED.clear()


def test_each_ordinal_of_an_enumeration_in_one_sentence_is_a_call(ablated: set[str]) -> None:
    task = ("the total area of three pools: the first has a radius of 4m, the second has a "
            "radius of 6m, and the third has a radius of 9m")  # fmt: skip
    assert [c.arguments for c in plan_calls(task, [AREA]).calls] == [
        {"radius": 4}, {"radius": 6}, {"radius": 9}
    ]  # fmt: skip
    ablated.add("ordinals")
    assert len(plan_calls(task, [AREA]).calls) < 3


def test_a_list_of_three_or_more_is_never_cut_at_its_and(ablated: set[str]) -> None:
    from tooldb.agents.extraction.segments import split_parts

    task = "the weather in Oslo, Bergen, Tromso and Bodo, if I want the wind in it"
    assert split_parts(task) == [task]
    # two like values are no such list: "USD to AUD and USD to CAD" is two pairs
    assert split_parts("the rates of USD to AUD and USD to CAD") == [
        "the rates of USD to AUD", "USD to CAD"
    ]  # fmt: skip
    ablated.add("whole_lists")
    assert split_parts(task) == [
        "the weather in Oslo, Bergen, Tromso",
        "Bodo, if I want the wind in it",
    ]


def test_a_text_parameter_named_in_the_task_takes_the_rest_of_the_sentence(
    ablated: set[str],
) -> None:
    note = schema(["kind", "message"], kind={"type": "string", "enum": ["add", "delete"]},
                  message={"type": "string", "description": "What the note says."})  # fmt: skip
    task = "add a note with message pick up the kids at 5 pm"
    assert args(task, note) == {"kind": "add", "message": "pick up the kids at 5 pm"}
    colon = "add a note saying exactly this: water the plants on the balcony"
    assert args(colon, note)["message"] == "water the plants on the balcony"
    ablated.add("text_tail")
    assert args(task, note)["message"] == "pick up the kids"
    assert args(colon, note).get("message") != "water the plants on the balcony"


def test_a_month_or_weekday_is_never_a_place(ablated: set[str]) -> None:
    task = "I fly to Lisbon in December: what will the weather be?"
    assert [c.arguments for c in plan_calls(task, [WEATHER]).calls] == [{"city": "Lisbon"}]
    ablated.add("calendar")
    assert [c.arguments for c in plan_calls(task, [WEATHER]).calls] == [{"city": "December"}]


def test_a_place_looks_like_one(ablated: set[str]) -> None:
    city = schema(city={"type": "string", "description": "The city to get the weather for."})
    # an identifier or a bare domain is no city, even when it is the only value there is
    for task in ("the weather, using the key 'api_key_2'", "the weather for 'example.org'"):
        assert extract_arguments(task, city).missing == ["city"]
    # a lower-case phrase is no place name: "weather data" names no city
    assert extract_arguments("fetch the weather data", city).missing == ["city"]
    ablated.update({"place_shape", "place_case"})
    assert args("the weather, using the key 'api_key_2'", city) == {"city": "api_key_2"}
    assert args("fetch the weather data", city) == {"city": "data"}


def test_a_comma_before_another_question_starts_a_part(ablated: set[str]) -> None:
    from tooldb.agents.extraction.segments import split_parts

    task = "What is the capital of Peru, what is the population of Chile?"
    assert split_parts(task) == ["What is the capital of Peru", "what is the population of Chile?"]
    # after a condition or a setting the question is the same part
    same = "If you roll 3 dice, what is the chance of a six?"
    assert split_parts(same) == [same]
    ablated.add("questions")
    assert split_parts(task) == [task]


def test_relative_dates_count_from_the_day_the_task_says_today_is(ablated: set[str]) -> None:
    task = "the forecast for Oslo next Friday? Today is Monday, March 4th 2024"
    dates = [s.value for s in find_spans(task) if s.kind == "date"]
    assert dates == ["2024-03-08"]  # the anchor is context, not a second date
    ablated.add("anchored")
    assert len([s for s in find_spans(task) if s.kind == "date"]) > 1


def test_a_label_before_an_identifier_is_no_part_of_it(ablated: set[str]) -> None:
    spec = schema(["user_id"], user_id={"type": "string", "description": "The user's id."})
    assert args("list the orders of the user with ID U123456", spec) == {"user_id": "U123456"}
    bot = schema(["bot_id", "version"], bot_id=STR, version=STR)
    assert args("the exports of the bot with ID 'B12345' for version 'v1'", bot) == {
        "bot_id": "B12345", "version": "v1"
    }  # fmt: skip
    ablated.add("labels")
    assert args("the exports of the bot with ID 'B12345' for version 'v1'", bot)["bot_id"] == "ID"
    assert args("list the orders of the user with ID U123456", spec) == {"user_id": "ID U123456"}


def test_enum_values_written_as_a_list_are_one_call_each(ablated: set[str]) -> None:
    quotes = Offered(
        "stock_quote",
        "A stock's price.",
        schema(
            ["company", "field"],
            company=STR,
            field={"type": "string", "enum": ["open", "close", "high", "low"]},
        ),
    )
    task = "the 'open' and 'close' stock price of Nvidia"
    wanted = [{"company": "Nvidia", "field": "open"}, {"company": "Nvidia", "field": "close"}]
    assert [c.arguments for c in plan_calls(task, [quotes]).calls] == wanted
    ablated.add("choice_lists")
    assert [c.arguments for c in plan_calls(task, [quotes]).calls] != wanted


def test_groups_of_numbers_are_one_call_each(ablated: set[str]) -> None:
    gcd = Offered("gcd", "Greatest common divisor.", schema(a=INT, b=INT))
    wanted = [{"a": 45, "b": 60}, {"a": 81, "b": 27}]
    for task in ("the gcd of the pairs (45, 60) and (81, 27)", "the gcd of 45 and 60, 81 and 27"):
        assert [c.arguments for c in plan_calls(task, [gcd]).calls] == wanted
    # two pairs apart in the sentence are no groups: "multiples of 3 and 5 between 1 and 100"
    assert len(plan_calls("the gcd of 3 and 5 between 1 and 100", [gcd]).calls) != 2
    ablated.add("tuples")
    assert [
        c.arguments for c in plan_calls("the gcd of the pairs (45, 60) and (81, 27)", [gcd]).calls
    ] != wanted


def test_a_role_written_after_a_name_ties_it(ablated: set[str]) -> None:
    films = schema(["genre"], genre=STR, director=STR, cast=STR)
    task = "find a comedy with Tom Hanks in the cast and Nora Ephron as the director"
    found = extract_arguments(task, films)
    assert found.arguments["cast"] == "Tom Hanks" and found.arguments["director"] == "Nora Ephron"
    assert "as the director" in found.notes["director"]
    # the parameter's head noun right after a text value: "the Noir genre"
    assert extract_arguments("a Noir genre film with Tom Hanks", films).notes["genre"] == (
        "'Noir' genre"
    )
    ablated.add("roles")
    found = extract_arguments(task, films)
    assert "cast" not in found.strong and "director" not in found.strong


def test_an_introduction_is_no_call_of_its_own(ablated: set[str]) -> None:
    from tooldb.agents.extraction.plan import _without_intro

    drop = Offered("final_speed", "Final speed of a dropped object.",
                   schema(initial_velocity=INT, height=INT))  # fmt: skip
    # "Two objects were dropped. The first … 0 m/s … 10 meters. The second … 5 m/s … 20 meters."
    calls: list[tuple[dict[str, Any], dict[str, str]]] = [
        ({"initial_velocity": 2}, {}),
        ({"initial_velocity": 0, "height": 10}, {}),
        ({"initial_velocity": 5, "height": 20}, {}),
    ]
    assert _without_intro(calls, drop) == calls[1:]
    assert _without_intro(calls[:2], drop) == calls[:2]  # one call left would be no list
    ablated.add("intros")
    assert _without_intro(calls, drop) == calls


def test_a_command_parameter_takes_the_command_the_task_says_to_use(ablated: set[str]) -> None:
    shell = schema(["command"], command={"type": "string", "description": "What to run."})
    assert args("show the disk usage using df -h", shell) == {"command": "df -h"}
    assert args("list the files using the ls -la command", shell) == {"command": "ls -la"}
    assert args("run uptime to see the load", shell) == {"command": "uptime"}
    ablated.add("commands")
    assert args("show the disk usage using df -h", shell).get("command") != "df -h"


def test_an_id_by_order_looks_like_one(ablated: set[str]) -> None:
    event = schema(["event_id"], event_id={"type": "string", "description": "The event's id."})
    assert extract_arguments("Get the event shoes!", event).missing == ["event_id"]
    assert args("Get the event ev_2024", event) == {"event_id": "ev_2024"}
    ablated.add("id_shape")
    assert extract_arguments("Get the event shoes!", event).missing == []


def test_an_enum_parameter_takes_only_its_values(ablated: set[str]) -> None:
    todo = schema(
        ["action", "item"],
        action={"type": "string", "enum": ["add", "delete"]},
        item={"type": "string", "description": "The todo item."},
    )
    found = extract_arguments("Hi, I am Charlie. Drop the 'buy milk' item", todo)
    assert "action" in found.missing and found.arguments.get("action") is None
    ablated.add("enum_only")
    assert extract_arguments("Hi, I am Charlie. Drop the 'buy milk' item", todo).arguments[
        "action"
    ] not in ("add", "delete")


def test_a_street_address_is_one_value(ablated: set[str]) -> None:
    task = "pick me up at 12B Harbour Road, Galway, Ireland in ten minutes"
    names = [s.text for s in find_spans(task) if s.kind == "name"]
    assert names == ["12B Harbour Road, Galway, Ireland"]
    ablated.add("addresses")
    assert "12B Harbour Road, Galway, Ireland" not in [s.text for s in find_spans(task)]
