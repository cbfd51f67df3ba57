"""Base classes shared by this package's models, and the contract between a model and the runner
(:class:`ModelContract`, read through :func:`model_contract`)."""

import copy

import numpy as np
import scipy.sparse as sp
import torch
from recbole.model.abstract_recommender import GeneralRecommender

from recbole_mgformer.model.graph import CSRParts, csr_parts, csr_tensor, normalized_adjacency
from recbole_mgformer.model.loss import bpr_loss


class ModelContract:
    """What the runner reads from a model beyond RecBole's ``AbstractRecommender``: every optional hook, with its
    default. A model of this project overrides what applies to it; RecBole's own models have the defaults
    (:func:`model_contract`). The runner reads these names nowhere else."""

    REFINES_RECBOLE = False
    """True: the model is a deliberate, faster version of RecBole's model of the same name (LightGCN), so RecBole's
    own entry points keep RecBole's quietly (a subclass of RecBole's, as SGL, says so by subclassing)."""

    SCORING_OPTIONS = frozenset()
    """Settings that change only how a trained model scores, not how it trains (MGFormer's filter residual): a
    benchmark entry differing from another only in these is scored from the other's checkpoint, not trained."""

    @classmethod
    def scoring_options_of(cls, overrides):
        """The options among :attr:`SCORING_OPTIONS` that act only on the scores for an entry with ``overrides``
        (an option may make them change training: MGFormer's ``filter_residual_in_training``)."""
        return cls.SCORING_OPTIONS

    @classmethod
    def tuned_as(cls, overrides):
        """The overrides of the entry whose tuned settings an entry with ``overrides`` takes where it has none of
        its own: by default the entry less its scoring options."""
        scoring = cls.scoring_options_of(overrides)
        return {key: value for key, value in overrides.items() if key not in scoring}

    deterministic = None
    """True or False: the model gives the same model whatever the seed (one seed is a board's whole row), or not.
    None: the registry decides (RecBole's traditional models are, but those that draw random numbers)."""

    CUDA_GRAPH_SAFE = False
    """True: the training step is capturable as one CUDA graph: static shapes, no decision on the host within the
    step (those belong in :meth:`before_step`)."""

    step_hook = False
    """True while a trainer calls :attr:`before_step` before every training step (set by the trainer)."""

    before_step = None
    """A method the trainer calls before every training step, graphed or eager, for the step's host-side decisions
    (MGFormer's feature-redraw clock); None: nothing to call."""

    def cuda_graph_blocker(self):
        """Why this configuration's step cannot be one CUDA graph although the class is :attr:`CUDA_GRAPH_SAFE`
        (a reason), or None."""
        return None

    def cuda_graph_generators(self):
        """The random generators the training step draws from, registered with a captured graph so that each replay
        draws anew (SimGCL's noise)."""
        return []

    TRAIN_PROTOCOLS = ("prefix",)
    """The training protocols the model trains under (``train_protocol``, :mod:`recbole_mgformer.data.train_protocols`):
    ``prefix``, RecBole's rows; ``sequence`` where a sequential model computes a loss at every position of a window
    (:mod:`recbole_mgformer.data.sequence_windows`); ``user`` where a general model's loss shares a user's scores of
    every item among the user's pairs (:mod:`recbole_mgformer.data.user_batches`)."""

    matmul_dtype = None
    """The dtype of the model's large products where it has a ``precision`` option (recorded with a run); None for
    models without one."""


_RECBOLE_DEFAULTS = ModelContract()


def model_contract(model):
    """``model`` (an instance or a class) as the runner reads it: itself where it declares the contract (this
    project's models that use a hook), else the contract's defaults (RecBole's own models, and ours that use none)."""
    declares = issubclass(model, ModelContract) if isinstance(model, type) else isinstance(model, ModelContract)
    return model if declares else _RECBOLE_DEFAULTS


class SharedSparseBuffers:
    """``copy.deepcopy`` of a model shares its sparse tensors (graphs built from the data, never trained), held
    as buffers or plain attributes:
    torch cannot deep-copy a sparse CSR tensor, and RecBole's ``run_recbole`` deep-copies every model to
    count its FLOPs (``get_flops`` in recbole/utils/utils.py)."""

    def __deepcopy__(self, memo):
        for module in self.modules():
            for value in [*module._buffers.values(), *module.__dict__.values()]:  # buffers, or plain attributes
                for tensor in value if isinstance(value, (list, tuple)) else [value]:
                    if isinstance(tensor, torch.Tensor) and tensor.layout != torch.strided:
                        memo[id(tensor)] = tensor
        copied = self.__class__.__new__(self.__class__)
        memo[id(self)] = copied
        copied.__dict__.update({key: copy.deepcopy(value, memo) for key, value in self.__dict__.items()})
        return copied


class CachedRepresentations:
    """All users' and items' representations for scoring (``scoring_representations``, by default ``forward()``),
    computed once per evaluation and cached in ``restore_user_e`` / ``restore_item_e`` until the model next
    changes mode (RecBole's convention); in training they are computed afresh."""

    def __init__(self, config, dataset):
        super().__init__(config, dataset)
        self.restore_user_e = None
        self.restore_item_e = None

    def scoring_representations(self):
        """users (n_users, d), items (n_items, d)."""
        return self.forward()

    def forget_representations(self):
        self.restore_user_e, self.restore_item_e = None, None

    def train(self, mode=True):
        self.forget_representations()
        return super().train(mode)

    def representations(self):
        """All users' and items' representations for scoring, cached outside training."""
        if self.training:
            return self.scoring_representations()
        if self.restore_user_e is None or self.restore_item_e is None:
            self.restore_user_e, self.restore_item_e = self.scoring_representations()
        return self.restore_user_e, self.restore_item_e

    def full_sort_predict(self, interaction):
        users, items = self.representations()
        return (users[interaction[self.USER_ID]] @ items.T).view(-1)


