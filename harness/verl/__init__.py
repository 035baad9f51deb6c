"""Training at scale with verl: the export of a method's job and the agent loop verl runs.

- :mod:`harness.verl.contract`: what the verl layer reads of a method (its rollout config, the
  agent names of the rows);
- :mod:`harness.verl.rows`: verl's dataset rows (parquet) and the question a row stands for;
- :mod:`harness.verl.reward`: verl's ``compute_score`` over our reward (the exported ``reward.py``);
- :mod:`harness.verl.job`: the recipe as verl overrides, the launch script, ``job.json`` and its
  limitations (``harness export-verl``);
- :mod:`harness.verl.agent_loop`: the verl ``AgentLoop`` that runs the method's own rollout;
- :mod:`harness.verl.versions`: the verl versions supported and the check of the installed one;
- :mod:`harness.verl.dry_run`: ``run.sh --dry-run``, verl's own config composition and validation.

Imports go one way (``contract`` <- ``rows`` <- ``reward``, ``job``, ``agent_loop``; ``versions``
<- ``job``, ``agent_loop``, ``dry_run``; none of the last four imports another), and this package
imports none of them, so that importing any one stays light and none imports verl (only
``agent_loop_class`` and the dry run do, when called).
"""
