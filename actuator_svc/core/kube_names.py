"""Kubernetes' syntax for object names, label keys and label values (apimachinery validation).

Each check returns the problem as a sentence, or None when the text is valid."""

from __future__ import annotations

import re
from typing import Final

MAX_SUBDOMAIN_LENGTH: Final = 253
MAX_LABEL_NAME_LENGTH: Final = 63
MAX_LABEL_VALUE_LENGTH: Final = 63
_SUBDOMAIN_PART = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN: Final = re.compile(rf"^{_SUBDOMAIN_PART}(\.{_SUBDOMAIN_PART})*$")
_QUALIFIED_NAME: Final = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def subdomain_problem(text: str) -> str | None:
    """DNS-1123 subdomain: lowercase alphanumerics, '-' and '.', at most 253 characters."""
    if len(text) > MAX_SUBDOMAIN_LENGTH:
        return f"is longer than {MAX_SUBDOMAIN_LENGTH} characters"
    if not _SUBDOMAIN.match(text):
        return (
            "must be a lowercase DNS-1123 subdomain "
            "(a-z, 0-9, '-' and '.', starting and ending alphanumeric)"
        )
    return None


def label_key_problem(key: str) -> str | None:
    """A qualified name: an optional DNS subdomain prefix and '/', then a name of at most 63
    alphanumerics, '-', '_' or '.' that starts and ends alphanumeric."""
    prefix, slash, name = key.rpartition("/")
    if slash and (problem := subdomain_problem(prefix)):
        return f"prefix {problem}"
    if not name:
        return "name part must not be empty"
    if len(name) > MAX_LABEL_NAME_LENGTH:
        return f"name part is longer than {MAX_LABEL_NAME_LENGTH} characters"
    if not _QUALIFIED_NAME.match(name):
        return (
            "name part may hold only alphanumerics, '-', '_' and '.', "
            "starting and ending alphanumeric"
        )
    return None


def label_value_problem(value: str) -> str | None:
    """Empty, or at most 63 alphanumerics, '-', '_' or '.' starting and ending alphanumeric."""
    if not value:
        return None
    if len(value) > MAX_LABEL_VALUE_LENGTH:
        return f"is longer than {MAX_LABEL_VALUE_LENGTH} characters"
    if not _QUALIFIED_NAME.match(value):
        return "may hold only alphanumerics, '-', '_' and '.', starting and ending alphanumeric"
    return None
