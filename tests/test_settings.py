"""labeling/settings.py reads everything from the environment and fails fast in production.

Each case starts a fresh interpreter, because settings are read once per process.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from labeling.settings import DEV_SECRET_KEY

REPO = Path(__file__).resolve().parents[1]
LONG_KEY = "k3y-" + "x" * 60
# Variables the settings read; the parent's values (e.g. CI's DATABASE_URL) must not leak in.
SETTINGS_PREFIXES = ("DJANGO_", "DATABASE_", "CELERY_", "EMAIL_", "CERTLABEL_MAIL_DIR")
REPORT = (
    "import json, django; django.setup(); from django.conf import settings as s; "
    "print(json.dumps({'engine': s.DATABASES['default']['ENGINE'], 'debug': s.DEBUG, "
    "'broker': s.CELERY_BROKER_URL, 'eager': s.CELERY_TASK_ALWAYS_EAGER, "
    "'conn_max_age': s.DATABASES['default']['CONN_MAX_AGE'], "
    "'options': s.DATABASES['default'].get('OPTIONS', {})}, default=str))"
)


def run_setup(**env: str) -> subprocess.CompletedProcess[str]:
    """Run ``django.setup()`` in a new interpreter; ``env`` is all it gets of the settings vars."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(SETTINGS_PREFIXES)}
    clean.update(env, DJANGO_SETTINGS_MODULE="labeling.settings")
    return subprocess.run(
        [sys.executable, "-c", REPORT],
        cwd=REPO,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def report(**env: str) -> dict[str, object]:
    result = run_setup(**env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"DJANGO_DEBUG": "false"}, "DJANGO_SECRET_KEY"),
        ({"DJANGO_DEBUG": "false", "DJANGO_SECRET_KEY": DEV_SECRET_KEY}, "DJANGO_SECRET_KEY"),
        ({"DJANGO_DEBUG": "false", "DJANGO_SECRET_KEY": "short"}, "DJANGO_SECRET_KEY"),
        ({"DJANGO_DEBUG": "false", "DJANGO_SECRET_KEY": LONG_KEY}, "DJANGO_ALLOWED_HOSTS"),
    ],
    ids=["no-key", "dev-key", "short-key", "no-hosts"],
)
def test_production_without_secrets_refuses_to_start(env, names):
    # given DEBUG off and a missing or unsafe secret (or no hosts)
    # when Django starts
    result = run_setup(**env)
    # then it exits with ImproperlyConfigured naming the variable to set
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert names in result.stderr


def test_production_with_long_key_and_hosts_starts():
    settings = report(
        DJANGO_DEBUG="false", DJANGO_SECRET_KEY=LONG_KEY, DJANGO_ALLOWED_HOSTS="labels.example.org"
    )
    assert settings["debug"] is False


def test_no_environment_means_sqlite_and_eager_celery():
    settings = report()
    assert settings == {
        "engine": "labeling.sqlite_backend",
        "debug": True,
        "broker": "memory://",
        "eager": True,
        "conn_max_age": 0,
        "options": {
            "timeout": 120,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        },
    }


def test_database_url_selects_postgresql():
    settings = report(DATABASE_URL="postgres://certlabel@db.example.org:5432/certlabel")
    assert settings["engine"] == "django.db.backends.postgresql"
    assert settings["options"] == {"server_side_binding": True, "prepare_threshold": 5}


def test_prepared_statements_can_be_turned_off_for_a_pooler():
    settings = report(
        DATABASE_URL="postgres://certlabel@db.example.org:5432/certlabel",
        DATABASE_PREPARED_STATEMENTS="false",
    )
    assert settings["options"] == {}


@pytest.mark.django_db
def test_postgresql_prepares_a_statement_the_connection_runs_again():
    """Server-side binding: psycopg prepares a statement from its sixth run on a connection."""
    from django.db import connection

    from labeling.models import Project

    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only")
    for _ in range(6):
        list(Project.objects.filter(slug="no-such-project"))
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        prepared = [row[0] for row in cursor.fetchall()]
    assert any('FROM "labeling_project"' in statement for statement in prepared), prepared


def test_redis_broker_turns_eager_execution_off():
    settings = report(CELERY_BROKER_URL="redis://127.0.0.1:6379/0")
    assert settings["broker"] == "redis://127.0.0.1:6379/0"
    assert settings["eager"] is False


# ---------------------------------------------------------------------------------------------
# HTTPS: redirect, HSTS, secure cookies and the proxy header
# ---------------------------------------------------------------------------------------------
SECURITY_REPORT = (
    "import json, django; django.setup(); from django.conf import settings as s; "
    "print(json.dumps({'redirect': s.SECURE_SSL_REDIRECT, 'hsts': s.SECURE_HSTS_SECONDS, "
    "'subdomains': s.SECURE_HSTS_INCLUDE_SUBDOMAINS, 'preload': s.SECURE_HSTS_PRELOAD, "
    "'proxy': list(getattr(s, 'SECURE_PROXY_SSL_HEADER', None) or []), "
    "'session_secure': s.SESSION_COOKIE_SECURE, 'csrf_secure': s.CSRF_COOKIE_SECURE}))"
)
PRODUCTION = {
    "DJANGO_DEBUG": "false",
    "DJANGO_SECRET_KEY": LONG_KEY,
    "DJANGO_ALLOWED_HOSTS": "certlabel.example.org",
}


