"""Django settings for certlabel: every value comes from the environment, with embedded defaults.

With no environment at all, certlabel runs on a SQLite file next to ``manage.py`` and executes
Celery tasks in-process, so ``make demo`` needs no server. Production sets ``DATABASE_URL``
(PostgreSQL) and ``CELERY_BROKER_URL`` (Redis) and runs ``celery -A labeling worker``
separately. See README.md.
"""

from __future__ import annotations

from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from labeling.settings_env import Env, caches, database, s3_storage

BASE_DIR = Path(__file__).resolve().parent.parent

# The development key is public: with DEBUG off it is refused (see the check below).
DEV_SECRET_KEY = "django-insecure-certlabel-development-key-do-not-use-in-production"  # noqa: S105

env = Env()

# ---------------------------------------------------------------------------------------------
# Core
# ---------------------------------------------------------------------------------------------
DEBUG = env.bool("DJANGO_DEBUG", default=True)
SECRET_KEY = env.str("DJANGO_SECRET_KEY", default=DEV_SECRET_KEY)
# Former keys, comma-separated, while a new DJANGO_SECRET_KEY is rolled out: signatures and
# the stored single sign-on refresh tokens made with them are still read.
SECRET_KEY_FALLBACKS = env.list("DJANGO_SECRET_KEY_FALLBACKS", default=[])
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
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "csp",
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
    # Rechecks a single sign-on session with the identity provider (CERTLABEL_OIDC_*).
    "labeling.views.sso.SsoSessionMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Content-Security-Policy on every response (CONTENT_SECURITY_POLICY below; with single
    # sign-on, forms may also end at the provider: logging out does).
    "labeling.views.sso.CspMiddleware",
    # Turns an axes lockout of a login into the lockout page (AXES_* below).
    "axes.middleware.AxesMiddleware",
    # A domain error escaping an HTML view becomes the page of its status (404, 403, 409, 400);
    # a database outage the styled 503 page.
    "labeling.views.errors.DomainErrorMiddleware",
]
# The Retry-After (seconds) of a 503 answered while the database is unreachable.
CERTLABEL_RETRY_AFTER_SECONDS = env.int("CERTLABEL_RETRY_AFTER_SECONDS", default=5)
# Who may create projects: staff, holders of labeling.add_project, and with this on everyone.
CERTLABEL_ANYONE_CREATES_PROJECTS = env.bool("CERTLABEL_ANYONE_CREATES_PROJECTS", default=False)

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
                # sign_in: single sign-on and local passwords, on or off (login pages).
                "labeling.views.sso.sign_in_options",
            ],
        },
    },
]

