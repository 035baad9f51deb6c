"""harness.secrets.redact: URL credentials masked in any text, everything else left exactly as is."""

from __future__ import annotations

import pytest

from harness.secrets import redact


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("http://user:KEY@host/v1", "http://user:***@host/v1"),
        ("https://TOKEN@host:8000/v1", "https://***@host:8000/v1"),
        ("https://h/v1?api_key=SEC&x=1", "https://h/v1?api_key=***&x=1"),
        ("https://h/v1?x=1&token=abc#frag", "https://h/v1?x=1&token=***#frag"),
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
    ],
)
def test_credentials_are_masked(text, expected):
    assert redact(text) == expected
    assert redact(redact(text)) == expected


@pytest.mark.parametrize(
    "text",
    [
        "http://127.0.0.1:8765/v1",
        "https://h/v1?max_tokens=5&monkey=1&keyword=x",
        "mail me@example.com, a=b",
        "harness run --method direct --limit 3",
        "",
    ],
)
def test_other_text_is_untouched(text):
    assert redact(text) == text
