"""The evaluation pipeline: a protocol (what is measured), the runner (methods over a bench
under a protocol, stored sample by sample), scoring (metrics of stored samples) and the set-up
of a run (protocol -> retriever -> store -> run row) that ``run``, ``train`` and ``sft`` share."""
