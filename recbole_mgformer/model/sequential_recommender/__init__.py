from recbole_mgformer.model.sequential_recommender.eagps import EAGPS
from recbole_mgformer.model.sequential_recommender.sasrec import SASRec

__all__ = ["EAGPS", "SASRec"]
