from recbole_mgformer.model.general_recommender.directau import DirectAU
from recbole_mgformer.model.general_recommender.mgformer import MGFormer
from recbole_mgformer.model.general_recommender.sgl import SGL
from recbole_mgformer.model.general_recommender.simgcl import SimGCL
from recbole_mgformer.model.general_recommender.xsimgcl import XSimGCL

__all__ = ["DirectAU", "MGFormer", "SGL", "SimGCL", "XSimGCL"]
