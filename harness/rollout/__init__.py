"""The batched multi-turn rollout engine shared by evaluation and training."""
