from recbole_mgformer.model.general_recommender.bspm import BSPM
from recbole_mgformer.model.general_recommender.chebycf import ChebyCF
from recbole_mgformer.model.general_recommender.directau import DirectAU
from recbole_mgformer.model.general_recommender.ease import EASE
from recbole_mgformer.model.general_recommender.gfcf import GFCF
from recbole_mgformer.model.general_recommender.lightgcn import LightGCN
from recbole_mgformer.model.general_recommender.mgformer import MGFormer
from recbole_mgformer.model.general_recommender.sgl import SGL
from recbole_mgformer.model.general_recommender.simgcl import SimGCL
from recbole_mgformer.model.general_recommender.slimelastic import SLIMElastic
from recbole_mgformer.model.general_recommender.turbocf import TurboCF
from recbole_mgformer.model.general_recommender.xsimgcl import XSimGCL

__all__ = [
    "BSPM",
    "ChebyCF",
    "DirectAU",
    "EASE",
    "GFCF",
    "LightGCN",
    "MGFormer",
    "SGL",
    "SimGCL",
    "SLIMElastic",
    "TurboCF",
    "XSimGCL",
]
