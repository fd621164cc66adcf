"""Reading the settings from the environment (no Django imports but its exception).

:class:`Env` is ``environ.Env`` whose every unreadable value (``SQLITE_BUSY_TIMEOUT=abc``) is an
``ImproperlyConfigured`` naming the variable. ``labeling.settings`` calls the functions below
for the settings that take more than one line: the database (engine options per vendor,
persistent connections), the caches (a Redis cache that falls back to process memory, a shared
cache for the token endpoint's budget) and an S3-compatible storage.
"""

from __future__ import annotations

import os
from typing import Any

import environ
from django.core.exceptions import ImproperlyConfigured

REDIS_CACHE = "labeling.cache.FallbackRedisCache"


class Env(environ.Env):
    """``environ.Env`` whose unreadable values are ``ImproperlyConfigured``, naming the variable."""

    def get_value(self, var: str, *args: Any, **kwargs: Any) -> Any:
        """Read ``var`` as ``environ.Env`` does.

        Raises:
            ImproperlyConfigured: the value cannot be read as the setting's type.
        """
        try:
            return super().get_value(var, *args, **kwargs)
        except (ValueError, TypeError) as exc:
            raise ImproperlyConfigured(
                f"{var}={os.environ.get(var, '')!r} cannot be read: {exc}"
            ) from exc


def _url(env: environ.Env, read: Any, var: str, default: str) -> dict[str, Any]:
    """``read(var, default=default)`` (a URL setting), refused with the variable's name."""
    try:
        config: dict[str, Any] = read(var, default=default)
    except (ValueError, KeyError, TypeError) as exc:
        raise ImproperlyConfigured(f"{var} is not a valid URL: {exc}") from exc
    if not config.get("ENGINE", config.get("BACKEND")):
        raise ImproperlyConfigured(f"{var}={os.environ.get(var, '')!r} names no known scheme")
    return config


def database(env: environ.Env, *, default: str) -> dict[str, Any]:
    """``DATABASES["default"]`` from ``DATABASE_URL`` (``default`` when unset).

    SQLite runs on ``labeling.sqlite_backend`` (write transactions queued on a file lock) in WAL
    mode with IMMEDIATE transactions, so a second writer waits up to ``SQLITE_BUSY_TIMEOUT``
    seconds instead of failing with "database is locked". PostgreSQL binds parameters on the
    server and prepares a statement from its sixth run on a connection, so the label loop's
    statements are not parsed and planned again; ``DATABASE_PREPARED_STATEMENTS=false`` turns
    that off behind a pooler that cannot keep prepared statements (PgBouncer before 1.21 in
    transaction mode). ``DATABASE_CONN_MAX_AGE`` (else the URL's ``?conn_max_age=``, else 0)
    keeps connections between requests: production web servers should (e.g. 60).
    """
    config = _url(env, env.db_url, "DATABASE_URL", default)
    if config["ENGINE"] == "django.db.backends.sqlite3":
        config["ENGINE"] = "labeling.sqlite_backend"
        config.setdefault("OPTIONS", {}).update(
            {
                "timeout": env.int("SQLITE_BUSY_TIMEOUT", default=120),
                "transaction_mode": "IMMEDIATE",
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            }
        )
    elif config["ENGINE"] == "django.db.backends.postgresql" and env.bool(
        "DATABASE_PREPARED_STATEMENTS", default=True
    ):
        config.setdefault("OPTIONS", {}).update(
            {"server_side_binding": True, "prepare_threshold": 5}
        )
    config["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=config.get("CONN_MAX_AGE", 0))
    config["CONN_HEALTH_CHECKS"] = True
    return config


def caches(env: environ.Env) -> dict[str, dict[str, Any]]:
    """``CACHES`` from ``CERTLABEL_CACHE_URL`` (process memory when unset).

    ``default`` holds the throttle counters. A redis:// or rediss:// cache is
    ``labeling.cache.FallbackRedisCache``: while Redis is away it answers from process memory
    (one warning per outage), and no call waits more than 0.5 s on Redis. ``shared`` counts the
    token endpoint's budget across processes and machines: the Redis cache, else the database
    cache table ``certlabel_cache`` (created by a migration).
    """
    configured = {"default": _url(env, env.cache_url, "CERTLABEL_CACHE_URL", "locmemcache://")}
    default = configured["default"]
    scheme = env.str("CERTLABEL_CACHE_URL", default="").strip().lower()
    if scheme.startswith(("redis://", "rediss://")):
        default["BACKEND"] = REDIS_CACHE
        default["OPTIONS"] = {
            "socket_connect_timeout": 0.5,
            "socket_timeout": 0.5,
            **(default.get("OPTIONS") or {}),
        }
        configured["shared"] = default
    else:
        configured["shared"] = {
            "BACKEND": "django.core.cache.backends.db.DatabaseCache",
            "LOCATION": "certlabel_cache",
        }
    return configured


def s3_storage(
    env: environ.Env, bucket: str, prefix: str, url_seconds: int, *, overwrite: bool
) -> dict[str, Any]:
    """The django-storages S3 backend on ``bucket``, its keys under ``prefix``.

    Objects stay private; downloads use presigned URLs valid ``url_seconds``. A custom endpoint
    (``CERTLABEL_S3_ENDPOINT_URL``, e.g. MinIO) is addressed path style unless
    ``CERTLABEL_S3_ADDRESSING_STYLE`` says otherwise. Without ``CERTLABEL_S3_ACCESS_KEY_ID`` and
    ``CERTLABEL_S3_SECRET_ACCESS_KEY``, boto3 finds credentials itself (``AWS_ACCESS_KEY_ID``,
    ``AWS_PROFILE``, the machine's instance role). A file read from the store is spooled to a
    temporary file beyond 8 MiB.

    Raises:
        ImproperlyConfigured: an unknown addressing style, or only one of the two keys.
    """
    endpoint = env.str("CERTLABEL_S3_ENDPOINT_URL", default="") or None
    style = env.str("CERTLABEL_S3_ADDRESSING_STYLE", default="path" if endpoint else "")
    if style not in ("", "auto", "path", "virtual"):
        raise ImproperlyConfigured(
            f"CERTLABEL_S3_ADDRESSING_STYLE must be path, virtual or auto, not {style!r}."
        )
    options: dict[str, object] = {
        "bucket_name": bucket,
        "location": prefix,
        "endpoint_url": endpoint,
        "region_name": env.str("CERTLABEL_S3_REGION", default="") or None,
        "addressing_style": style or None,
        "signature_version": "s3v4",
        "default_acl": None,
        "querystring_auth": True,
        "querystring_expire": url_seconds,
        "file_overwrite": overwrite,
        "max_memory_size": 8 * 1024 * 1024,
    }
    key = env.str("CERTLABEL_S3_ACCESS_KEY_ID", default="")
    secret = env.str("CERTLABEL_S3_SECRET_ACCESS_KEY", default="")
    if bool(key) != bool(secret):
        raise ImproperlyConfigured(
            "Set both CERTLABEL_S3_ACCESS_KEY_ID and CERTLABEL_S3_SECRET_ACCESS_KEY, or neither."
        )
    if key:
        options |= {"access_key": key, "secret_key": secret}
    return {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": options}
