from recbole_mgformer.model.sequential_recommender.eagps import EAGPS

__all__ = ["EAGPS"]