# ---------------------------------------------------------------------------------------------
# Database: DATABASE_URL (https://django-environ.readthedocs.io/en/latest/types.html); the
# options per vendor are in labeling/settings_env.py.
# ---------------------------------------------------------------------------------------------
DATABASES = {"default": database(env, default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}")}
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
# The axes backend first: it refuses a locked-out login before the password is checked
# (labeling/login_throttle.py); it refuses every password when CERTLABEL_PASSWORD_LOGIN is false.
AUTHENTICATION_BACKENDS = [
    "labeling.login_throttle.LoginThrottleBackend",
    "django.contrib.auth.backends.ModelBackend",
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "project-list"
LOGOUT_REDIRECT_URL = "login"

# Single sign-on through any OpenID Connect provider (authorization code flow with PKCE;
# labeling/services/sso.py, docs/operations.md). Off while CERTLABEL_OIDC_ISSUER is empty.
CERTLABEL_OIDC_ISSUER = env.str("CERTLABEL_OIDC_ISSUER", default="").rstrip("/")
CERTLABEL_OIDC_CLIENT_ID = env.str("CERTLABEL_OIDC_CLIENT_ID", default="")
CERTLABEL_OIDC_CLIENT_SECRET = env.str("CERTLABEL_OIDC_CLIENT_SECRET", default="")
CERTLABEL_OIDC_SCOPES = env.str("CERTLABEL_OIDC_SCOPES", default="openid email profile")
# The name on the login page's button ("Sign in with …").
CERTLABEL_OIDC_NAME = env.str("CERTLABEL_OIDC_NAME", default="single sign-on")
# The ID token or userinfo claim that lists the person's groups, and the roles they grant:
# comma-separated GROUP=PROJECT_SLUG:ROLE entries, or a JSON object from group to
# "PROJECT_SLUG:ROLE" (or a list of them) for group names holding commas; applied at each
# sign-in.
CERTLABEL_OIDC_GROUPS_CLAIM = env.str("CERTLABEL_OIDC_GROUPS_CLAIM", default="groups")
CERTLABEL_OIDC_ROLE_MAP = env.str("CERTLABEL_OIDC_ROLE_MAP", default="")
# Seconds between two checks with the provider that a signed-in person may still sign in
# (their refresh token is refused once they are deactivated there).
CERTLABEL_OIDC_RECHECK_SECONDS = env.float("CERTLABEL_OIDC_RECHECK_SECONDS", default=300.0)
# Seconds to wait for the provider's answer.
CERTLABEL_OIDC_TIMEOUT = env.float("CERTLABEL_OIDC_TIMEOUT", default=10.0)
# Local passwords (login page, admin, POST /api/auth/token/). Switch off once SSO works.
CERTLABEL_PASSWORD_LOGIN = env.bool("CERTLABEL_PASSWORD_LOGIN", default=True)

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
# E-mail (invitations, password resets). EMAIL_URL is django-environ's email_url:
# smtp://user:password@host:25, smtp+tls://...:587, smtp+ssl://...:465, consolemail://, or
# filemail:///absolute/folder. Unset, every e-mail is written as a file to MAIL_DIR (the demo's
# "outbox"), so invitations and password resets work without a mail server.
# ---------------------------------------------------------------------------------------------
MAIL_DIR = env.path("CERTLABEL_MAIL_DIR", default=BASE_DIR / "var" / "mail")
_EMAIL = env.email_url("EMAIL_URL", default="filemail://")
EMAIL_BACKEND = _EMAIL["EMAIL_BACKEND"]
if EMAIL_BACKEND == "django.core.mail.backends.filebased.EmailBackend":
    # email_url drops the leading "/" of filemail:///abs/path; an empty path is MAIL_DIR.
    EMAIL_FILE_PATH = (
        "/" + _EMAIL["EMAIL_FILE_PATH"] if _EMAIL["EMAIL_FILE_PATH"] else str(MAIL_DIR)
    )
EMAIL_HOST = _EMAIL["EMAIL_HOST"] or "localhost"
EMAIL_PORT = _EMAIL["EMAIL_PORT"] or 25
EMAIL_HOST_USER = _EMAIL["EMAIL_HOST_USER"] or ""
EMAIL_HOST_PASSWORD = _EMAIL["EMAIL_HOST_PASSWORD"] or ""
EMAIL_USE_TLS = _EMAIL.get("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = _EMAIL.get("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = env.int("EMAIL_TIMEOUT", default=10)
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="certlabel@localhost")
# How long an invitation (and its one-time join link) stays valid.
INVITATION_DAYS = env.int("CERTLABEL_INVITATION_DAYS", default=7)

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
# Late acknowledgement: a message is removed from the broker only once its task finished, and a
# task whose pool child died is handed back to the broker (rejected) to run again.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
# No task result is stored unless a task asks for it (source_versions_verify_task does): the
# recomputations and builds record their outcome in the database, and a request that enqueues
# a task never talks to the result backend.
CELERY_TASK_IGNORE_RESULT = True
# Three queues, each consumed by every worker (`celery -A labeling worker -Q
# housekeeping,recompute,builds`): the periodic housekeeping never waits behind a backlog of
# recomputations, and a long release build never delays them.
CELERY_TASK_DEFAULT_QUEUE = "recompute"
CERTLABEL_CELERY_QUEUES = ("housekeeping", "recompute", "builds")
CELERY_TASK_ROUTES = {
    "labeling.tasks.assignments_release_expired_task": {"queue": "housekeeping"},
    "labeling.tasks.work_recover_task": {"queue": "housekeeping"},
    "labeling.tasks.source_versions_verify_all_task": {"queue": "housekeeping"},
    "certification.tasks.derived_recompute_task": {"queue": "recompute"},
    "certification.tasks.calibration_run_execute_task": {"queue": "recompute"},
    "certification.tasks.release_build_task": {"queue": "builds"},
    "labeling.tasks.source_versions_verify_task": {"queue": "builds"},
    # Long background work (labeling.models.Job): imports and labelling starts.
    "labeling.tasks.job_run_task": {"queue": "builds"},
}
# Seconds before Redis hands an unacknowledged message to another worker: above the longest
# task's hard limit (3,660 s); the recovery pass finds a dead worker's work much earlier.
BROKER_VISIBILITY_TIMEOUT = env.int("CELERY_BROKER_VISIBILITY_TIMEOUT", default=4200)
# Seconds to connect to Redis and to wait for its answer, and publish retries: a request never
# waits long on a broker that is away (its change is marked and the recovery pass catches up).
REDIS_CONNECT_TIMEOUT = env.float("CELERY_REDIS_CONNECT_TIMEOUT", default=0.5)
REDIS_SOCKET_TIMEOUT = env.float("CELERY_REDIS_SOCKET_TIMEOUT", default=1.0)
PUBLISH_MAX_RETRIES = env.int("CELERY_PUBLISH_MAX_RETRIES", default=1)
CELERY_BROKER_CONNECTION_TIMEOUT = REDIS_CONNECT_TIMEOUT
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": BROKER_VISIBILITY_TIMEOUT,
    "socket_connect_timeout": REDIS_CONNECT_TIMEOUT,
    "socket_timeout": REDIS_SOCKET_TIMEOUT,
    "retry_on_timeout": False,
    "max_retries": PUBLISH_MAX_RETRIES,
    "interval_start": 0,
    "interval_step": 0.2,
    "interval_max": 0.2,
}
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": PUBLISH_MAX_RETRIES,
    "interval_start": 0,
    "interval_step": 0.2,
    "interval_max": 0.2,
}
CELERY_REDIS_SOCKET_CONNECT_TIMEOUT = REDIS_CONNECT_TIMEOUT
CELERY_REDIS_SOCKET_TIMEOUT = REDIS_SOCKET_TIMEOUT
CELERY_REDIS_RETRY_ON_TIMEOUT = False
CELERY_RESULT_BACKEND_TRANSPORT_OPTIONS = {"retry_policy": {"timeout": 1.0}}
# A worker that loses Redis keeps trying to reconnect (it has nothing else to do).
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None

