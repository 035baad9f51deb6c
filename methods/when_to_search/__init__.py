"""Learning When to Search (anonymous ACL submission): the method, its evaluation protocol and its
judge prompt."""

from harness.plugins import Plugin

PLUGIN = Plugin(
    methods={"when_to_search": ".method:WhenToSearch"},
    protocols={"when_to_search-eval": ".protocol:eval_protocol"},
    judge_prompts={"when_to_search": ".judge:WHEN_TO_SEARCH"},
    aliases=("whentosearch", "When-to-Search", "w2s"),
)
