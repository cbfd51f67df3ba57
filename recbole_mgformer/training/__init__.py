"""Training: the trainers (``trainer``), their device-side epoch (``device_loop``, ``cuda_graph``), evaluation
(``device_evaluation``), data-parallel runs (``distributed``), checkpoints and resumption (``checkpoint_files``,
``resume``, ``random_state``, ``vocabulary``), the ops that sync the host (``host_sync``)."""
