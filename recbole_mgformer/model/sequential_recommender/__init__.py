from recbole_mgformer.model.sequential_recommender.eagps import EAGPS
from recbole_mgformer.model.sequential_recommender.gru4rec import GRU4Rec
from recbole_mgformer.model.sequential_recommender.sasrec import SASRec

__all__ = ["EAGPS", "GRU4Rec", "SASRec"]