# The background engine (labeling.engine): every piece of background work (jobs, calibration
# runs, release builds, recomputations of derived results) is leased by one worker, which
# refreshes its heartbeat every CERTLABEL_WORK_HEARTBEAT_SECONDS. A lease silent for
# CERTLABEL_WORK_LAPSE_SECONDS lost its worker, and work sent that long ago and never claimed
# lost its message: the recovery pass (every CERTLABEL_WORK_RECOVER_SECONDS) sends both again,
# and fails a job, run or build closed after CERTLABEL_WORK_MAX_ATTEMPTS claims. A worker death
# is so healed within the lapse plus one period of a worker being available.
CERTLABEL_WORK_HEARTBEAT_SECONDS = env.float("CERTLABEL_WORK_HEARTBEAT_SECONDS", default=5.0)
CERTLABEL_WORK_LAPSE_SECONDS = env.float("CERTLABEL_WORK_LAPSE_SECONDS", default=30.0)
CERTLABEL_WORK_RECOVER_SECONDS = env.float("CERTLABEL_WORK_RECOVER_SECONDS", default=10.0)
CERTLABEL_WORK_MAX_ATTEMPTS = env.int("CERTLABEL_WORK_MAX_ATTEMPTS", default=3)
if not 0 < CERTLABEL_WORK_HEARTBEAT_SECONDS < CERTLABEL_WORK_LAPSE_SECONDS:
    raise ImproperlyConfigured(
        "CERTLABEL_WORK_HEARTBEAT_SECONDS must be positive and below CERTLABEL_WORK_LAPSE_SECONDS."
    )
