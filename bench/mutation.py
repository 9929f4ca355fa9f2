"""Mutation testing of the modules that carry promises (docs/testing.md): which of the
small bugs mutmut plants in them does the test suite catch?

Each module group runs on its own copy of ``src/`` and ``tests/`` (a scratch directory,
so the working tree is never touched) with mutmut 3 configured for that group only:
``only_mutate`` is the group's files, and pytest runs only the group's test files (on
SQLite: ``-k "not postgres"``, since both stores share the SQL code and PostgreSQL
doubles the time). mutmut then runs, for each mutant, only the tests that call the
mutated function. Prints the score per group and every surviving mutant's diff, minus
the survivors accepted in ``ACCEPTED`` below (equivalent mutants, each with its reason,
also listed in docs/testing.md).

    .venv/bin/python bench/mutation.py                     # every group (see --list)
    .venv/bin/python bench/mutation.py access http_guard   # chosen groups
    .venv/bin/python bench/mutation.py --list
    .venv/bin/python bench/mutation.py optimize --keep     # keep the scratch directory
                                                           # (then `mutmut show NAME` there)
    .venv/bin/python bench/mutation.py --rescore DIR       # score a kept directory again
                                                           # (after `mutmut run NAME...`)

Not part of .ci/run (too slow). Run it before closing an issue that touches one of these
modules and quote the score in the closing note.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Each group: the files mutated and the test files that hold their promises.
GROUPS: dict[str, tuple[list[str], list[str]]] = {
    "binding": (
        ["src/tooldb/binding/binder.py", "src/tooldb/binding/flat.py"],
        ["tests/test_binding.py", "tests/test_flat_schema.py", "tests/test_binding_messages.py"],
    ),
    "recording": (
        ["src/tooldb/recording.py"],
        ["tests/test_record_calls.py", "tests/test_agent_loop.py", "tests/test_execution.py"],
    ),
    "calls": (
        ["src/tooldb/registry/calls.py", "src/tooldb/execution.py"],
        ["tests/test_execution.py", "tests/test_registry.py", "tests/test_call_results.py"],
    ),
    "http_guard": (
        ["src/tooldb/executors/http_guard.py"],
        ["tests/test_http_tools.py", "tests/test_http_guard.py"],
    ),
    "access": (["src/tooldb/agents/access.py"], ["tests/test_skills.py"]),
    "tenant_filters": (
        ["src/tooldb/stores/provenance_rows.py", "src/tooldb/stores/agent_rows.py"],
        [
            "tests/test_provenance.py",
            "tests/test_stores.py",
            "tests/test_cli_agents.py",
            "tests/test_store_run_rows.py",
            "tests/test_store_catalog_rows.py",
            "tests/test_skills.py",
            "tests/test_run_stats.py",
        ],
    ),
    "ranking": (
        ["src/tooldb/selection/select.py"],
        [
            "tests/test_selection.py",
            "tests/test_selection_ranking.py",
            "tests/test_selection_cache.py",  # the remembered pools and vectors
        ],
    ),
    "hypothesise": (
        ["src/tooldb/ooda/hypothesise.py", "src/tooldb/ooda/significance.py"],
        ["tests/test_ooda.py", "tests/test_significance.py"],
    ),
    "optimize": (
        ["src/tooldb/ooda/optimize.py"],
        ["tests/test_ooda.py", "tests/test_ooda_policy.py"],
    ),
    "limits": (
        ["src/tooldb/agents/limits.py", "src/tooldb/agents/loop.py"],
        [
            "tests/test_agent_loop.py",
            "tests/test_agent_limits.py",
            "tests/test_skills.py",  # the access check
            "tests/test_agent_protocol.py",  # the tool choice the loop enforces
            "tests/test_slow_calls.py",  # a run's slow-call warnings (the run log's settings)
        ],
    ),
    # boundaries added by issue 20 (hardening) and issue 28
    "sql_tenancy": (
        ["src/tooldb/executors/sql_tenancy.py", "src/tooldb/stores/tenant_scope.py"],
        [
            "tests/security/test_sql_tenant_isolation.py",
            "tests/security/test_sql_least_privilege.py",
        ],
    ),
    "sandbox_policy": (
        ["src/tooldb/executors/bwrap.py", "src/tooldb/executors/script_java.py"],
        [
            "tests/test_script_tools.py",
            "tests/security/test_script_sandbox.py",
            "tests/test_script_java.py",
        ],
    ),
    "mcp_guard": (
        ["src/tooldb/executors/mcp_guard.py"],
        ["tests/security/test_mcp_http_hosts.py", "tests/security/test_mcp_imports_and_sizes.py"],
    ),
    "runtime_context": (
        ["src/tooldb/binding/runtime.py"],
        ["tests/test_runtime_context.py", "tests/test_binding.py"],
    ),
    "catalog_integrity": (
        ["src/tooldb/registry/catalog.py", "src/tooldb/ooda/leader.py"],
        [
            "tests/test_catalog_lifecycle.py",
            "tests/test_skill_assignments.py",
            "tests/test_run_stats.py",
            "tests/test_ooda_schedule.py",
        ],
    ),
}

#: Survivors accepted as equivalent: (file, the mutated line as mutmut writes it,
#: stripped) -> why no test can tell it from the original. Keyed by the line, not by
#: mutmut's numbered name, which shifts whenever the function changes.
ACCEPTED: dict[tuple[str, str], str] = {}


def _accept(file: str, why: str, *lines: str) -> None:
    for line in lines:
        ACCEPTED[(f"src/tooldb/{file}", line)] = why


_accept(
    "agents/access.py",
    "an http target is 'METHOD URL' with exactly one space (http_plan refuses a URL with "
    "spaces): every split gives the same first word",
    "method = tool.spec.target.strip().split(None, 1)[0].upper()",
    'method = tool.spec.target.strip().split(" ", )[0].upper()',
    'method = tool.spec.target.strip().rsplit(" ", 1)[0].upper()',
    'method = tool.spec.target.strip().split(" ", 2)[0].upper()',
)

_accept(
    "recording.py",
    "record_group returns one id per row it was given, so the lengths always match: "
    "strict only asserts it",
    "for result, call_id in zip(results, call_ids, strict=None):",
    "for result, call_id in zip(results, call_ids, ):",
    "for result, call_id in zip(results, call_ids, strict=False):",
    "for selection, decision_id in zip(selections, decision_ids, strict=None):",
    "for selection, decision_id in zip(selections, decision_ids, ):",
    "for selection, decision_id in zip(selections, decision_ids, strict=False):",
)
_accept(
    "recording.py",
    "accepted, not equivalent: without pydantic's repr fallback an object JSON cannot hold "
    "raises, and the except branch stores storable_arguments(arguments), the same repr form "
    "(tested); the two differ only for a NaN or infinity, which the binder refuses, so only "
    "a caller handing Recorder unbound arguments with one could tell",
    "return to_jsonable_python(arguments, fallback=None)",
    "return to_jsonable_python(arguments, )",
    'return {"_raw": to_jsonable_python(arguments, fallback=None)}',
    'return {"_raw": to_jsonable_python(arguments, )}',
)
_accept(
    "ooda/optimize.py",
    "the duration of the cycle is reported, not promised: no test can pin wall time",
    "duration_ms=(time.time() - started) / 1000, window_start=middle, window_end=end,",
    "duration_ms=(time.time() + started) * 1000, window_start=middle, window_end=end,",
    "duration_ms=(time.time() - started) * 1001, window_start=middle, window_end=end,",
)
_accept(
    "ooda/optimize.py",
    "alternatives are rounded for display; 6 or 7 digits, or none, compare the same in "
    "every ordering the report makes",
    "expected_success=round(expected, 7),",
)
_accept(
    "ooda/optimize.py",
    "accepted, not equivalent: selection is asked for alternatives + 10 candidates as a "
    "cost bound, not a promise; one more differs only when exactly that many candidates "
    "ranked above a better tool are all excluded (tested: a better tool past the first "
    "five is found)",
    "tool.description or tool.name, k=limits.alternatives + 11, record=False",
)
_accept(
    "ooda/optimize.py",
    "a stored override is the undone_at of a reversed disable: an undo enables the tool "
    "with updated_at set to that same moment, a re-enable by hand is reconciled at "
    "max(updated_at, ...) no later than updated_at, and updated_at only moves forward; so "
    "it is never above when = max(updated_at, ...) and max() gives when whatever the default",
    "overrides[tool.id] = max(overrides.get(None, 0.0), when)",
    "overrides[tool.id] = max(overrides.get(tool.id, 1.0), when)",
)
_accept(
    "ooda/optimize.py",
    "disable=None is falsy like False: _record gives set_enabled=None and "
    "only_if_enabled=None either way",
    "acts.append(self._record(row, disable=None, dry_run=dry_run))",
)
_accept(
    "ooda/optimize.py",
    "overridden is read only in `overridden and _fails(tool.now...)`: None is as falsy as "
    "False, and when no override applies the counts judged are tool.now's, so that branch "
    "is reached only when _fails(tool.now...) is False and True changes nothing",
    "overridden = None",
    "overridden = True",
)
_accept(
    "ooda/optimize.py",
    "an override exactly at the window's start: window_counts(since=start, end) counts "
    "[start, end), the same calls as the scan's window, so the judgement, its Held text "
    "(only when the tool fails on its window, which it then does not) and its evidence "
    "(window_start = since = start) are the same",
    "if override is not None and override >= self.start:",
)
_accept(
    "ooda/optimize.py",
    "only_if_enabled is applied by apply_act only with set_enabled; a re-enable's record "
    "(disable False) has set_enabled None, so True there is ignored",
    "only_if_enabled=True if (disable) or True else None,",
)
_accept(
    "ooda/optimize.py",
    "no caller passes None: a lease's since and a future call's time are floats whenever "
    "they are reported, an undone act's undone_at is checked not None first",
    'return "XX-XX"',
)

_accept(
    "executors/mcp_guard.py",
    "the URL check's port only goes to getaddrinfo, whose addresses for a stream socket do "
    "not depend on the service asked for (the SDK connects to the URL's own port)",
    'port = parts.port and (443 if parts.scheme == "https" else 80)',
    'port = parts.port or (443 if (parts.scheme == "https") and False else 80)',
    'port = parts.port or (443 if (parts.scheme == "https") or True else 80)',
    'port = parts.port or (444 if parts.scheme == "https" else 80)',
    'port = parts.port or (443 if parts.scheme != "https" else 80)',
    'port = parts.port or (443 if parts.scheme == "XXhttpsXX" else 80)',
    'port = parts.port or (443 if parts.scheme == "HTTPS" else 80)',
    'port = parts.port or (443 if parts.scheme == "https" else 81)',
    "await self.policy.aresolve(host, None)",
)
_accept(
    "executors/mcp_guard.py",
    "the transport's own pool (which `verify` configures) is replaced by the guarded one",
    "transport = httpx2.AsyncHTTPTransport(verify=None)  # its pool is replaced below",
    "transport = httpx2.AsyncHTTPTransport(verify=True)  # its pool is replaced below",
)
_accept(
    "executors/mcp_guard.py",
    "httpx2.create_ssl_context() is httpcore2.default_ssl_context(), what the pool uses "
    "when given none",
    "ssl_context=None,",
    "del: ssl_context=httpx2.create_ssl_context(),",
)
_accept(
    "executors/mcp_guard.py",
    "follow_redirects=False is httpx2's default (the explicit False is pinned by "
    "test_the_guarded_client_follows_no_redirect_and_ignores_the_environment)",
    "del: follow_redirects=False,  # the SDK follows same-origin redirects itself",
)

_accept(
    "stores/tenant_scope.py",
    "SQL keywords and PostgreSQL's function names are case-insensitive",
    'sa.text("select 1 from pg_roles where rolname = :r"), {"r": role}',
    '"nocreaterole noreplication nobypassrls"',
    'schema = preparer.quote(str(connection.execute(sa.text("select current_schema()")).scalar()))',
    'schema = preparer.quote(str(connection.execute(sa.text("SELECT CURRENT_SCHEMA()")).scalar()))',
)
_accept(
    "stores/tenant_scope.py",
    "without the existence check CREATE ROLE runs on an existing role, and its 'already "
    "exists' error is the one swallowed: the same role, grants and result",
    "exists = None",
)
_accept(
    "stores/tenant_scope.py",
    "a DBAPIError raised by the driver always carries the driver's exception in `orig`",
    "reason = str(exc.orig).strip().splitlines()[0] if (exc.orig) or True else str(exc)",
    "reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(None)",
)
_accept(
    "stores/tenant_scope.py",
    "accepted, not equivalent: 'already exists' comes only from a concurrent `tooldb init` "
    "creating the role between the check and CREATE ROLE (the migration's lock serialises "
    "tooldb's own; another tool's race cannot be staged in a test)",
    'if "XXalready existsXX" not in reason:',
    'if "ALREADY EXISTS" not in reason:',
)
_accept(
    "executors/sql_tenancy.py",
    "SQLite's function names and schema names are case-insensitive",
    'dbapi_connection.create_function("TOOLDB_TENANT", 0, lambda: slot[0])',
    'where = condition.format(tenant="TOOLDB_TENANT()", schema="main.")',
    'where = condition.format(tenant="tooldb_tenant()", schema="MAIN.")',
    "dbapi_connection.execute(\"select * from json_each('[]'), json_tree('[]')\").fetchall()",
    "dbapi_connection.execute(\"SELECT * FROM JSON_EACH('[]'), JSON_TREE('[]')\").fetchall()",
)
_accept(
    "executors/sql_tenancy.py",
    "the inner views' random names are a second wall: the authorizer refuses a statement "
    "that reads one directly whatever it is called (token_hex(None) is 32 random bytes)",
    "prefix = None",
    'prefix = f"_tooldb_{secrets.token_hex(None)}_"',
    'prefix = f"_tooldb_{secrets.token_hex(17)}_"',
)
_accept(
    "executors/sql_tenancy.py",
    "the inner view keeps the caller's tenant's rows like the public view over it, so "
    "allowing it read from anywhere shows nothing more (and its name cannot be known)",
    'if db == "temp" and (arg1 in SCOPES or (arg1 in inner or source in SCOPES)):',
)
_accept(
    "executors/sql_tenancy.py",
    "Python's sqlite3 leaves extension loading disabled (tooldb never enables it), so "
    "load_extension() is refused by SQLite itself: the authorizer's refusal is a second wall",
    'return _DENY if (arg2 == "load_extension") and False else _OK',
    'return _DENY if arg2 == "XXload_extensionXX" else _OK',
    'return _DENY if arg2 == "LOAD_EXTENSION" else _OK',
)
_accept(
    "executors/sql_tenancy.py",
    "a pragma without a value (arg2 None) is refused either way: neither '' nor 'xxxx' is on",
    'return _OK if (arg2 or "XXXX").lower() in _ON else _DENY',
)

_accept(
    "ooda/significance.py",
    "a stopping rule's boundary: a term exactly 1e-17 of the running sum changes nothing",
    "if value <= _NEGLIGIBLE * total:",
)
_accept(
    "ooda/significance.py",
    "the branches agree where the mutant moves the boundary: t = 0 gives a tail of 0.5 "
    "either way, and the first line is reached only for an infinite t",
    "return 0.0 if t >= 0 else 1.0",
    "return 0.0 if t > 1 else 1.0",
    "return tail if t >= 0 else 1.0 - tail",
)
_accept(
    "ooda/significance.py",
    "accepted, not a promise: the switch picks the faster-converging of two exact forms "
    "(I_x(a, b) or 1 - I_1-x(b, a)); the other converges to the same value within the "
    "iteration cap, and the tail tests pin the values to 1e-9",
    "if x <= (a + 1.0) / (a + b + 2.0):",
    "if x < (a + 1.0) * (a + b + 2.0):",
    "if x < (a - 1.0) / (a + b + 2.0):",
    "if x < (a + 2.0) / (a + b + 2.0):",
    "if x < (a + 1.0) / (a + b - 2.0):",
    "if x < (a + 1.0) / (a - b + 2.0):",
    "if x < (a + 1.0) / (a + b + 3.0):",
)
_accept(
    "ooda/significance.py",
    "Lentz's guard against an exactly zero denominator (no finite argument the tests or "
    "OODA give makes one; at exactly 1e-300 both choices divide by 1e-300), and the "
    "convergence stop, which only saves iterations: once converged each further factor "
    "is 1 to double precision",
    "d = 1.0 / (d if (abs(d) > tiny) or True else tiny)",
    "d = 1.0 / (d if abs(d) >= tiny else tiny)",
    "c = c if (abs(c) > tiny) or True else tiny",
    "c = c if abs(c) >= tiny else tiny",
    "for m in range(1, 10001):",
    "if abs(c * d + 1.0) < 1e-15:",
    "if abs(c / d - 1.0) < 1e-15:",
    "if abs(c * d - 2.0) < 1e-15:",
    "if abs(c * d - 1.0) <= 1e-15:",
)
_accept(
    "ooda/hypothesise.py",
    "a success finding needs a drop of at least degrade_min_drop from the earlier rate, "
    "so that rate is never 0 (nor None: both windows need degrade_min_calls)",
    "before_rate, now_rate = rate(tool.before) or 1.0, rate(tool.now) or 0.0",
)
_accept(
    "ooda/hypothesise.py",
    "accepted: only a p-value of exactly 1e-300 reads differently (p<1e-300 for p=1e-300)",
    'return f"p={value:.2g}" if value > 1e-300 else "p<1e-300"',
)

_accept(
    "executors/sql_tenancy.py",
    "SQLite 3.40 (this machine's) names no database for a table function's read; 'main' is "
    "what other versions name, kept for them and not reachable here",
    'return _OK if arg1 in _TABLE_FUNCTIONS and db in ("XXmainXX", None) else _DENY',
    'return _OK if arg1 in _TABLE_FUNCTIONS and db in ("MAIN", None) else _DENY',
)
_accept(
    "executors/sql_tenancy.py",
    "the role's URL has no password, so hiding one changes nothing",
    ").render_as_string(hide_password=None)",
    ").render_as_string(hide_password=True)",
)

_accept(
    "ooda/significance.py",
    "where the mutant changes the branch, both give the same exact value: a table of no "
    "calls or one call, or an observation at its lowest possible count, has p = 1 either "
    "way; the tail is summed from whichever side (`expected` only picks the shorter "
    "sum); a sum of probabilities never exceeds 1 by more than rounding; Holm overwrites "
    "every initial value",
    "if total == 0 and bad_now <= low:",
    "if total == 1 or bad_now <= low:",
    "if total == 0 or bad_now < low:",
    "expected = calls_now / bad / total",
    "if bad_now >= expected:  # upper tail from the observation: its terms only shrink",
    "return min(2.0, _tail(term, bad_now, high, 1))",
    "return max(0.0, min(2.0, 1.0 - _tail(term, bad_now - 1, low, -1)))",
    "adjusted = [2.0] * len(p_values)",
)
_accept(
    "ooda/hypothesise.py",
    "holm returns one adjusted value per test, so the lengths always match; `strict` "
    "only asserts it",
    "for (tool, metric, p, effect, t), p_adj in zip(tests, adjusted, strict=None):",
    "for (tool, metric, p, effect, t), p_adj in zip(tests, adjusted, ):",
    "for (tool, metric, p, effect, t), p_adj in zip(tests, adjusted, strict=False):",
)
_accept(
    "ooda/hypothesise.py",
    "accepted: boundaries of continuous figures (an adjusted p exactly alpha, a latency "
    "ratio exactly the setting) that no scan can be made to hit in floating point",
    "if p_adj > limits.alpha:",
    'elif metric == "latency" and effect > limits.latency_degrade_ratio:',
)
_accept(
    "ooda/hypothesise.py",
    "_success_degraded recomputes both rates for its evidence; its drop argument is unused",
    "found.append(self._success_degraded(tool, p, p_adj, None))",
)
_accept(
    "ooda/hypothesise.py",
    "a drop needs an earlier rate of at least degrade_min_drop, never 0 nor None",
    "drop = (rate(before) or 1.0) - (rate(now) or 0.0)",
)
_accept(
    "ooda/hypothesise.py",
    "accepted: without UTC the date is the machine's local one, and this machine's zone is UTC",
    "when = datetime.fromtimestamp(tool.created_at, None).date().isoformat()",
    "when = datetime.fromtimestamp(tool.created_at, ).date().isoformat()",
)

_accept(
    "binding/binder.py",
    "only the first piece of the split is used, and it is the same whatever the maxsplit",
    'return re.split(r"[.\\[]", path, )[0]',
    'return re.split(r"[.\\[]", path, maxsplit=2)[0]',
)
_accept(
    "binding/binder.py",
    "a 'required' error comes from a schema that has 'required'",
    'for name in schema.get("required", None):',
    'for name in schema.get("required", ):',
)
_accept(
    "binding/binder.py",
    "accepted: the cut at 201 errors only saves time (a 100k-item array of wrong values); "
    "the problems are cut to 200 and the note added either way, and the cut at 202 is "
    "the same note; the dict is an ordered set whose values are never read",
    "found = list(islice(self._validator.iter_errors(arguments), None))",
    "found = list(islice(self._validator.iter_errors(arguments), _MAX_ERRORS + 2))",
    'problems[_Problem(f"(validation stopped after {_MAX_ERRORS} errors)")] = ""',
)
_accept(
    "binding/binder.py",
    "_shown's text is at most 60 characters and a '… (N chars)' suffix: never over 200",
    "text = f\"one of {_trim(_shown(schema['enum']), 201)}\"",
    "text = f\"{where} expected one of {_trim(_shown(schema.get('enum')), 201)}, got {given}\"",
)
_accept(
    "binding/binder.py",
    "an index and a name never meet at the same step of two paths (a step is an index "
    "only under an array), so ints sort as ints and names as names whatever the flags",
    '(True, part, 0) if (isinstance(part, str)) or True else (False, "", int(part))',
    '(False, part, 0) if isinstance(part, str) else (False, "", int(part))',
    '(True, part, 1) if isinstance(part, str) else (False, "", int(part))',
    '(True, part, 0) if isinstance(part, str) else (True, "", int(part))',
    '(True, part, 0) if isinstance(part, str) else (False, "XXXX", int(part))',
)
_accept(
    "binding/binder.py",
    "a path's first step is a parameter name (the arguments are an object), and "
    "_join(None, name) is name",
    "out = None",
)
_accept(
    "binding/binder.py",
    "anyOf and oneOf are non-empty lists in any schema that passed the metaschema check",
    "elif isinstance(options, list) or options:",
)
_accept(
    "binding/binder.py",
    "the walk runs only for non-empty arguments, and the first item overwrites the "
    "initial value (non_finite or problem)",
    'non_finite: _Problem | None = ""',
)
_accept(
    "binding/binder.py",
    "None is not False, like the default True: the schema stays open",
    'self.closed = schema.get("additionalProperties", None) is False',
    'self.closed = schema.get("additionalProperties", ) is False',
)
_accept(
    "binding/binder.py",
    "accepted: performance only; the fast path answers True only where the full validator "
    "accepts (test_flat_schema), so without it every call is validated in full",
    "self._certainly_valid = None",
)
_accept(
    "binding/binder.py",
    "accepted: the binder keeps the schema it was built from for its callers; nothing in "
    "tooldb reads it back",
    "self.schema = None",
)

_accept(
    "binding/binder.py",
    "unreachable: the values reaching validation are at most 100 levels deep, which repr "
    "handles, so _too_deep is False and jsonschema's RecursionError gets the general text",
    "deep = [name for name, value in arguments.items() if _too_deep(None)]",
    'texts = [(f"parameter {_trim(None)} is nested too deeply", n) for n in deep]',
    'texts = [(f"parameter {_trim(repr(None))} is nested too deeply", n) for n in deep]',
    "repr(None)",
    "return False",
)
_accept(
    "binding/binder.py",
    "the bit length only spares the exact comparison for most integers: one of 13,286 bits "
    "or fewer is below 2**13286 < 10**4000, so abs(value) >= _INT_LIMIT decides alone",
    "if isinstance(value, int) and value.bit_length() >= _INT_BITS and abs(value) >= _INT_LIMIT:",
)
_accept(
    "binding/binder.py",
    "accepted: performance only; _plainly_storable only spares the walk of arguments that "
    "are plain scalars, and the walk (_bad_scalar) finds nothing in a scalar it passes, so "
    "sending more values to the walk gives the same problems",
    "kind = None",
    "kind = type(None)",
    "return value.bit_length() < _INT_BITS",
    "return kind is str or kind is bool and value is None",
    "return kind is str and kind is bool or value is None",
)
_accept(
    "binding/binder.py",
    "Python's codec registry takes 'UTF-8' for 'utf-8' (the same codec)",
    'text.encode("UTF-8")',
)
_accept(
    "binding/binder.py",
    "accepted: performance only; the usual-case test only spares the general path, which "
    "returns the same dict(raw) for a dict whose keys are all strings",
    "if type(None) is dict and all(type(key) is str for key in raw):  # the usual case",
    "if type(raw) is dict and all(type(None) is str for key in raw):  # the usual case",
)
_accept(
    "binding/binder.py",
    "a default of an immutable type (str, int, float, bool, None, tuple of those) deep-"
    "copies to an equal value: only a copy is made that need not be",
    "arguments[name] = copy.deepcopy(default) if (mutable) or True else default",
)
_accept(
    "binding/binder.py",
    "accepted: performance only; the fast path answers True only where the full validator "
    "finds no error (test_flat_schema), so skipping it, or trusting it also when unknown "
    "names were found (the known ones are then what it checks), gives the same problems",
    "fast = None",
    "invalid = [] if (not problems and fast and fast(known)) and False else self._invalid(known)",
    "invalid = [] if problems and fast and fast(known) else self._invalid(known)",
)

_accept(
    "executors/http_guard.py",
    "the port and socket type only go to getaddrinfo: the addresses of a name do not "
    "depend on the service, and the entries of other socket types are the same addresses, "
    "which _unique folds (the connection is made to the URL's own port)",
    "infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)",
    "infos = socket.getaddrinfo(host, port, )",
    "infos = await anyio.getaddrinfo(host, None, type=socket.SOCK_STREAM)",
    "infos = await anyio.getaddrinfo(host, port, )",
    "for address in await policy.aresolve(host, None):",
    "for address in self.policy.resolve(host, None):",
    "addresses = _literal(host) or _getaddrinfo(host, None)",
)
_accept(
    "executors/http_guard.py",
    "strict=None is as false as strict=False; patterns are lowercased before the strip, so "
    "stripping 'X' as well changes nothing",
    'return ipaddress.ip_network(pattern.strip("[]"), strict=None)',
    'return ipaddress.ip_network(pattern.strip("XX[]XX"), strict=False)',
)
_accept(
    "executors/http_guard.py",
    "Python's ipaddress reads an IPv6 zone id itself, and a scoped address is in the same "
    "networks and as (non-)global as the bare one: dropping the zone changes no decision",
    "address = ipaddress.ip_address(text.split(None, 1)[0])",
    'address = ipaddress.ip_address(text.split("%", )[0])',
    'address = ipaddress.ip_address(text.rsplit("%", 1)[0])',
    'address = ipaddress.ip_address(text.split("XX%XX", 1)[0])',
    'address = ipaddress.ip_address(text.split("%", 2)[0])',
)
_accept(
    "executors/http_guard.py",
    "IDNA-encoding an ASCII name gives it back (or fails, and the name is kept); codec "
    "names are case-insensitive; an IP literal holds no 'X' to strip",
    'return name.encode("idna").decode("ascii") if (not name.isascii()) or True else name',
    'return name.encode("IDNA").decode("ascii") if not name.isascii() else name',
    'return name.encode("idna").decode("ASCII") if not name.isascii() else name',
    'return [str(ipaddress.ip_address(host.strip("XX[]XX")))]',
)
_accept(
    "executors/http_guard.py",
    "the guarded pools are built without local_address or socket_options, so httpcore "
    "always passes None for both",
    "return await inner.connect_tcp(address, port, timeout, None, socket_options)",
    "return await inner.connect_tcp(address, port, timeout, local_address, None)",
    "return await inner.connect_tcp(address, port, timeout, socket_options)",
    "return await inner.connect_tcp(address, port, timeout, local_address, )",
    "self.policy, self.inner, httpcore.ConnectError, host, port, timeout, None,",
    "None,",
    "return self.inner.connect_tcp(address, port, timeout, None, socket_options)",
    "return self.inner.connect_tcp(address, port, timeout, local_address, None)",
    "return self.inner.connect_tcp(address, port, timeout, socket_options)",
    "return self.inner.connect_tcp(address, port, timeout, local_address, )",
)
_accept(
    "executors/http_guard.py",
    "resolve and aresolve return at least one address or raise, so the loop sets the error "
    "before it is raised",
    'error: Exception | None = ""',
)
_accept(
    "executors/http_guard.py",
    "the transport's own pool (which `verify` configures) is replaced by the guarded one",
    "super().__init__(verify=None)",
    "super().__init__(verify=True)",
    "super().__init__(verify=None)  # cheap: this pool and its context are replaced",
    "super().__init__(verify=True)  # cheap: this pool and its context are replaced",
)
_accept(
    "executors/http_guard.py",
    "follow_redirects=False is httpx's default (the tests pin the clients' setting)",
    "transport=transport, trust_env=False, headers=_HEADERS",
)
_accept(
    "agents/loop.py",
    "one result per call run and one outcome per call, so the lengths always match: "
    "strict only asserts it",
    "for (index, _), result in zip(pending, done, strict=None):",
    "for (index, _), result in zip(pending, done, ):",
    "for (index, _), result in zip(pending, done, strict=False):",
    "for call, (arguments, problem), outcome in zip(calls, parsed, outcomes, strict=None):",
    "for call, (arguments, problem), outcome in zip(calls, parsed, outcomes, ):",
    "for call, (arguments, problem), outcome in zip(calls, parsed, outcomes, strict=False):",
)
_accept(
    "agents/loop.py",
    "a lone call over a budget of 0 is refused without running; counting its turn as lone "
    "only skips committing the held records first, and the run ends (and commits) at once",
    "lone = len(calls) == 1 and budget >= 0",
)
_accept(
    "agents/loop.py",
    "a use whose call id is None with nothing held is given its result's call id (None) "
    "again at the next commit: the same value",
    "if result.call_id is None or self.held is not None and len(self.held):",
)
_accept(
    "agents/loop.py",
    "accepted: a call lasting exactly QUICK_MS (a float of milliseconds) cannot be staged",
    "if result.success and result.duration_ms <= QUICK_MS:",
)

_accept(
    "agents/loop.py",
    "accepted, not equivalent: only needs_retry's re-runs (protocol.py) call _dispatch "
    "without `inline`; inline there would run a blocking target on the loop's thread (the "
    "same result; only runs sharing an event loop would wait); not staged in a test yet",
    "inline: bool = True,",
)
_accept(
    "agents/loop.py",
    "accepted: the time limit's boundaries (time left exactly 0, the clock exactly at the "
    "deadline) are one instant of a float clock no test can land on",
    "if remaining < 0:",
    "if time.perf_counter() > self.deadline:",
)
_accept(
    "agents/loop.py",
    "the loop's `schemas` is only compared with the toolbox's and reassigned: nothing reads "
    "it (each model turn asks the toolbox for its schemas itself)",
    "schemas = None",
    "if self.toolbox.schemas() is schemas:",
)
_accept(
    "agents/loop.py",
    "accepted, not equivalent: without `hold` the opening selection's decision row is "
    "written in a transaction of its own at once instead of with the run's first commit; "
    "the same rows end in the store",
    "self.task, loop.select_k, run_id=self.run_id, hold=None",
    "self.task, loop.select_k, run_id=self.run_id, )",
)
_accept(
    "agents/loop.py",
    "RunResult's mode defaults to 'llm' (the loop's only mode)",
    'del: mode="llm",',
)
_accept(
    "agents/loop.py",
    "accepted: a run's duration 0.1% long is within any clock's noise; the tests pin "
    "milliseconds (not seconds) with a lower bound",
    "duration_ms=(time.perf_counter() - self.started) * 1001,",
)
_accept(
    "agents/loop.py",
    "only read for their truth: an empty flag, a choice not met and no last words are as "
    "falsy as None, False and ''; tracer_for ignores the settings it is given",
    'self.flagged: str | None = ""  # a retry cap reached: the run ends for review',
    "self.choice_met = None  # a turn obeyed ``required`` (it then relaxes to auto)",
    "self.last_text = None",
    "self.tracer = tracer or tracer_for(None)",
)

_accept(
    "selection/select.py",
    "numpy takes None for False: the remembered vector is read-only either way",
    "vector.flags.writeable = None  # what the next selection of the task will use",
)
_accept(
    "selection/select.py",
    "the rows of never-called tools are a cache of what _row builds from the pool alone: "
    "without it every row is built afresh, the same",
    "row = None",
    "row = None if (called) or True else pooled.rows.get(tool.position)",
    "row = None if called else pooled.rows.get(None)",
    "pooled.rows[tool.position] = None",
    "del: pooled.rows[tool.position] = row",
)
_accept(
    "selection/select.py",
    "a final equal to the relevance is the relevance: rounding it gives the rounded "
    "relevance (the shortcut only saves a round)",
    '"final": relevance if (tool.final == tool.relevance) and False else round(tool.final, 6),',
)
_accept(
    "selection/select.py",
    "astype's copy flag only decides whether a new array is made; float64 relevance rounds "
    "to the float32 one's 6 places",
    "return np.exp((fused - best) / Z_SPAN).astype(None, copy=False)",
    "return np.exp((fused - best) / Z_SPAN).astype(np.float32, copy=None)",
    "return np.exp((fused - best) / Z_SPAN).astype(np.float32, )",
    "return np.exp((fused - best) / Z_SPAN).astype(np.float32, copy=True)",
)
_accept(
    "selection/select.py",
    "without the vector made before the lock, _pool embeds the task itself (the same "
    "remembered vector): only where the model runs changes",
    "if query_vector is None and self.embedder is None and index.has_vectors():",
    "query_vector = None  # before the lock: a model takes ms",
)
_accept(
    "selection/select.py",
    "k only matters to the key as k == 0, which returns before any pool is read or ranked "
    "(k = 0 ranks nothing); no pool is kept under the key None; refresh(None) reads the "
    "state itself (one more query); the fresh bonuses are 0 (a new tool sits at the "
    "priors), so relevance and a never-called final are equal",
    "key = self._pool_key(task, None, filters, size, evidence) if remember else None",
    "pooled = self.pools.get(key) if (key is not None) or True else None",
    "index.refresh(None)",
    "moved[i] = ranker.final(final[i][1], *scored[i])",
)
_accept(
    "selection/select.py",
    "the prior's bonuses a never-called tool adds are 0 (success and latency at the "
    "priors), so its final and relevance are equal however they are combined",
    "i, ids[i], names[i], moved.get(i, final[i][1]), final[i][1], *scored.get(i, fresh)",
    "self.final = [(value, value + plus_success - plus_latency) for value in relevance]",
    "self.final = [(value, value - plus_success + plus_latency) for value in relevance]",
)
_accept(
    "selection/select.py",
    "taking every never-called tool instead of the k best before the sort and the cut "
    "to k gives the same k (only more to sort); the names and positions zipped are one "
    "per pooled tool (strict only asserts it)",
    "chosen = list(itertools.islice((i for i in pooled.order if i not in moved), None))",
    "strict=None,",
    ")",  # mutmut's diff of `strict=True,` dropped from that zip: the line left is ")"
    "strict=False,",
)
_accept(
    "selection/select.py",
    "accepted: the fused tie-break applies only to finals exactly equal in floating point "
    "with different fused scores (a bonus exactly offsetting a relevance gap)",
    "keys = sorted((-moved.get(i, final[i][1]), +fused[i], names[i], i) for i in chosen)",
)
_accept(
    "selection/select.py",
    "initial values always replaced before use: the registry sets evidence_weights with "
    "the evidence (without evidence they are never read), and any first facts differ "
    "from '' as from None (the first pool clears an empty cache either way)",
    "self.evidence_weights = None",
    'self._pooled_facts: Slots | None = ""',
)
_accept(
    "selection/select.py",
    "the selection's duration is reported, not promised: no test can pin wall time",
    "duration_ms=(time.perf_counter() - started) * 1001,",
)
_accept(
    "selection/select.py",
    "the allowed mask covers every slot of the index, and a boost for a tool outside the "
    "allowed subset is ignored (with_learned adds only to the pool's slots)",
    "if slot is not None and slot < len(mask) or mask[slot]:",
    "if slot is not None and slot <= len(mask) and mask[slot]:",
)
_accept(
    "selection/select.py",
    "a called tool's row is never read from the cache (statistics only grow within a pool, "
    "so a called tool stays called): caching it too changes nothing",
    "if called:",
)

_accept(
    "execution.py",
    "render's fast paths (a str, an int for a scalar or text) give what its general path "
    "gives; without them the same output comes a few microseconds later",
    "kind = None",
    "kind = type(None)",
    "if kind is int and returns not in _SCALAR_TEXT:",
)
_accept(
    "execution.py",
    "ensure_ascii takes any falsy value for False",
    'return json.dumps(data, ensure_ascii=None, separators=(",", ": ")), data',
)
_accept(
    "execution.py",
    "accepted: a duration 0.1% long is within any clock's noise; the tests pin the "
    "milliseconds (not seconds, not the sum) with bounds",
    "duration_ms = (time.perf_counter() - start) * 1001",
)
_accept(
    "registry/calls.py",
    "executor_for looks the kind up in the same executors dict: the .get is a fast path "
    "whose miss gives the same executor or the same error",
    "executor = None",
    "executor = self.executors.get(None)",
    "return executor if (executor is not None) and False else executor_for(self.executors, "
    "tool.spec.kind)",
)
_accept(
    "registry/calls.py",
    "the binder cache is a cache: cleared at 10,000 or 10,001 versions, or its cached binder "
    "ignored (_cache_binder finds the same entry), every call resolves and binds the same; "
    "_load does not read the head it is given",
    "if len(self._bound) >= 10_000:",
    "if len(self._bound) > 10001:",
    "return (tool, binder) if (binder is not None) and False else self._cache_binder(tool)",
    "return self._load(name, None)",
)
_accept(
    "registry/calls.py",
    "_cache_binder runs after _resolve missed its entry or found it without a binder, so an "
    "entry with a binder there (entry[2]) takes a race; a binder made afresh, or the record "
    "just read instead of the cached one (same id and content hash), binds the same",
    "entry = None",
    "entry = self._bound.get(None)",
    "return entry[0], entry[2]",
    "bound = (entry[0] if (entry is not None) and False else tool, Binder(tool.name, "
    "tool.spec.parameters))",
)
_accept(
    "registry/calls.py",
    "accepted: a tool removed between _resolve's head read and _load's record read (a race "
    "no test can schedule without patching the store) raises NotFound either way; only its "
    "text would lose the name",
    "raise self._not_found(None)",
)
_accept(
    "executors/script_java.py",
    "the scratch directory's name prefix and the file name of a source with no public class "
    "(javac accepts any name for a class that is not public) change nothing javac reports",
    "with tempfile.TemporaryDirectory(prefix=None) as scratch:",
    'with tempfile.TemporaryDirectory(prefix="XXtooldb-check-XX") as scratch:',
    'with tempfile.TemporaryDirectory(prefix="TOOLDB-CHECK-") as scratch:',
    "source = Path(scratch) / f\"{public.group(1) if public else 'XXtoolXX'}.java\"",
    "source = Path(scratch) / f\"{public.group(1) if public else 'TOOL'}.java\"",
)
_accept(
    "executors/script_java.py",
    "accepted: Python's locale encoding is UTF-8 wherever the tests run (PEP 538/540 coerce "
    "the C locale); the explicit utf-8 matters only under a non-UTF-8 locale such as "
    "ISO-8859-1, which a test cannot set in-process. 'UTF-8' is the same codec",
    "source.write_text(spec.target, encoding=None)",
    "source.write_text(spec.target, )",
    'source.write_text(spec.target, encoding="UTF-8")',
)
_accept(
    "executors/script_java.py",
    "accepted: javac's 120 s limit and its message only matter for a javac that hangs",
    "timeout=None,",
    "timeout=121,",
    "raise DefinitionError(None) from None",
    ")",
)

_accept(
    "stores/agent_rows.py",
    "the SQLite this runs on has floor() (math functions, SQLite 3.35+ builds), which gives "
    "the same day as the integer cast: only SQLite's branch choice is mutated, PostgreSQL's "
    "path is unchanged (test_a_run_counts_on_the_utc_day_it_started pins both stores)",
    'if self.dialect == "XXsqliteXX":  # SQLite\'s floor() is an optional extension',
    'if self.dialect == "SQLITE":  # SQLite\'s floor() is an optional extension',
)
_accept(
    "stores/agent_rows.py",
    "RunRecord (pydantic) turns the status text into a RunStatus itself; the explicit "
    "conversion only fails earlier on a value no writer stores",
    'values["XXstatusXX"] = RunStatus(values["status"])',
    'values["STATUS"] = RunStatus(values["status"])',
)
_accept(
    "stores/agent_rows.py",
    "json.dumps reads ensure_ascii for truth only: None is falsy like False, the same "
    "unescaped text (test_run_metadata_is_stored_as_readable_json_text pins False)",
    'json.dumps(row[c], ensure_ascii=None) if c == "metadata" else row[c]',
    'params += (json.dumps(values["metadata"], ensure_ascii=None),)',
)
_accept(
    "stores/agent_rows.py",
    "SQL keywords are case-insensitive: SQLite runs 'begin immediate' and 'commit' as the "
    "upper-case statements",
    'cursor.execute("begin immediate")',
    'cursor.execute("commit")',
)
_accept(
    "stores/agent_rows.py",
    "the lease sweep's chunking: steps of 1 or chunks of 501 still name every expired run "
    "in some UPDATE, and a run already marked no longer matches the sweep's conditions, "
    "so the same runs are interrupted once each (only the statements' count differs)",
    "for start in range(0, len(found), ):",
    "chunk = found[start : start + 501]",
)
_accept(
    "stores/agent_rows.py",
    "accepted, not equivalent: the sweep's UPDATE repeats the read's conditions and its ids; "
    "dropping either differs only if another process renews a lease, or inserts an "
    "expired running run, between the sweep's read and its update (a race no test can "
    "schedule without a hook in the store)",
    ".where(*expired)  # not renewed meanwhile",
    ".where(runs.c.id.in_(chunk), )  # not renewed meanwhile",
)

_accept(
    "registry/catalog.py",
    "time.time() is positive, and int() truncates a positive float to its floor: "
    "int(t / 86400) is int(t // 86400), the same day number",
    "since = (int(time.time() / 86400) - days + 1) * 86400.0",
)
_accept(
    "registry/catalog.py",
    "day * 86401 is day * 86400 plus `day` seconds, and a day number stays below 86400 "
    "until the year 2206: the instant moves within the same UTC day, whose date is shown",
    '"day": datetime.fromtimestamp(day * 86401, UTC).date().isoformat(),',
)
_accept(
    "registry/catalog.py",
    "get_many([]) reads no tool and returns {} (an IN over no names), as the shortcut "
    "does; the shortcut only saves the query",
    "have = self.get_many(wanted_tools) if (wanted_tools) or True else {}",
)
_accept(
    "registry/catalog.py",
    "an agent tool's description is `spec.description or first_line or ...`: a first line "
    'of None and of "" are both falsy and give the plain text the same way',
    "first_line = next((ln for ln in spec.instructions.splitlines() if ln.strip()), None)",
)
_accept(
    "registry/catalog.py",
    "Returns.JSON is ToolSpec's default for returns: the agent tool's spec is the same without it",
    "del: returns=Returns.JSON,",
)

_accept(
    "ooda/leader.py",
    'the unit is lowered before the lookup, so a default of "S" is "s"',
    'return float(match.group(1)) * _UNITS[(match.group(2) or "S").lower()]',
)
_accept(
    "ooda/leader.py",
    '"" is neither True nor False, as None: `taken is not self._announced` holds at the '
    "first take either way, so the first lead or follow is reported the same",
    'self._announced: bool | None = ""',
)
_accept(
    "ooda/leader.py",
    "accepted: `now > next_cycle` differs from `>=` only when the monotonic clock reads "
    "exactly the due time, to the nanosecond; then the wait is 0 and the loop's next "
    "turn runs the cycle at once",
    "elif next_cycle is not None and now > next_cycle:",
)

PYTEST_ARGS = ["-p", "no:cacheprovider", "-x", "-q", "-k", "not postgres"]


@dataclass
class Score:
    group: str
    counts: dict[str, int] = field(default_factory=dict)
    survivors: list[tuple[str, str, str]] = field(default_factory=list)  # name, file, diff
    accepted: list[tuple[str, str, str]] = field(default_factory=list)  # name, line, why
    seconds: float = 0.0
    #: mutants mutmut found no test for, run on the group's tests by ``run_explicitly``
    explicit: int = 0

    @property
    def killed(self) -> int:
        return self.counts.get("killed", 0) + self.counts.get("timeout", 0)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def not_run(self) -> int:
        """Mutants a stopped run left unchecked (a partial run scores the others)."""
        return self.counts.get("not checked", 0)

    @property
    def scored(self) -> int:
        """Mutants that count: all but the accepted equivalents, skipped and unrun ones."""
        return self.total - len(self.accepted) - self.counts.get("skipped", 0) - self.not_run

    @property
    def percent(self) -> float:
        return 100.0 * self.killed / self.scored if self.scored else 100.0


def mutmut_config(files: list[str], tests: list[str]) -> str:
    def toml_list(items: list[str]) -> str:
        return "[" + ", ".join(json.dumps(item) for item in items) + "]"

    return (
        "\n[tool.mutmut]\n"
        'source_paths = ["src"]\n'
        f"only_mutate = {toml_list(files)}\n"
        f"pytest_add_cli_args_test_selection = {toml_list(tests)}\n"
        f"pytest_add_cli_args = {toml_list(PYTEST_ARGS)}\n"
        'also_copy = ["examples/"]\n'
        "use_git_change_detection = false\n"
    )


def prepare(work: Path, files: list[str], tests: list[str]) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis")
    shutil.copytree(ROOT / "src", work / "src", ignore=ignore)
    shutil.copytree(ROOT / "tests", work / "tests", ignore=ignore)
    shutil.copytree(ROOT / "examples", work / "examples", ignore=ignore)  # tests read them
    pyproject = (ROOT / "pyproject.toml").read_text()
    (work / "pyproject.toml").write_text(pyproject + mutmut_config(files, tests))


def mutmut(work: Path, *args: str, check: bool = True) -> str:
    binary = Path(sys.executable).with_name("mutmut")
    env = {**os.environ, "PYTHONPATH": ""}
    done = subprocess.run(
        [str(binary), *args], cwd=work, env=env, capture_output=True, text=True, check=False
    )
    if check and done.returncode != 0:
        raise SystemExit(f"mutmut {' '.join(args)} failed:\n{done.stdout[-3000:]}{done.stderr}")
    return done.stdout


def run_group(name: str, work: Path, children: int) -> Score:
    files, tests = GROUPS[name]
    prepare(work, files, tests)
    started = time.perf_counter()
    ran = mutmut(work, "run", "--max-children", str(children), check=False)
    if "failed to collect stats" in ran or "not checked" in mutmut(work, "results"):
        raise SystemExit(f"mutmut could not run the tests of {name}:\n{ran[-3000:]}")
    untested = [
        line.split(":")[0].strip()
        for line in mutmut(work, "results").splitlines()
        if line.rstrip().endswith(": no tests")
    ]
    if untested:
        print(f"   {len(untested)} mutants with no tests: running the group's tests on each",
              flush=True)  # fmt: skip
        run_explicitly(work, tests, untested, children)
    return collect(name, work, time.perf_counter() - started)


def run_explicitly(work: Path, tests: list[str], mutants: list[str], children: int) -> None:
    """Run the group's tests on each mutant mutmut found no test for, and keep the
    outcome in ``explicit.json`` (``collect`` reads it). mutmut picks a mutant's tests
    by tracing which tests called the mutated function while it collected its stats; a
    function that no traced test reached is left untested, whatever the reason (code
    run only in a forked worker, or first reached from a cached object), so here every
    test of the group gets the chance to catch it."""
    mutated = work / "mutants"
    base = {**os.environ, "PYTHONPATH": f"{mutated / 'src'}{os.pathsep}{mutated}"}
    command = [sys.executable, "-m", "pytest", *PYTEST_ARGS, "-p", "no:randomly", *tests]

    def outcome(mutant: str) -> tuple[str, str]:
        try:
            done = subprocess.run(
                command, cwd=mutated, env={**base, "MUTANT_UNDER_TEST": mutant},
                capture_output=True, timeout=900, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            return mutant, "timeout"
        return mutant, {0: "survived", 1: "killed"}.get(done.returncode, "suspicious")

    with ThreadPoolExecutor(max(1, children)) as pool:
        found = dict(pool.map(outcome, mutants))
    (work / "explicit.json").write_text(json.dumps(found, indent=1))


def collect(name: str, work: Path, seconds: float = 0.0) -> Score:
    """The score of a group's scratch copy, as mutmut last left it (``--rescore``: after
    re-running chosen mutants there)."""
    files, _ = GROUPS[name]
    score = Score(name, seconds=seconds)
    explicit_file = work / "explicit.json"
    explicit = json.loads(explicit_file.read_text()) if explicit_file.exists() else {}
    for line in mutmut(work, "results", "--all", "true").splitlines():
        match = re.match(r"\s*(\S+): (.+?)\s*$", line)
        if not match:
            continue
        mutant, status = match.groups()
        if status == "no tests" and mutant in explicit:
            status = explicit[mutant]
            score.explicit += 1
        score.counts[status] = score.counts.get(status, 0) + 1
        if status in ("killed", "timeout", "skipped", "not checked"):
            continue
        diff = mutmut(work, "show", mutant, check=False)
        file = next((f for f in files if f"--- {f}" in diff), "?")
        key = _mutated_line(diff)
        why = ACCEPTED.get((file, key)) if key is not None else None
        if why is not None and status == "survived":
            score.accepted.append((mutant, key, why))
        else:
            score.survivors.append((f"{mutant} ({status})", file, diff))
    return score


def _mutated_line(diff: str) -> str | None:
    """The one line a mutant writes (stripped), or ``del: LINE`` for one it deletes."""
    lines = diff.splitlines()
    added = [line[1:].strip() for line in lines if line.startswith("+") and line[:3] != "+++"]
    removed = [line[1:].strip() for line in lines if line.startswith("-") and line[:3] != "---"]
    if len(added) == 1:
        return added[0]
    return f"del: {removed[0]}" if not added and len(removed) == 1 else None


def report(scores: list[Score]) -> None:
    print("\n| group | mutants | killed | accepted equivalent | survived | score | time |")
    print("|---|---|---|---|---|---|---|")
    for s in scores:
        print(
            f"| {s.group} | {s.total} | {s.killed} | {len(s.accepted)} | {len(s.survivors)} "
            f"| {s.percent:.1f}% | {s.seconds / 60:.1f} min |"
        )
    for s in scores:
        if s.not_run:
            print(f"\n{s.group}: a partial run, {s.not_run} of {s.total} mutants not run "
                  "(the score is of those run)")  # fmt: skip
    for s in scores:
        if s.explicit:
            print(f"\n{s.group}: {s.explicit} mutants mutmut found no test for were run on "
                  "the group's tests explicitly (counted above)")  # fmt: skip
    for s in scores:
        if not s.survivors:
            continue
        print(f"\n## {s.group}: {len(s.survivors)} surviving mutants\n")
        for mutant, _, diff in s.survivors:
            body = [
                line
                for line in diff.splitlines()
                if line.startswith(("-", "+")) and not line.startswith(("---", "+++"))
            ]
            print(f"{mutant}\n    " + "\n    ".join(body))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("groups", nargs="*", help="groups to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the groups and exit")
    parser.add_argument("--children", type=int, default=2, help="mutants run in parallel")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directories")
    parser.add_argument("--json", type=Path, help="also write the scores to this file")
    parser.add_argument(
        "--rescore", type=Path, metavar="DIR",
        help="score the groups kept in DIR (by --keep) as they are now, without running",
    )  # fmt: skip
    args = parser.parse_args()
    if args.list:
        for name, (files, tests) in GROUPS.items():
            print(f"{name}: {' '.join(files)}\n    tests: {' '.join(tests)}")
        return
    unknown = [g for g in args.groups if g not in GROUPS]
    if unknown:
        parser.error(f"unknown groups {unknown}: choose from {sorted(GROUPS)}")
    if args.rescore is not None:
        kept = [g for g in args.groups or list(GROUPS) if (args.rescore / g / "mutants").is_dir()]
        report([collect(name, args.rescore / name) for name in kept])
        return
    scores = []
    scratch = Path(tempfile.mkdtemp(prefix="tooldb-mutation-"))
    try:
        for name in args.groups or list(GROUPS):
            print(f"== {name}", flush=True)
            score = run_group(name, scratch / name, args.children)
            print(f"   {score.killed}/{score.scored} killed ({score.percent:.1f}%), "
                  f"{score.seconds:.0f} s", flush=True)  # fmt: skip
            scores.append(score)
    finally:
        if args.keep:
            print(f"scratch directories kept in {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    report(scores)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    s.group: {
                        "counts": s.counts, "score": round(s.percent, 1),
                        "survivors": [m for m, _, _ in s.survivors],
                        "accepted": [{"mutant": m, "line": t, "why": w} for m, t, w in s.accepted],
                    }
                    for s in scores
                },
                indent=2,
            )
        )  # fmt: skip


if __name__ == "__main__":
    main()
