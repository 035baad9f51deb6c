"""What the verl layer reads of a method: the agent names of the exported rows, and the method's
rollout (its :class:`~harness.rollout.base.RolloutConfig`, or None for a one-completion method).

It imports no other module of :mod:`harness.verl`; they import it (see the package docstring).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.errors import ConfigError
from harness.method import TrainableMethod

if TYPE_CHECKING:
    from harness.protocol import Protocol
    from harness.rollout.base import RolloutConfig

# the verl agent loop that runs a method's own multi-turn rollout (agent_loop.py), as the rows'
# ``agent_name`` and the agent-loop yaml register it; Hydra resolves AGENT_CLASS with getattr
AGENT_NAME = "harness_tag_agent"
AGENT_CLASS = "harness.verl.agent_loop.HarnessTagAgentLoop"
# verl's own loop for a method that answers in one completion
SINGLE_TURN_AGENT = "single_turn_agent"


def trainable(method_name: str) -> TrainableMethod:
    """The registered method ``method_name``, which must be trainable (it has a reward)."""
    from harness.methods_registry import get_method

    method = get_method(method_name)
    if not isinstance(method, TrainableMethod):
        raise ConfigError(f"{method_name!r} is not a trainable method; verl exports trainable methods only")
    return method


def rollout_of(method: TrainableMethod, protocol: Protocol) -> RolloutConfig | None:
    """``method.rollout_config(protocol)``, checked against ``uses_retrieval``: a method that
    retrieves has a multi-turn rollout (its responses are split into model text and observations
    by its dialect), one that does not answers in one completion (None)."""
    config = method.rollout_config(protocol)
    if method.uses_retrieval and config is None:
        raise ConfigError(
            f"method {method.name!r} retrieves but its rollout_config(protocol) is None: return the "
            "RolloutConfig its solve runs, so verl can roll it out and split its responses"
        )
    if not method.uses_retrieval and config is not None:
        raise ConfigError(
            f"method {method.name!r} does not retrieve (uses_retrieval=False) but has a multi-turn "
            f"{type(config).__name__}: return None from rollout_config, or set uses_retrieval"
        )
    return config
