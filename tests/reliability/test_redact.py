"""harness.secrets.redact: URL credentials masked in any text (userinfo, every query parameter,
path parameters), everything else left exactly as is; join_url/split_query: URLs extended by
parsing, the query kept after the path."""

from __future__ import annotations

import pytest

from harness.secrets import redact


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("http://user:KEY@host/v1", "http://user:***@host/v1"),
        ("https://TOKEN@host:8000/v1", "https://***@host:8000/v1"),
        ("https://h/v1?api_key=SEC&x=1", "https://h/v1?api_key=***&x=***"),
        ("https://h/v1?x=1&token=abc#frag", "https://h/v1?x=***&token=***#frag"),
        (
            "https://h/v1?X-Api-Key=a&access_token=b&openai-key=c",
            "https://h/v1?X-Api-Key=***&access_token=***&openai-key=***",
        ),
        (
            'harness run --base-url http://u:p@127.0.0.1:8/v1 --judge-url "https://h/v1?key=z"',
            'harness run --base-url http://u:***@127.0.0.1:8/v1 --judge-url "https://h/v1?key=***"',
        ),
        ('{"base_urls": ["http://a:b@h/v1"]}', '{"base_urls": ["http://a:***@h/v1"]}'),
        ("http://u:***@h/v1", "http://u:***@h/v1"),  # idempotent
        # issue 33, item 5: any query parameter, path parameters, credentials in error text
        ("https://h/v1?code=SEC", "https://h/v1?code=***"),
        ("https://h/v1?bearer=SEC&max_tokens=5", "https://h/v1?bearer=***&max_tokens=***"),
        ("https://h/v1?SEC", "https://h/v1?***"),
        ("https://h/v1;SEC/completions", "https://h/v1;***/completions"),
        ("https://h/v1;key=SEC", "https://h/v1;key=***"),
        ("http://u:p:SEC@h/v1", "http://u:***@h/v1"),
        (
            "retrieval: remote http://u:SEC@127.0.0.1:8/retrieve (described by the server)",
            "retrieval: remote http://u:***@127.0.0.1:8/retrieve (described by the server)",
        ),
        (
            "retrieval server http://h:8/retrieve?token=SEC failed: timed out",
            "retrieval server http://h:8/retrieve?token=*** failed: timed out",
        ),
        ("harness run --api-key=SEC --limit 3", "harness run --api-key=*** --limit 3"),
        ("`http://h/v1?k=SEC`", "`http://h/v1?k=***`"),
    ],
)
def test_credentials_are_masked(text, expected):
    assert redact(text) == expected
    assert redact(redact(text)) == expected


@pytest.mark.parametrize(
    "text",
    [
        "http://127.0.0.1:8765/v1",
        "https://h/v1/completions#top",
        "monkey=1 keyword=x max_tokens=5",
        "mail me@example.com, a=b",
        "harness run --method direct --limit 3",
        "",
    ],
)
def test_other_text_is_untouched(text):
    assert redact(text) == text


@pytest.mark.parametrize(
    ("base", "segments", "expected"),
    [
        ("http://h:8/v1", ("models",), "http://h:8/v1/models"),
        ("http://h:8/v1/", ("models",), "http://h:8/v1/models"),
        ("http://h:8/v1?api_key=K", ("completions",), "http://h:8/v1/completions?api_key=K"),
        ("http://h:8?token=K", ("health",), "http://h:8/health?token=K"),
        ("http://u:p@h:8/a;K?x=1#f", ("health",), "http://u:p@h:8/a;K/health?x=1#f"),
    ],
)
def test_urls_are_extended_by_parsing(base, segments, expected):
    from harness.secrets import join_url

    assert join_url(base, *segments) == expected


def test_a_query_is_split_off_a_base_url():
    from harness.secrets import split_query

    assert split_query("http://u:p@h:8/v1?api_key=K&x=1") == ("http://u:p@h:8/v1", {"api_key": "K", "x": "1"})