def security_report(**env: str) -> dict[str, object]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(SETTINGS_PREFIXES)}
    clean.update(env, DJANGO_SETTINGS_MODULE="labeling.settings")
    result = subprocess.run(
        [sys.executable, "-c", SECURITY_REPORT],
        cwd=REPO,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_https_declared_in_production_turns_on_redirect_hsts_and_secure_cookies():
    assert security_report(**PRODUCTION, DJANGO_HTTPS="true") == {
        "redirect": True,
        "hsts": 31536000,
        "subdomains": True,
        "preload": False,
        "proxy": ["HTTP_X_FORWARDED_PROTO", "https"],
        "session_secure": True,
        "csrf_secure": True,
    }


def test_production_without_https_declared_sends_no_hsts_and_no_redirect():
    report_ = security_report(**PRODUCTION)
    assert report_["redirect"] is False
    assert report_["hsts"] == 0
    assert report_["proxy"] == []
    # cookies stay secure with DEBUG off, as before
    assert report_["session_secure"] is True


def test_https_declared_with_debug_on_does_not_redirect_or_pin_hsts():
    report_ = security_report(DJANGO_DEBUG="true", DJANGO_HTTPS="true")
    assert (report_["redirect"], report_["hsts"]) == (False, 0)
    assert report_["session_secure"] is True


def test_each_https_setting_can_be_overridden():
    report_ = security_report(
        **PRODUCTION,
        DJANGO_HTTPS="true",
        DJANGO_SECURE_SSL_REDIRECT="false",
        DJANGO_SECURE_HSTS_SECONDS="3600",
        DJANGO_SECURE_HSTS_PRELOAD="true",
        DJANGO_SECURE_PROXY_SSL_HEADER="false",
    )
    assert report_["redirect"] is False
    assert (report_["hsts"], report_["preload"]) == (3600, True)
    assert report_["proxy"] == []


def test_check_deploy_with_https_declared_leaves_only_the_preload_warning():
    clean = {k: v for k, v in os.environ.items() if not k.startswith(SETTINGS_PREFIXES)}
    clean.update(PRODUCTION, DJANGO_HTTPS="true", DJANGO_SETTINGS_MODULE="labeling.settings")
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy"],
        cwd=REPO,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    output = result.stdout + result.stderr
    warnings = sorted(set(re.findall(r"\(([a-z_]+\.[WE]\d+)\)", output)))
    # HSTS preload is an opt-in (DJANGO_SECURE_HSTS_PRELOAD): it commits the whole domain.
    assert warnings == ["security.W021"], output


def test_throttle_rates_and_login_limit_come_from_the_environment():
    clean = {k: v for k, v in os.environ.items() if not k.startswith(SETTINGS_PREFIXES)}
    clean.update(
        DJANGO_SETTINGS_MODULE="labeling.settings",
        CERTLABEL_THROTTLE_ANON="7/minute",
        CERTLABEL_THROTTLE_USER="70/hour",
        CERTLABEL_THROTTLE_TOKEN="2/minute",
        CERTLABEL_LOGIN_FAILURE_LIMIT="9",
        CERTLABEL_LOGIN_COOLOFF_HOURS="0",
    )
    code = (
        "import json, django; django.setup(); from django.conf import settings as s; "
        "print(json.dumps([s.REST_FRAMEWORK['DEFAULT_THROTTLE_RATES'], s.AXES_FAILURE_LIMIT, "
        "s.AXES_COOLOFF_TIME]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    rates, limit, cooloff = json.loads(result.stdout.strip().splitlines()[-1])
    assert rates == {"anon": "7/minute", "user": "70/hour", "token": "2/minute"}
    # 0 hours: locked until an administrator unlocks
    assert (limit, cooloff) == (9, None)


MAIL_REPORT = (
    "import json, django; django.setup(); from django.conf import settings as s; "
    "print(json.dumps({'backend': s.EMAIL_BACKEND.rsplit('.', 2)[-2], "
    "'path': getattr(s, 'EMAIL_FILE_PATH', None), 'host': s.EMAIL_HOST, 'port': s.EMAIL_PORT, "
    "'user': s.EMAIL_HOST_USER, 'tls': s.EMAIL_USE_TLS}))"
)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, {"backend": "filebased", "path": str(REPO / "var" / "mail")}),
        ({"CERTLABEL_MAIL_DIR": "/tmp/outbox"}, {"backend": "filebased", "path": "/tmp/outbox"}),
        ({"EMAIL_URL": "filemail:///srv/mail"}, {"backend": "filebased", "path": "/srv/mail"}),
        ({"EMAIL_URL": "consolemail://"}, {"backend": "console"}),
        (
            {"EMAIL_URL": "smtp+tls://bot:secret@mail.example.org:587"},
            {
                "backend": "smtp",
                "host": "mail.example.org",
                "port": 587,
                "user": "bot",
                "tls": True,
            },
        ),
    ],
    ids=["default-outbox", "mail-dir", "filemail", "console", "smtp-tls"],
)
def test_email_url_configures_sending(env, expected):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(SETTINGS_PREFIXES)}
    clean.update(env, DJANGO_SETTINGS_MODULE="labeling.settings")
    result = subprocess.run(
        [sys.executable, "-c", MAIL_REPORT],
        cwd=REPO,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout.strip().splitlines()[-1])
    assert {k: got[k] for k in expected} == expected