class ItemSimilarityScores:
    """RecBole's scoring for item-item closed-form models: a user's scores are ``X_u S``, the user's training row
    of ``interaction_matrix`` (scipy CSR, users x items) times ``item_similarity`` (items x items, dense or
    sparse), returned in float32 on ``self.device``, one batch of users at a time (never all users' scores at
    once: on Gowalla they would be a dense 30k x 41k matrix).

    A model whose scores factor otherwise overrides :meth:`score_factors`."""

    def score_factors(self):
        """``(left, right)``: the scores of users ``u`` are ``left[u] @ right`` (scipy CSR ``left``)."""
        return self.interaction_matrix, self.item_similarity

    def predict(self, interaction):
        users = interaction[self.USER_ID].cpu().numpy()
        items = interaction[self.ITEM_ID].cpu().numpy()
        left, right = self.score_factors()
        rows = left[users]  # (batch, inner), sparse
        scores = np.asarray(rows.multiply(right[:, items].T).sum(axis=1)).ravel()
        return torch.from_numpy(scores.astype(np.float32)).to(self.device)

    def full_sort_predict(self, interaction):
        users = interaction[self.USER_ID].cpu().numpy()
        left, right = self.score_factors()
        scores = left[users] @ right  # (batch, items)
        scores = scores.toarray() if sp.issparse(scores) else np.asarray(scores)
        return torch.from_numpy(scores.ravel().astype(np.float32, copy=False)).to(self.device)


class BPRWithEgoL2:
    """The pairwise loss of LightGCN and its contrastive descendants: BPR on the batch's (user, positive, negative)
    triples plus ``reg_weight`` times RecBole's ``EmbLoss`` of the ego embeddings they touch. The model sets
    ``reg_weight``, ``require_pow`` and ``reg_loss`` (an ``EmbLoss``)."""

    def recommendation_loss(self, interaction, user_all, item_all):
        """users (n_users, d) and items (n_items, d) are the propagated representations the scores use."""
        users = interaction[self.USER_ID]
        positives, negatives = interaction[self.ITEM_ID], interaction[self.NEG_ITEM_ID]
        user_e = user_all[users]
        loss = bpr_loss((user_e * item_all[positives]).sum(-1), (user_e * item_all[negatives]).sum(-1))
        regulariser = self.reg_loss(
            self.user_embedding(users),
            self.item_embedding(positives),
            self.item_embedding(negatives),
            require_pow=self.require_pow,
        )
        return loss + self.reg_weight * regulariser.squeeze()


class GraphRecommender(ModelContract, SharedSparseBuffers, CachedRepresentations, GeneralRecommender):
    """A general recommender whose user and item representations come from the whole training graph.

    It builds ``D^-1/2 A D^-1/2`` from the training interactions once (the dataset a model receives is
    the training split), and computes every node's representation once per evaluation
    (:class:`CachedRepresentations`). Subclasses implement ``forward() -> (users (n_users, d), items (n_items, d))``.
    """

    def __init__(self, config, dataset):
        super().__init__(config, dataset)
        # the matrix is rebuilt from the data, never saved; its dense parts, which torch.compile takes (it refuses
        # sparse tensors), are buffers of their own (torch.compile cannot take a sparse tensor's views), shared with
        # the sparse tensor on the CPU
        parts = CSRParts(*(part.clone() for part in csr_parts(normalized_adjacency(dataset.inter_matrix(form="coo")))))
        for name, part in zip(CSRParts._fields, parts):
            self.register_buffer(f"adjacency_{name}", part, persistent=False)
        self.register_buffer("adjacency", csr_tensor(parts, self.n_users + self.n_items), persistent=False)
        # every rank builds the graph from the same data: DistributedDataParallel need not broadcast it, and it
        # cannot broadcast a sparse tensor
        self._ddp_params_and_buffers_to_ignore = ["adjacency", *(f"adjacency_{name}" for name in CSRParts._fields)]

    def _apply(self, fn, recurse=True):
        # moved or cast part by part, then one matrix again: a GPU holds the graph once
        self.adjacency = None
        super()._apply(fn, recurse)
        self.adjacency = csr_tensor(self.adjacency_parts, self.n_users + self.n_items)
        return self

    @property
    def adjacency_parts(self):
        """``adjacency`` as :class:`recbole_mgformer.model.graph.CSRParts`, for a propagation that compiles."""
        return CSRParts(self.adjacency_crow_indices, self.adjacency_col_indices, self.adjacency_values)

    @property
    def propagation_adjacency(self):
        """What LightGCN propagation takes: under ``torch.compile`` :attr:`adjacency_parts` (it refuses sparse
        tensors), in eager mode the sparse ``adjacency`` itself (the faster product there)."""
        return self.adjacency_parts if torch.compiler.is_compiling() else self.adjacency

    def predict(self, interaction):
        users, items = self.representations()
        return (users[interaction[self.USER_ID]] * items[interaction[self.ITEM_ID]]).sum(dim=-1)

    def split_nodes(self, nodes):
        """(n, d) -> users (n_users, d), items (n_items, d)."""
        return torch.split(nodes, [self.n_users, self.n_items])