if CERTLABEL_WORK_RECOVER_SECONDS <= 0 or CERTLABEL_WORK_MAX_ATTEMPTS < 1:
    raise ImproperlyConfigured(
        "CERTLABEL_WORK_RECOVER_SECONDS must be positive, CERTLABEL_WORK_MAX_ATTEMPTS at least 1."
    )
# Seconds between the starts of two recomputations of one kind of a project's derived results;
# changes arriving meanwhile wait in the one queued recomputation (and the pages say so).
CERTLABEL_DERIVED_INTERVAL = env.float("CERTLABEL_DERIVED_INTERVAL", default=5.0)
# The largest share of a worker one kind of a project's derived results may take: after a
# recomputation that took d seconds, the next one starts no sooner than
# max(CERTLABEL_DERIVED_INTERVAL, (1 - share) / share * d) after it (1: the interval alone).
CERTLABEL_DERIVED_MAX_SHARE = env.float("CERTLABEL_DERIVED_MAX_SHARE", default=0.1)
if not 0 < CERTLABEL_DERIVED_MAX_SHARE <= 1:
    raise ImproperlyConfigured("CERTLABEL_DERIVED_MAX_SHARE must lie in (0, 1].")
# The false-alarm probability of the drift watch of applied certificates: a run's watch alarms
# when its conformal test martingale reaches 1 / delta, which happens with probability at most
# delta while the traffic is exchangeable with the calibration data (docs/certification.md,
# "Drift watch"). Frozen on each watch when the run is first applied.
CERTLABEL_DRIFT_DELTA = env.float("CERTLABEL_DRIFT_DELTA", default=0.01)
if not 0 < CERTLABEL_DRIFT_DELTA < 1:
    raise ImproperlyConfigured("CERTLABEL_DRIFT_DELTA must lie in (0, 1).")
# Without a broker, a web process runs background work on a thread (labeling.in_process), not
# inside the request; the thread also runs the engine's recovery pass, as beat does.
CERTLABEL_IN_PROCESS_THREAD = env.bool(
    "CERTLABEL_IN_PROCESS_THREAD", default=CELERY_TASK_ALWAYS_EAGER
)
# Periodic tasks, run by `celery -A labeling beat` next to the workers, all on the housekeeping
# queue. Each acts once per period however many beats run (labeling.engine.periodic_due), so a
# second beat does nothing. Leases of assignments that ran out give their slot back within a
# minute; the engine's recovery pass runs every CERTLABEL_WORK_RECOVER_SECONDS; the pinned
# source texts are verified once a day. ``expires`` is never shorter than the period, so a run
# is dropped only once the next one is due.
# https://docs.celeryq.dev/en/stable/userguide/periodic-tasks.html
CELERY_BEAT_SCHEDULE = {
    "assignments-release-expired": {
        "task": "labeling.tasks.assignments_release_expired_task",
        "schedule": 60.0,
        "options": {"expires": 60, "queue": "housekeeping"},
    },
    "work-recover": {
        "task": "labeling.tasks.work_recover_task",
        "schedule": CERTLABEL_WORK_RECOVER_SECONDS,
        "options": {"expires": CERTLABEL_WORK_RECOVER_SECONDS, "queue": "housekeeping"},
    },
    # Ask the identity provider whether each single sign-on account may still sign in
    # (labeling/services/sso.py); a refusal makes the identity lapse.
    "sso-recheck": {
        "task": "labeling.tasks.sso_recheck_task",
        "schedule": 60.0,
        "options": {"expires": 60, "queue": "housekeeping"},
    },
    # Every pinned source text's sha256 and length checked (a mismatch is logged as an error).
    "source-versions-verify": {
        "task": "labeling.tasks.source_versions_verify_all_task",
        "schedule": 24 * 60 * 60.0,
        "options": {"expires": 60 * 60, "queue": "housekeeping"},
    },
}

