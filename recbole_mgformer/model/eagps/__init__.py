"""EAGPS's own modules: the math and the layers behind ``model/sequential_recommender/eagps.py``, by stage of the
paper (section 3.2): ``graph`` (Eq. 2-4, 17-18), ``external`` (Eq. 13-17), ``decoder`` (Eq. 21-25).

The model class itself stays under ``sequential_recommender/``, where the registry finds one model per file. This
``__init__`` imports nothing: a module here imports only what it needs itself.
"""
