"""Sending e-mail: one helper that reports failure instead of raising.

The backend comes from ``EMAIL_URL`` (see labeling/settings.py); unset, e-mails are written as
files to ``settings.MAIL_DIR``. A failure (mail server down, folder not writable) is logged as
``mail.failed`` and returned as False, so the page or API answer can tell the person.
"""

from __future__ import annotations

import logging
import smtplib

from django.core.mail import send_mail

logger = logging.getLogger(__name__)


def mail_send(*, subject: str, body: str, to: str, purpose: str) -> bool:
    """Send one plain-text e-mail from ``DEFAULT_FROM_EMAIL`` to ``to``.

    ``purpose`` (``invitation``, ``password_reset``) is for the log.

    Returns:
        True if the backend accepted it, False if sending failed (logged as ``mail.failed``).
    """
    try:
        send_mail(subject, body, None, [to])
    except (smtplib.SMTPException, OSError) as exc:
        logger.error(
            "mail.failed",
            extra={"purpose": purpose, "error": f"{type(exc).__name__}: {exc}"},
        )
        return False
    logger.info("mail.sent", extra={"purpose": purpose})
    return True