# ---------------------------------------------------------------------------------------------
# REST framework and OpenAPI
# ---------------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Hashed, named, expiring tokens (labeling/models/tokens.py); header "Token <secret>".
        "labeling.api.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "labeling.api.permissions.ProjectRolePermission",
        # Last: malformed, empty or unknown query parameters are a 400 (labeling/api/params.py).
        "labeling.api.params.QueryParameterCheck",
    ],
    # JSON bodies only, one value per key (labeling/api/parsers.py): the schema then declares one
    # media type per body, as generated clients need. Uploads set their own (multipart) parser.
    "DEFAULT_PARSER_CLASSES": ["labeling.api.parsers.StrictJSONParser"],
    # APIClient (tests) sends what the API takes.
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
    "DEFAULT_PAGINATION_CLASS": "labeling.api.pagination.CappedLimitOffsetPagination",
    "PAGE_SIZE": 50,
    # JSON only: errors are JSON of one shape (labeling/api_errors.py); the browsable API would
    # answer them as HTML. The interactive docs are at /api/docs/.
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # Adds the error responses of the contract to every operation (labeling/api/schema.py).
    "DEFAULT_SCHEMA_CLASS": "labeling.api.schema.ContractAutoSchema",
    "EXCEPTION_HANDLER": "labeling.api_errors.exception_handler",
    # Throttling (429 with Retry-After): every request by client address (anonymous) or user;
    # the token endpoint has its own, tighter scope. Counters live in the default cache.
    "DEFAULT_THROTTLE_CLASSES": [
        "rest_framework.throttling.AnonRateThrottle",
        "rest_framework.throttling.UserRateThrottle",
        "rest_framework.throttling.ScopedRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "anon": env.str("CERTLABEL_THROTTLE_ANON", default="60/minute"),
        "user": env.str("CERTLABEL_THROTTLE_USER", default="1200/minute"),
        "token": env.str("CERTLABEL_THROTTLE_TOKEN", default="10/minute"),
    },
    # Client address for the anonymous and token throttles: REMOTE_ADDR, or the address this
    # many proxies back in X-Forwarded-For when set (only behind proxies that set the header).
    "NUM_PROXIES": env.int("CERTLABEL_NUM_PROXIES", default=None),
}
SPECTACULAR_SETTINGS = {
    "TITLE": "certlabel API",
    "DESCRIPTION": (
        "Labelling, adjudication and certification of RAG outputs against pinned sources. "
        "Every 4xx and 5xx answers the `Error` body: `{detail, code, errors: [{field, reason}]}`."
    ),
    "VERSION": "0.1.0",
    # Swagger UI and Redoc from the vendored static files of drf-spectacular-sidecar.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # A component per direction (e.g. TokenObtainRequest, TokenObtain): a read-only output field
    # is not required of a request, nor a write-only input field promised in a response.
    "COMPONENT_SPLIT_REQUEST": True,
    # Names of enums that would collide or repeat: one enum for the scale of both label sets, and
    # the invitation's status named apart from the other outputs' "status".
    "ENUM_NAME_OVERRIDES": {
        "LabelScaleEnum": "labeling.models.LabelScale",
        "InvitationStateEnum": ["pending", "accepted", "declined", "revoked", "expired"],
    },
    # Query and path parameters: bounds and non-empty strings stated (labeling/api/schema.py).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "labeling.api.schema.postprocess_parameters",
    ],
}

# ---------------------------------------------------------------------------------------------
# Cache: the throttle counters, per process unless CERTLABEL_CACHE_URL names a shared one
# (e.g. redis://127.0.0.1:6379/2); see labeling/settings_env.py.
# ---------------------------------------------------------------------------------------------
CACHES = caches(env)

# Health endpoints (labeling/views/health.py): the checks whose failure makes /health/ready
# answer 503, of database, cache, broker, storage.releases, storage.jobs. The default leaves out
# the cache and the broker: labelling goes on while Redis is away, so a load balancer must not
# take the web processes out then (both are still reported).
CERTLABEL_READY_REQUIRES = env.list(
    "CERTLABEL_READY_REQUIRES", default=["database", "storage.releases", "storage.jobs"]
)
_READY_CHECKS = {"database", "cache", "broker", "storage.releases", "storage.jobs"}
if _unknown := sorted(set(CERTLABEL_READY_REQUIRES) - _READY_CHECKS):
    raise ImproperlyConfigured(
        f"CERTLABEL_READY_REQUIRES names unknown checks {_unknown}; "
        f"the checks are {sorted(_READY_CHECKS)}."
    )

