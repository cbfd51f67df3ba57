from recbole_mgformer.model.general_recommender.mgformer import MGFormer

__all__ = ["MGFormer"]
