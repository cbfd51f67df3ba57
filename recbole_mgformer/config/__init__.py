"""Settings: where the YAML defaults live (``defaults``), checks of config keys against what RecBole reads
(``config_check``), checks of a user's inputs (``input_checks``) and ``--key=value`` command lines
(``command_line``). Nothing here imports torch or RecBole at import time."""
