"""MGFormer's own modules: the math and the layers behind ``model/general_recommender/mgformer.py``.

The model class itself stays under ``general_recommender/``, where the registry finds one model per file. This
``__init__`` imports nothing: a module here imports only what it needs itself.
"""
