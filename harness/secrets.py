"""Redaction of credentials written into URLs, before anything is stored, printed or exported.

A user may put a key in an endpoint URL (``http://user:KEY@host/v1``, ``https://host/v1?api_key=KEY``).
:func:`redact` masks it in any text: a command line, a JSON document, one URL. It is the one
redaction the harness has; :class:`harness.store.Store` applies it to every run record it writes,
backends to what ``describe()`` reports, and ``harness regress --update`` to the baseline file.
API keys read from the environment (``BackendSpec.api_key_env``) are never written anywhere.
"""

from __future__ import annotations

import re

MASK = "***"

# scheme://userinfo@ : the whole userinfo when it is one token, only the password after "user:"
_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^\s/@?#\"'<>]+)@")
# ?api_key=... / &token=... : query (or fragment) parameters whose name says they carry a secret
_SECRET_PARAM = re.compile(
    r"(?P<lead>[?&;#](?:[\w.-]*[_.-])?"
    r"(?:api[_-]?key|apikey|key|token|secret|password|passwd|pwd|auth|authorization|signature|sig|"
    r"credential|credentials|access[_-]?token|client[_-]?secret|session)"
    r"=)(?P<value>[^&;#\s\"'<>]+)",
    re.IGNORECASE,
)


def _userinfo(m: re.Match[str]) -> str:
    info = m.group("userinfo")
    if MASK in info:
        return m.group(0)
    user, sep, _password = info.partition(":")
    return f"{m.group('scheme')}{user}:{MASK}@" if sep else f"{m.group('scheme')}{MASK}@"


def redact(text: str) -> str:
    """``text`` with URL credentials masked: the password of ``user:password@`` (or a lone
    ``token@``) and the values of secret-looking query parameters (``api_key``, ``token``, ...)."""
    if not text or ("@" not in text and "=" not in text):
        return text
    text = _USERINFO.sub(_userinfo, text)
    return _SECRET_PARAM.sub(lambda m: m.group("lead") + MASK, text)
