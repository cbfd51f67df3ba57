from recbole_mgformer.model.context_aware_recommender.csa import CSA

__all__ = ["CSA"]