# ---------------------------------------------------------------------------------------------
# Login throttling (django-axes): after AXES_FAILURE_LIMIT wrong passwords for one username
# from one address, logins of that username from that address are refused, even with the
# right password, and after CERTLABEL_LOGIN_ADDRESS_FAILURE_LIMIT wrong passwords for any
# usernames from one address, every login from it, until AXES_COOLOFF_TIME has passed or
# `manage.py axes_reset_username NAME` or `axes_reset_ip ADDRESS` (or the admin's "Access
# attempts") clears them. Failures are counted in the database.
# ---------------------------------------------------------------------------------------------
AXES_ENABLED = env.bool("CERTLABEL_AXES_ENABLED", default=True)
AXES_FAILURE_LIMIT = env.int("CERTLABEL_LOGIN_FAILURE_LIMIT", default=5)
# Hours (a float: 0.25 is 15 minutes); 0 locks until an administrator unlocks.
_LOGIN_COOLOFF_HOURS = env.float("CERTLABEL_LOGIN_COOLOFF_HOURS", default=0.25)
AXES_COOLOFF_TIME = _LOGIN_COOLOFF_HOURS or None
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
# And per address, across usernames (password spraying): labeling.login_throttle.
AXES_HANDLER = "labeling.login_throttle.LoginAttemptHandler"
CERTLABEL_LOGIN_ADDRESS_FAILURE_LIMIT = env.int("CERTLABEL_LOGIN_ADDRESS_FAILURE_LIMIT", default=20)
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
# The client address axes counts by: REMOTE_ADDR unless proxies are declared (see NUM_PROXIES).
AXES_IPWARE_PROXY_COUNT = env.int("CERTLABEL_NUM_PROXIES", default=None)
if AXES_IPWARE_PROXY_COUNT:
    AXES_IPWARE_META_PRECEDENCE_ORDER = ("HTTP_X_FORWARDED_FOR", "REMOTE_ADDR")
AXES_COOLOFF_MESSAGE = (
    "Too many failed logins for this account from your address: logging in is blocked for a "
    "while. Try again later, or ask an administrator to unlock the account."
)
AXES_PERMALOCK_MESSAGE = (
    "Too many failed logins for this account from your address: logging in is blocked until "
    "an administrator unlocks the account."
)

# ---------------------------------------------------------------------------------------------
# Security (effective when DEBUG is off; `manage.py check --deploy` reviews them)
# ---------------------------------------------------------------------------------------------
# DJANGO_HTTPS=true declares that the site is served over HTTPS (directly or behind a proxy
# that terminates TLS). With DEBUG off it turns on the SSL redirect, HSTS and secure cookies;
# each can still be set on its own below.
HTTPS = env.bool("DJANGO_HTTPS", default=False)
_SECURE = HTTPS and not DEBUG
SECURE_SSL_REDIRECT = env.bool("DJANGO_SECURE_SSL_REDIRECT", default=_SECURE)
SECURE_HSTS_SECONDS = env.int("DJANGO_SECURE_HSTS_SECONDS", default=31536000 if _SECURE else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", default=_SECURE)
SECURE_HSTS_PRELOAD = env.bool("DJANGO_SECURE_HSTS_PRELOAD", default=False)
# Behind a TLS-terminating proxy: trust its X-Forwarded-Proto header (the proxy must set or
# strip it on every request, or a client could claim HTTPS). On by default when HTTPS is
# declared; DJANGO_SECURE_PROXY_SSL_HEADER=false when Django itself terminates TLS.
if env.bool("DJANGO_SECURE_PROXY_SSL_HEADER", default=HTTPS):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Every path is redirected to HTTPS but the health endpoints (/health/live, /health/ready),
# which probes call over plain HTTP; further paths can be listed in DJANGO_SECURE_REDIRECT_EXEMPT
# (regular expressions, without the leading slash).
SECURE_REDIRECT_EXEMPT = [
    r"^health/(live|ready)$",
    *env.list("DJANGO_SECURE_REDIRECT_EXEMPT", default=[]),
]
SESSION_COOKIE_SECURE = env.bool("DJANGO_SECURE_COOKIES", default=HTTPS or not DEBUG)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SESSION_COOKIE_HTTPONLY = True
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

# Content-Security-Policy (django-csp): scripts, styles, images and fonts from this site only;
# no inline script, no inline style attribute, no frames, forms post only here. The charts are
# inline SVG styled by classes from the stylesheet (labeling/charts.py), so they need no inline
# style either. The Swagger page (vendored, labeling/urls.py) allows inline styles.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}

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
    # django-axes logs every login at INFO; lockouts are warnings.
    "loggers": {"axes": {"level": env.str("CERTLABEL_AXES_LOG_LEVEL", default="WARNING")}},
}
# A Celery worker keeps this configuration (and so the context fields) instead of replacing the
# root logger's handlers with its own.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# ---------------------------------------------------------------------------------------------
# Background jobs (labeling.models.Job): work too long for one HTTP request runs in a worker on
# the ``builds`` queue. A workload upload larger than JOB_IMPORT_BYTES, and starting labelling
# on a project with more than JOB_START_ITEMS items, become jobs; smaller ones stay in the
# request (instant answers for the demo). Jobs are leased and recovered by the background
# engine like every other background work. Uploads wait for their job in the "jobs" storage.
# ---------------------------------------------------------------------------------------------
JOB_IMPORT_BYTES = env.int("CERTLABEL_JOB_IMPORT_BYTES", default=2 * 1024 * 1024)
JOB_START_ITEMS = env.int("CERTLABEL_JOB_START_ITEMS", default=2000)
JOB_ROOT = env.path("CERTLABEL_JOB_ROOT", default=BASE_DIR / "var" / "jobs")

