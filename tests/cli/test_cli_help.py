"""Every `--help` shows each option's default (harness.cli.HelpFormatter): an option with a value
to show names it in its help, appended as ``(default: X)`` or written by hand; `harness --help`
lists every export format."""

from __future__ import annotations

import argparse

from harness.cli import HelpFormatter, build_parser


def _parsers(parser: argparse.ArgumentParser, name: str = "harness"):
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _parsers(sub, f"{name} {sub_name}")


def test_every_option_with_a_default_shows_it():
    missing = []
    for name, parser in _parsers(build_parser()):
        assert parser.formatter_class is HelpFormatter, f"{name}: use harness.cli.add_command"
        formatter = parser._get_formatter()
        for action in parser._actions:
            default = action.default
            if not action.option_strings or default is None or default is False or default == "":
                continue
            if default is argparse.SUPPRESS or action.help == argparse.SUPPRESS:
                continue
            shown = formatter._get_help_string(action) or ""
            if "default" not in shown.lower():
                missing.append(f"{name} {action.option_strings[0]} (default {default!r})")
    assert missing == []


def test_run_help_names_the_defaults_the_issue_asked_for():
    run = dict(_parsers(build_parser()))["harness run"]
    text = " ".join(run.format_help().split())
    for shown in (
        "(default: mini-multihop)",
        "(default: smollm2-135m-instruct)",
        "(default: results/harness.duckdb)",
        "(default: mini)",
        "(default: 0)",
    ):
        assert shown in text, shown


def test_the_top_level_help_lists_every_export_format():
    from leaderboards import EXPORT_FORMATS

    text = build_parser().format_help()
    line = next(x for x in text.splitlines() if x.strip().startswith("export "))
    assert all(f in line for f in EXPORT_FORMATS), line
