"""Credentials written into URLs: masked before anything is stored, printed or exported, and kept
out of the way when a URL is extended.

A user may put a key in an endpoint URL in several places: the userinfo
(``http://user:KEY@host/v1``, ``http://KEY@host/v1``), any query parameter
(``?api_key=KEY``, ``?code=KEY``, ``?bearer=KEY``: a server may read its key from a parameter of
any name), a path parameter (``/v1;KEY``, ``/v1;key=KEY``) or the fragment. :func:`redact` masks
all of them in any text: a command line, a JSON document, an error message, one URL. It is the one
redaction the harness has; :class:`harness.results.store.Store` applies it to every run record and every
stored error it writes, the CLI to what it prints, backends to what ``describe()`` reports, and
``harness regress --update`` to the baseline file. Outside URLs, ``name=value`` pairs whose name
says they carry a secret (``api_key=``, ``token=``, ...) are masked too. API keys read from the
environment (``BackendSpec.api_key_env``) are never written anywhere.

:func:`join_url` extends a URL's path by parsing it (``urllib.parse``): the query and fragment stay
where they are (``http://h/v1?token=K`` + ``health`` is ``http://h/v1/health?token=K``, never
``http://h/v1?token=K/health``). :func:`split_query` separates the query from a base URL for
clients that append paths to their base by concatenation (the ``openai`` client).
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlsplit, urlunsplit

MASK = "***"

# a URL in running text: scheme://... up to whitespace, a quote or an angle bracket
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s\"'<>`]+")
# outside URLs: name=value pairs whose name says they carry a secret
_SECRET_PARAM = re.compile(
    r"(?P<lead>(?:^|(?<=[\s?&;#,(\[{]))-{0,2}(?:[\w.-]*[_.-])?"
    r"(?:api[_-]?key|apikey|key|token|secret|password|passwd|pwd|auth|authorization|signature|sig|"
    r"credential|credentials|access[_-]?token|client[_-]?secret|session|bearer|code)"
    r"=)(?P<value>[^&;#\s\"'<>,)\]}]+)",
    re.IGNORECASE,
)
# one name=value (or lone value) of a query, fragment or path parameter list
_PAIR = re.compile(r"(?P<name>[^=&;]*=)?(?P<value>[^&;]*)")


def _mask_pairs(text: str) -> str:
    """Every value of a ``a=1&b=2`` (or ``;``-separated) list masked; a lone value masked whole."""

    def one(m: re.Match[str]) -> str:
        if not m.group(0):
            return ""
        value = m.group("value")
        return (m.group("name") or "") + (MASK if value else "")

    return _PAIR.sub(one, text)


def _redact_url(url: str) -> str:
    # authority: scheme://[userinfo@]host[:port]; the rest split by hand so nothing is re-encoded
    scheme, sep, rest = url.partition("://")
    cut = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    authority, tail = rest[:cut], rest[cut:]
    if "@" in authority:
        info, _, host = authority.rpartition("@")
        user, colon, password = info.partition(":")
        if info != MASK and password != MASK:
            info = f"{user}:{MASK}" if colon else MASK
        authority = f"{info}@{host}"
    tail, hash_, fragment = tail.partition("#")
    path, qmark, query = tail.partition("?")
    if ";" in path:  # path parameters: /v1;KEY, /v1;key=KEY
        path = "/".join(
            seg.split(";", 1)[0] + ";" + _mask_pairs(seg.split(";", 1)[1]) if ";" in seg else seg
            for seg in path.split("/")
        )
    if query:
        query = _mask_pairs(query)
    if fragment and "=" in fragment:
        fragment = _mask_pairs(fragment)
    return f"{scheme}{sep}{authority}{path}{qmark}{query}{hash_}{fragment}"


def redact(text: str) -> str:
    """``text`` with URL credentials masked: the password of ``user:password@`` (or a lone
    ``token@``), the value of every query and fragment parameter, every path parameter
    (``;KEY``); outside URLs, the values of secret-looking ``name=value`` pairs. Idempotent."""
    if not text or not any(c in text for c in "@=;?"):
        return text
    text = _URL.sub(lambda m: _redact_url(m.group(0)), text)
    return _SECRET_PARAM.sub(lambda m: m.group("lead") + MASK, text)


def join_url(base: str, *segments: str) -> str:
    """``base`` with ``segments`` appended to its path (one ``/`` between each), its query and
    fragment kept: built by parsing, never by string concatenation."""
    parts = urlsplit(base)
    path = parts.path.rstrip("/")
    for seg in segments:
        path += "/" + seg.strip("/")
    return urlunsplit(parts._replace(path=path))


def split_query(url: str) -> tuple[str, dict[str, str]]:
    """(``url`` without its query and fragment, the query's parameters): for clients that append
    request paths to a base URL by concatenation and take the query separately
    (``openai.OpenAI(base_url=..., default_query=...)``)."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    return urlunsplit(parts._replace(query="", fragment="")), query