@pytest.mark.parametrize(
    ("env", "age"),
    [
        ({}, 0),
        ({"DATABASE_URL": "sqlite:////tmp/certlabel-settings.sqlite3?conn_max_age=600"}, 600),
        ({"DATABASE_CONN_MAX_AGE": "60"}, 60),
        (
            {
                "DATABASE_URL": "sqlite:////tmp/certlabel-settings.sqlite3?conn_max_age=600",
                "DATABASE_CONN_MAX_AGE": "0",
            },
            0,
        ),
    ],
    ids=["default", "url", "variable", "variable-wins"],
)
def test_connections_are_kept_as_the_url_or_the_variable_says(env, age):
    """A URL's ?conn_max_age= is kept (it was once overwritten by the variable's default)."""
    assert report(**env)["conn_max_age"] == age


CACHE_REPORT = (
    "import json, django; django.setup(); from django.conf import settings as s; "
    "print(json.dumps({'cache': s.CACHES['default'], 'exempt': s.SECURE_REDIRECT_EXEMPT}))"
)


def cache_report(**env: str) -> dict[str, Any]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith((*SETTINGS_PREFIXES, "CERTLABEL_CACHE_URL", "CERTLABEL_READY"))
    }
    clean.update(env, DJANGO_SETTINGS_MODULE="labeling.settings")
    result = subprocess.run(
        [sys.executable, "-c", CACHE_REPORT],
        cwd=REPO,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("scheme", ["redis", "rediss"])
def test_a_redis_cache_url_selects_the_fallback_backend_with_short_timeouts(scheme):
    got = cache_report(CERTLABEL_CACHE_URL=f"{scheme}://:pw@redis.example.org:6379/2")["cache"]
    assert got == {
        "BACKEND": "labeling.cache.FallbackRedisCache",
        "LOCATION": f"{scheme}://:pw@redis.example.org:6379/2",
        "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
    }


def test_the_default_cache_stays_per_process_and_health_is_never_redirected():
    got = cache_report(DJANGO_SECURE_REDIRECT_EXEMPT="^status/$")
    assert got["cache"]["BACKEND"] == "django.core.cache.backends.locmem.LocMemCache"
    assert got["exempt"] == [r"^health/(live|ready)$", "^status/$"]


def test_an_unknown_readiness_check_refuses_to_start():
    result = run_setup(CERTLABEL_READY_REQUIRES="database,redis")
    assert result.returncode != 0
    assert "CERTLABEL_READY_REQUIRES" in result.stderr and "redis" in result.stderr


@pytest.mark.parametrize(
    "env",
    [
        {"DATABASE_URL": ""},
        {"DATABASE_URL": "garbage"},
        {"DATABASE_URL": "postgres://u:p@h:notaport/db"},
        {"SQLITE_BUSY_TIMEOUT": "abc"},
        {"DATABASE_CONN_MAX_AGE": "abc"},
        {"CERTLABEL_S3_URL_SECONDS": "x"},
        {"CERTLABEL_WORK_LAPSE_SECONDS": "soon"},
    ],
    ids=lambda env: "-".join(f"{k}={v}" for k, v in env.items()),
)
def test_an_unreadable_value_is_refused_naming_its_variable(env):
    result = run_setup(**env)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("django.core.exceptions.ImproperlyConfigured: "), last
    assert next(iter(env)) in last


@pytest.mark.parametrize("url", ["REDIS://127.0.0.1:6379/2", " redis://127.0.0.1:6379/2"])
def test_a_redis_cache_url_is_known_whatever_its_case_or_leading_space(url):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(SETTINGS_PREFIXES)}
    clean.update(CERTLABEL_CACHE_URL=url, DJANGO_SETTINGS_MODULE="labeling.settings")
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, labeling.settings as s; "
            "print(json.dumps([s.CACHES[n]['BACKEND'] for n in ('default', 'shared')]))",
        ],
        cwd=REPO,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == ["labeling.cache.FallbackRedisCache"] * 2