# ---------------------------------------------------------------------------------------------
# File storage: built releases (the "releases" alias, written by the worker that builds them,
# read by every web process that serves a download) and uploads waiting for their job ("jobs",
# written by a web process, read by a worker). With CERTLABEL_S3_BUCKET unset both are local
# directories (CERTLABEL_RELEASE_ROOT, CERTLABEL_JOB_ROOT): one machine, or a volume every machine
# mounts. With it set both live in that bucket of an S3-compatible object store (AWS S3, MinIO,
# Ceph...), under the keys releases/ and jobs/, through django-storages: what several machines
# sharing only PostgreSQL, Redis and the object store need.
# ---------------------------------------------------------------------------------------------
RELEASE_ROOT = env.path("CERTLABEL_RELEASE_ROOT", default=BASE_DIR / "var" / "releases")
# A worker's private folder for the release builds it runs (removed when each ends). Unset: beside
# local release storage, else a folder of the system's temporary directory named after the
# database (certification.services.releases.build.build_work_root).
CERTLABEL_BUILD_ROOT = env.str("CERTLABEL_BUILD_ROOT", default="")
S3_BUCKET = env.str("CERTLABEL_S3_BUCKET", default="")
# A release download from the object store: True answers 302 to a presigned URL of the file
# (valid for CERTLABEL_S3_URL_SECONDS; the client fetches the bytes from the store), False streams
# the file through the web process (the store need not be reachable by clients). A local storage
# always streams.
RELEASE_DOWNLOAD_REDIRECT = env.bool("CERTLABEL_S3_REDIRECT_DOWNLOADS", default=True)
S3_URL_SECONDS = env.int("CERTLABEL_S3_URL_SECONDS", default=300)
if S3_URL_SECONDS < 1 or S3_URL_SECONDS > 7 * 24 * 3600:
    raise ImproperlyConfigured(
        f"CERTLABEL_S3_URL_SECONDS must be 1 to 604800 (a week), not {S3_URL_SECONDS}."
    )


STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "releases": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(RELEASE_ROOT)},
    },
    "jobs": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(JOB_ROOT)},
    },
}
if S3_BUCKET:
    STORAGES |= {
        # A release's files are stored at exact keys (<project>/<release>/<build>/<name>); a
        # retried build replaces its own leftovers there.
        "releases": s3_storage(env, S3_BUCKET, "releases", S3_URL_SECONDS, overwrite=True),
        # An upload's key is a new random name: never replace another object.
        "jobs": s3_storage(env, S3_BUCKET, "jobs", S3_URL_SECONDS, overwrite=False),
    }
