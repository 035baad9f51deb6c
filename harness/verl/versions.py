"""The verl versions the export supports, and the check of the installed one.

One policy, read everywhere: :data:`SUPPORTED` (named in ``docs/verl.md`` and in every exported
``run.sh``). The installed verl is checked when a job is exported (if verl is installed there),
by ``run.sh --dry-run``, and when verl loads the exported reward or agent loop; an unsupported
version is one line naming the versions that work.

It imports no other module of :mod:`harness.verl`, and verl only through its package metadata.
"""

from __future__ import annotations

from importlib import metadata

from harness.errors import ConfigError

# Executed against the real package (tox -e verl, tests/verl): the config validation, the reward
# loading and the agent loop. The API the loop and reward use (AgentLoopBase.ct_build_initial_tokens,
# reward.custom_reward_function.*) appeared in 0.9.0; 0.9.1 is the release tested.
SUPPORTED: tuple[str, ...] = ("0.9.1",)
SUPPORTED_TEXT = "verl " + ", ".join(SUPPORTED)
# the harness's install extra brings the supported verl with its core extra and what the export,
# the reward and the agent loop import (pyproject.toml [project.optional-dependencies] verl)
INSTALL = "pip install 'rar-harness[verl]' (in a checkout: pip install -e '.[verl]')"


def installed_verl() -> str | None:
    """The installed verl's version, or None when verl is not installed."""
    try:
        return metadata.version("verl")
    except metadata.PackageNotFoundError:
        return None


def require_verl(where: str) -> str:
    """The installed verl's version, if it is one of :data:`SUPPORTED`; else one line naming them.
    ``where``: what needs it (``"the exported reward"``, ``"run.sh --dry-run"``)."""
    version = installed_verl()
    if version is None:
        raise ConfigError(f"{where} needs verl ({SUPPORTED_TEXT}), which is not installed: {INSTALL}")
    check_version(version, where)
    return version


def require_loading_verl(where: str) -> None:
    """:func:`require_verl` when verl is the one loading ``where`` (verl is imported in this
    process): the exported ``reward.py`` calls this at import; loaded outside verl (our own tests
    of the reward's values) there is no verl whose API could differ."""
    import sys

    if "verl" in sys.modules:
        require_verl(where)


def check_version(version: str, where: str) -> None:
    if version not in SUPPORTED:
        raise ConfigError(
            f"{where}: verl {version} is installed, but the harness supports {SUPPORTED_TEXT} only: {INSTALL}"
        )
