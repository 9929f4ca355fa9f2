"""API keys and who a request acts as.

A key is ``tdb_<prefix>_<secret>``: 8 hex characters that name it (``keys list``,
``keys revoke``) and 43 URL-safe characters of randomness (256 bits). The registry keeps
only the SHA-256 of the whole key, so a leaked database leaks no key; with that much
randomness a slow password hash adds nothing. Each key belongs to one tenant and has
one scope; scopes are ordered, each including the ones below it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from ..errors import UsageError
from ..stores import Store
from ..types import check_name

KEY_PREFIX = "tdb_"


class Scope(IntEnum):
    """What a key may do: ``read`` everything of its tenant (and try a selection),
    ``call`` tools too, ``admin`` change tools and run or undo OODA too."""

    READ = 1
    CALL = 2
    ADMIN = 3

    @classmethod
    def parse(cls, text: str) -> Scope:
        try:
            return cls[text.strip().upper()]
        except KeyError:
            names = ", ".join(s.name.lower() for s in cls)
            raise UsageError(f"unknown scope {text!r}: use one of {names}") from None

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class Principal:
    """Who a request acts as: a tenant and a scope (``key`` is the key's prefix, or
    ``no-auth`` when the server runs without keys)."""

    tenant: str
    scope: Scope
    key: str

    def may(self, needed: Scope) -> bool:
        return self.scope >= needed


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def create_key(store: Store, tenant: str, scope: Scope, name: str | None = None) -> str:
    """Make and store a new key; returns it (the only time it exists in clear)."""
    try:
        tenant = check_name(tenant, "tenant")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    prefix = secrets.token_hex(4)
    key = f"{KEY_PREFIX}{prefix}_{secrets.token_urlsafe(32)}"
    store.create_api_key(
        {
            "tenant": tenant,
            "prefix": prefix,
            "key_hash": hash_key(key),
            "scope": scope.label,
            "name": name,
            "created_at": time.time(),
        }
    )
    return key


def authenticate(store: Store, key: str) -> Principal | None:
    """The principal of a live key, None for an unknown, malformed or revoked one."""
    if not key.startswith(KEY_PREFIX) or len(key) > 200:
        return None
    row = store.api_key_by_hash(hash_key(key))
    if row is None or row["revoked_at"] is not None:
        return None
    # The lookup was by hash; compare again in constant time for good measure.
    if not hmac.compare_digest(row["key_hash"], hash_key(key)):
        return None
    return Principal(row["tenant"], Scope.parse(row["scope"]), row["prefix"])


def key_rows(store: Store, tenant: str) -> list[dict[str, Any]]:
    return store.list_api_keys(tenant)


class CsrfTokens:
    """Form tokens bound to who is signed in: HMAC(server secret, principal). A page
    from this server carries it; a form posted from another site cannot know it."""

    def __init__(self) -> None:
        self._secret = secrets.token_bytes(32)

    def token(self, principal: Principal) -> str:
        message = f"{principal.tenant}\x00{principal.key}".encode()
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    def check(self, principal: Principal, token: str | None) -> bool:
        return token is not None and hmac.compare_digest(self.token(principal), token)
