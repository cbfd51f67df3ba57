"""RecBole and this project: names to model classes and trainers (``registry``, a pure lookup), every repair and
safety patch of RecBole in one declared list (``patches``), RecBole's own entry points for this project's models
(``plugin``) and weights-only checkpoint loading (``checkpoints``). Importing any of them patches nothing:
:func:`recbole_mgformer.register` does."""
