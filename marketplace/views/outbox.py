"""Outbox page: the e-mails the site sent (the worker's sold e-mails), read back from the
file e-mail backend's folder (var/outbox/ in the demo).

Staff see every e-mail, others only those addressed to them. The newest files are read
first and at most MAX_FILES of them, so a large folder costs a bounded amount of work.
"""

import email
import email.message
import email.policy
import email.utils
from datetime import datetime
from pathlib import Path

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from ..mailers import FILE_BACKEND, default_mailer
from ..tasks import email_address

MAX_FILES = 200
MAX_SHOWN = 50
SEPARATOR = "-" * 79  # what the file backend writes after each message


def read_outbox(folder: Path, max_files: int = MAX_FILES) -> list[dict]:
    """Messages of the newest ``max_files`` files, newest first."""
    if not folder.is_dir():
        return []
    files = sorted(folder.glob("*.log"), key=lambda p: p.stat().st_mtime, reverse=True)
    found = []
    for path in files[:max_files]:
        text = path.read_text(encoding="utf-8", errors="replace")
        for chunk in text.split(SEPARATOR):
            if not chunk.strip():
                continue
            message = email.message_from_string(chunk.lstrip("\n"), policy=email.policy.default)
            body = message.get_body(preferencelist=("plain",))
            found.append(
                {
                    "to": str(message.get("To", "")),
                    "recipients": addresses(message.get_all("To", [])),
                    "subject": str(message.get("Subject", "")),
                    "date": sent_at(message),
                    "body": body.get_content() if body is not None else "",
                }
            )
    return found


def sent_at(message: email.message.EmailMessage) -> datetime | None:
    """The moment in the message's Date header; None when it has none or it is unreadable."""
    try:
        header = message.get("Date")
        return getattr(header, "datetime", None)
    except (TypeError, ValueError, IndexError):
        return None


def addresses(headers: list) -> set[str]:
    """The e-mail addresses of To headers, lowercased: "Ann <Ann@x.test>, b@x.test" ->
    {"ann@x.test", "b@x.test"}."""
    return {address.lower() for _, address in email.utils.getaddresses(map(str, headers))}


@login_required
@require_GET
def outbox(request: HttpRequest) -> HttpResponse:
    backend, folder = default_mailer()
    file_backend = backend == FILE_BACKEND and folder
    messages = read_outbox(Path(folder)) if file_backend else []
    if not request.user.is_staff:
        # The whole address, not a part of it: user "ice" must not see alice's e-mail.
        mine = email_address(request.user.get_username()).lower()
        messages = [m for m in messages if mine in m["recipients"]]
    context = {
        "messages_sent": messages[:MAX_SHOWN],
        "total": len(messages),
        "folder": folder,
        "file_backend": bool(file_backend),
    }
    return render(request, "marketplace/outbox.html", context)
