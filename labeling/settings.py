"""Django settings for certlabel: every value comes from the environment, with embedded defaults.

With no environment at all, certlabel runs on a SQLite file next to ``manage.py`` and executes
Celery tasks in-process, so ``make demo`` needs no server. Production sets ``DATABASE_URL``
(PostgreSQL) and ``CELERY_BROKER_URL`` (Redis) and runs ``celery -A labeling worker``
separately. See README.md.
"""

from __future__ import annotations

from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

# The development key is public: with DEBUG off it is refused (see the check below).
DEV_SECRET_KEY = "django-insecure-certlabel-development-key-do-not-use-in-production"  # noqa: S105

env = environ.Env()

# ---------------------------------------------------------------------------------------------
# Core
# ---------------------------------------------------------------------------------------------
DEBUG = env.bool("DJANGO_DEBUG", default=True)
SECRET_KEY = env.str("DJANGO_SECRET_KEY", default=DEV_SECRET_KEY)
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

if not DEBUG:
    if SECRET_KEY == DEV_SECRET_KEY or len(SECRET_KEY) < 32:
        raise ImproperlyConfigured(
            "DJANGO_DEBUG is off but DJANGO_SECRET_KEY is unset, the development key, or shorter "
            "than 32 characters. Set a long random DJANGO_SECRET_KEY."
        )
    if not env.list("DJANGO_ALLOWED_HOSTS", default=[]):
        raise ImproperlyConfigured("DJANGO_DEBUG is off but DJANGO_ALLOWED_HOSTS is unset.")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "labeling",
    "certification",
]

MIDDLEWARE = [
    # Every error under /api/ is JSON of one shape; a database outage is a 503
    # (labeling/api_errors.py).
    "labeling.api_errors.ApiErrorMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # A domain error escaping an HTML view becomes the page of its status (404, 403, 409, 400);
    # a database outage the styled 503 page.
    "labeling.views.errors.DomainErrorMiddleware",
]
# The Retry-After (seconds) of a 503 answered while the database is unreachable.
CERTLABEL_RETRY_AFTER_SECONDS = env.int("CERTLABEL_RETRY_AFTER_SECONDS", default=5)

