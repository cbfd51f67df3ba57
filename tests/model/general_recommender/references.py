"""Direct, slow formulas the graph baselines are tested against, and the short ml-100k schedule."""

import torch
import torch.nn.functional as F

ML100K_FAST = {"epochs": 8, "stopping_step": 8, "show_progress": False, "state": "WARNING"}
# With the authors' defaults (tuned on sparse data) SimGCL and DirectAU drift below popularity on the dense ml-100k
# (results/ml-100k/leaderboard.md); a short schedule at a higher rate, with DirectAU's weaker uniformity, shows that
# they learn.
ML100K_SHORT_FAST_RATE = {**ML100K_FAST, "epochs": 4, "stopping_step": 4, "learning_rate": 0.01}


def dense_lightgcn(model, a, n_layers):
    """LightGCN's output written out for ``model``'s ego embeddings ``E_0``: the mean of ``E_0, A E_0, ...,
    A^L E_0`` by dense products with ``a`` (n, n)."""
    layers = [torch.cat([model.user_embedding.weight, model.item_embedding.weight]).detach()]
    for _ in range(n_layers):
        layers.append(a @ layers[-1])
    return torch.stack(layers).mean(dim=0)


def noisy(x, eps, generator):
    """SimGCL's noise written out: ``eps * sign(x) * u / ||u||`` with ``u ~ U(0, 1)`` per row."""
    u = torch.rand(x.shape, generator=generator)
    return x + eps * torch.sign(x) * u / u.norm(dim=1, keepdim=True)


def direct_info_nce(view1, view2, tau):
    v1, v2 = F.normalize(view1, dim=1), F.normalize(view2, dim=1)
    scores = torch.exp(v1 @ v2.T / tau)
    return -(scores.diagonal() / scores.sum(dim=1)).log().mean()


def direct_bpr_and_reg(model, batch, users_all, items_all):
    users, positives, negatives = batch[model.USER_ID], batch[model.ITEM_ID], batch[model.NEG_ITEM_ID]
    margin = (users_all[users] * (items_all[positives] - items_all[negatives])).sum(dim=1)
    bpr = -torch.sigmoid(margin).log().mean()
    ego = [
        model.user_embedding.weight[users],
        model.item_embedding.weight[positives],
        model.item_embedding.weight[negatives],
    ]
    reg = sum(e.pow(2).sum() for e in ego) / (2 * len(users))
    return bpr + model.reg_weight * reg
