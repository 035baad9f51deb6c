"""RL algorithm core: pure functions over tensors and the config that pins every flag.

- ``masked``: masked sum/mean/var/whiten (the one implementation).
- ``advantages``: ``ADV_ESTIMATORS`` (grpo, dr_grpo, rloo, reinforce_pp, reinforce_pp_baseline).
- ``losses``: ``agg_loss`` (4 modes), ``policy_loss`` (clip-higher, dual clip), entropy, log-probs.
- ``kl``: k1/k2/k3(low_var_kl)/abs, KL as loss or as per-token reward.
- ``dapo``: group filters, ``DynamicSampler``, overlong shaping and filtering.
- ``config``: ``AlgoConfig`` (no defaults) and ``preset(name)`` of ``presets.yaml``: grpo, dr_grpo, dapo,
  reinforce_pp, ppo.

The trainer loop lives elsewhere and composes these.
"""
