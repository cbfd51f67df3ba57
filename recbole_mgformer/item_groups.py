"""The item popularity groups of the MGFormer paper's Fig. 2, by name, and the rule that forms them: what a results
page shows without importing torch. :mod:`recbole_mgformer.evaluation` measures by them."""

GROUPS = ("Unpopular", "Normal", "Popular")
GROUP_RULE = (
    "items ranked by training interactions: Unpopular = the 80% least interacted, "
    "Popular = the top 5%, Normal = the rest (ties by item id)"
)
