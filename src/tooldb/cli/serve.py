"""``tooldb serve`` (the HTTP API and dashboard, in ``tooldb.server``) and ``tooldb keys
create|list|revoke`` (the API keys it accepts)."""

from __future__ import annotations

import sys
import time
from typing import Annotated

import typer

from ..errors import UsageError
from .app import JsonOpt, _errors, _out, _print_json, _registry, _state, _table, _text, _when, app

keys_app = typer.Typer(
    help="API keys of `tooldb serve`: one tenant and one scope each, shown once.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(keys_app, name="keys")

TenantOpt = Annotated[
    str | None, typer.Option("--tenant", help="The key's tenant (overrides the global one).")
]


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port.")] = 8000,
    no_auth: Annotated[
        bool,
        typer.Option(
            "--no-auth",
            help="Serve without keys, everyone as admin of the tenant (loopback addresses only).",
        ),
    ] = False,
    cors_origin: Annotated[
        list[str] | None,
        typer.Option("--cors-origin", help="An origin browsers may call the API from (repeat)."),
    ] = None,
    max_body_bytes: Annotated[
        int, typer.Option(min=1024, help="Refuse request bodies larger than this (413).")
    ] = 1 << 20,
) -> None:
    """Serve the REST API under /api/ (OpenAPI at /docs) and the dashboard at /."""
    try:
        import uvicorn

        from ..server import ServerConfig, create_app
    except ImportError as exc:
        sys.stderr.write(f"error: tooldb serve needs {exc.name}: pip install 'tooldb[server]'\n")
        raise typer.Exit(2) from None

    config = ServerConfig(
        host=host, no_auth=no_auth, max_body_bytes=max_body_bytes,
        cors_origins=list(cors_origin or []),
    )  # fmt: skip
    with _registry(False) as registry, _errors():
        web = create_app(registry, config)
        shown = f"[{host}]" if ":" in host else host
        sys.stderr.write(
            f"tooldb serve: http://{shown}:{port}/ (dashboard), /api/ (REST), /docs (OpenAPI); "
            f"registry {registry.store.url}\n"
        )
        if no_auth:
            sys.stderr.write(
                f"warning: --no-auth: no API key is asked for; every request acts as tenant "
                f"{registry.tenant!r} with admin scope\n"
            )
        sys.stderr.flush()
        uvicorn.run(web, host=host, port=port, log_level="warning", access_log=False)


@keys_app.command("create")
def keys_create(
    scope: Annotated[str, typer.Option(help="read, call (and read) or admin (everything).")],
    tenant: TenantOpt = None,
    name: Annotated[str | None, typer.Option(help="A note saying what the key is for.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Create a key and print it, the only time it is shown (only its hash is kept)."""
    from ..server.auth import Scope, create_key

    _state.tenant = tenant or _state.tenant
    with _registry(as_json) as registry, _errors():
        key = create_key(registry.store, registry.tenant, Scope.parse(scope), name)
        owner = registry.tenant
    if as_json:
        _print_json({"key": key, "tenant": owner, "scope": Scope.parse(scope).label})
    else:
        _out.print(key)
        sys.stderr.write(
            f"key for tenant {owner!r}, scope {scope}: store it now, it is not shown again\n"
        )


@keys_app.command("list")
def keys_list(tenant: TenantOpt = None, as_json: JsonOpt = False) -> None:
    """The tenant's keys (their prefixes, never the keys), newest first."""
    _state.tenant = tenant or _state.tenant
    with _registry(as_json) as registry, _errors():
        rows = registry.store.list_api_keys(registry.tenant)
    if as_json:
        _print_json({"keys": rows})
        return
    table = _table("prefix", "scope", "created", "revoked", "name")
    for row in rows:
        table.add_row(
            row["prefix"], row["scope"], _when(row["created_at"]), _when(row["revoked_at"]),
            _text(row["name"] or ""),
        )  # fmt: skip
    _out.print(table)


@keys_app.command("revoke")
def keys_revoke(
    prefix: Annotated[str, typer.Argument(help="The key's prefix (see `tooldb keys list`).")],
    tenant: TenantOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Revoke a key: requests with it are refused from now on (within 2 s by a server)."""
    _state.tenant = tenant or _state.tenant
    with _registry(as_json) as registry, _errors():
        if not registry.store.revoke_api_key(registry.tenant, prefix, time.time()):
            raise UsageError(f"no live key with prefix {prefix!r} in tenant {registry.tenant!r}")
    if as_json:
        _print_json({"prefix": prefix, "revoked": True})
    else:
        _out.print(f"revoked {prefix}")