ROOT_URLCONF = "labeling.urls"
WSGI_APPLICATION = "labeling.wsgi.application"
ASGI_APPLICATION = "labeling.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# ---------------------------------------------------------------------------------------------
# Database: https://django-environ.readthedocs.io/en/latest/types.html#environ-env-db-url
# ---------------------------------------------------------------------------------------------
DATABASES = {"default": env.db_url("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets readers proceed while an import writes. IMMEDIATE transactions take the write
    # lock at BEGIN, so a second writer waits (up to the timeout) instead of failing with
    # "database is locked" when it upgrades a read transaction.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            # Seconds a writer waits for another (e.g. an import) before giving up.
            "timeout": env.int("SQLITE_BUSY_TIMEOUT", default=120),
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )
# Seconds a connection is kept between requests (0: one per request). Production web servers
# should keep them (e.g. 60): opening a PostgreSQL connection costs more than most requests.
# https://docs.djangoproject.com/en/5.2/ref/databases/#persistent-connections
DATABASES["default"]["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=0)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# ---------------------------------------------------------------------------------------------
# Auth
# ---------------------------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "project-list"
LOGOUT_REDIRECT_URL = "login"

# ---------------------------------------------------------------------------------------------
# Internationalisation, static files, uploads
# ---------------------------------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = env.path("DJANGO_STATIC_ROOT", default=BASE_DIR / "staticfiles")
# Uploaded workloads above this size are streamed from a temporary file, never held in memory.
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024

# ---------------------------------------------------------------------------------------------
# Celery: https://docs.celeryq.dev/en/stable/userguide/configuration.html
# ---------------------------------------------------------------------------------------------
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="memory://")
CELERY_RESULT_BACKEND = env.str("CELERY_RESULT_BACKEND", default=None)
# Without a real broker, tasks run in-process (the embedded default); with one, a worker runs them.
CELERY_TASK_ALWAYS_EAGER = env.bool(
    "CELERY_TASK_ALWAYS_EAGER", default=CELERY_BROKER_URL.startswith("memory://")
)
CELERY_TASK_EAGER_PROPAGATES = env.bool("CELERY_TASK_EAGER_PROPAGATES", default=True)
CELERY_TASK_SOFT_TIME_LIMIT = env.int("CELERY_TASK_SOFT_TIME_LIMIT", default=600)
CELERY_TASK_TIME_LIMIT = env.int("CELERY_TASK_TIME_LIMIT", default=660)
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
# Periodic tasks, run by `celery -A labeling beat` next to the workers. Leases that ran out give
# their slot back within a minute (claims also release the stale leases they meet); the pinned
# source texts are verified once a day.
# https://docs.celeryq.dev/en/stable/userguide/periodic-tasks.html
CELERY_BEAT_SCHEDULE = {
    "assignments-release-expired": {
        "task": "labeling.tasks.assignments_release_expired_task",
        "schedule": 60.0,
        "options": {"expires": 55},
    },
    # Recompute every pinned source text's sha256 and length (a mismatch is logged as an error).
    # Reads only; a run that waited an hour for a worker is dropped, the next day's comes.
    "source-versions-verify": {
        "task": "labeling.tasks.source_versions_verify_all_task",
        "schedule": 24 * 60 * 60.0,
        "options": {"expires": 60 * 60},
    },
}

# ---------------------------------------------------------------------------------------------
# REST framework and OpenAPI
# ---------------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "labeling.api.permissions.ProjectRolePermission",
        # Last: malformed, empty or unknown query parameters are a 400 (labeling/api/params.py).
        "labeling.api.params.QueryParameterCheck",
    ],
    "DEFAULT_PAGINATION_CLASS": "labeling.api.pagination.CappedLimitOffsetPagination",
    "PAGE_SIZE": 50,
    # JSON only: errors are JSON of one shape (labeling/api_errors.py); the browsable API would
    # answer them as HTML. The interactive docs are at /api/docs/.
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # Adds the error responses of the contract to every operation (labeling/api/schema.py).
    "DEFAULT_SCHEMA_CLASS": "labeling.api.schema.ContractAutoSchema",
    "EXCEPTION_HANDLER": "labeling.api_errors.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "certlabel API",
    "DESCRIPTION": (
        "Labelling, adjudication and certification of RAG outputs against pinned sources. "
        "Every 4xx and 5xx answers the `Error` body: `{detail, code, errors: [{field, reason}]}`."
    ),
    "VERSION": "0.1.0",
    # Query and path parameters: bounds and non-empty strings stated (labeling/api/schema.py).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "labeling.api.schema.postprocess_parameters",
    ],
}

# ---------------------------------------------------------------------------------------------
# Security (effective when DEBUG is off; `manage.py check --deploy` reviews them)
# ---------------------------------------------------------------------------------------------
SESSION_COOKIE_SECURE = env.bool("DJANGO_SECURE_COOKIES", default=not DEBUG)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"

# ---------------------------------------------------------------------------------------------
# Logging
# ---------------------------------------------------------------------------------------------
# Every field a log call passes with ``extra=`` (ids, counts) is printed after the message:
# ``kv`` (default) as key=value pairs on the line, ``json`` as one JSON object per line.
LOG_FORMAT = env.str("CERTLABEL_LOG_FORMAT", default="kv")
if LOG_FORMAT not in ("kv", "json"):
    raise ImproperlyConfigured(f"CERTLABEL_LOG_FORMAT must be kv or json, not {LOG_FORMAT!r}.")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "kv": {
            "class": "labeling.logformat.KeyValueFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s %(message)s",
        },
        "json": {"class": "labeling.logformat.JsonFormatter"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT}},
    "root": {"handlers": ["console"], "level": env.str("DJANGO_LOG_LEVEL", default="INFO")},
}
# A Celery worker keeps this configuration (and so the context fields) instead of replacing the
# root logger's handlers with its own.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# ---------------------------------------------------------------------------------------------
# Release storage: where built releases are kept. The default is a local directory;
# several machines need a shared one (a network volume at CERTLABEL_RELEASE_ROOT, or another
# Django storage backend configured here under the "releases" alias).
# ---------------------------------------------------------------------------------------------
RELEASE_ROOT = env.path("CERTLABEL_RELEASE_ROOT", default=BASE_DIR / "var" / "releases")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "releases": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(RELEASE_ROOT)},
    },
}
