import json
import sys
from pathlib import Path

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.launch_census import (  # noqa: E402
    CENSUS,
    CPU_DEFAULT,
    GPU_CONFIGURATION,
    GPU_STEP_OP_TARGET,
    SyntheticGraph,
    build,
    count_step,
    graph_breaks,
    main,
    model_config,
)
from recbole_mgformer.model.abstract_recommender import model_contract  # noqa: E402

# with one key chunk and one loss block the counts do not depend on the graph's size, so a small graph counts
# what a Beauty-sized one does (results/performance/launch_census.md)
GRAPH, BATCH = SyntheticGraph(300, 200, 3000), 64
# the CPU's blocking on a small graph: several key chunks and loss blocks
BLOCKED = {**CPU_DEFAULT, "key_chunk_size": 128, "uniformity_block_size": 16}


def test_the_gpu_configuration_of_a_step_launches_at_most_the_target_and_fewer_than_blocks_do():
    model, optimizer = build("MGFormer", GPU_CONFIGURATION, GRAPH, BATCH)
    assert model.layers[0].key_chunk_size >= model.n_nodes and model.uniformity_block_rows >= BATCH
    one_block = count_step(model, optimizer, GRAPH, BATCH)
    assert 100 < one_block.total <= GPU_STEP_OP_TARGET, one_block.kernels
    assert one_block.syncs == 0
    blocked = count_step(*build("MGFormer", BLOCKED, GRAPH, BATCH), GRAPH, BATCH)
    assert blocked.total > one_block.total + 50


@pytest.mark.parametrize(
    "model_name, settings",
    [
        ("MGFormer", GPU_CONFIGURATION),
        ("MGFormer", BLOCKED),
        ("MGFormer", {**GPU_CONFIGURATION, "attention": False}),
        ("DirectAU", {"precision": "fp32", "uniformity_block_size": 1 << 30}),
        ("DirectAU", {"precision": "fp32", "uniformity_block_size": 16}),
        ("SimGCL", {}),
        ("XSimGCL", {}),
        ("SGL", {"type": "ED"}),
        ("SGL", {"type": "RW"}),
    ],
    ids=[
        "MGFormer one chunk and block",
        "MGFormer blocks",
        "MGFormer attention=False",
        "DirectAU one block",
        "DirectAU blocks",
        "SimGCL",
        "XSimGCL",
        "SGL edge dropout",
        "SGL random walk",
    ],
)
def test_calculate_loss_compiles_without_graph_breaks(model_name, settings):
    model, _ = build(model_name, settings, GRAPH, BATCH)
    graphs, breaks, reasons = graph_breaks(model, GRAPH, BATCH)
    assert (graphs, breaks, reasons) == (1, 0, [])


@pytest.mark.parametrize("model_name", ["SimGCL", "XSimGCL", "SGL"])
def test_the_contrastive_baselines_step_without_a_sync(model_name):
    """No torch.unique (SimGCL's repeated ids are masked) and no sparse tensor made in the step (SGL's views)."""
    model, optimizer = build(model_name, {}, GRAPH, BATCH)
    assert count_step(model, optimizer, GRAPH, BATCH).syncs == 0


@pytest.mark.parametrize("model_name", ["XSimGCL", "SGL"])
def test_a_contrastive_baseline_s_loss_compiles_whole_to_the_eager_loss_and_gradients(model_name):
    """fullgraph: XSimGCL's noise is drawn by the compiled step from the model's generator (the eager numbers, new
    ones at the next call), SGL's views are read from their buffers."""
    model, _ = build(model_name, {}, GRAPH, BATCH)
    batch, generators = GRAPH.batch(BATCH, 3), model_contract(model).cuda_graph_generators()
    results = []
    for loss_function in (
        model.calculate_loss,
        torch.compile(model.calculate_loss, backend="aot_eager", fullgraph=True),
    ):
        for generator in generators:
            generator.manual_seed(1)
        loss = loss_function(batch)
        results.append((loss, torch.autograd.grad(loss, list(model.parameters())), loss_function(batch)))
    (eager, eager_gradients, eager_next), (compiled, compiled_gradients, compiled_next) = results
    torch.testing.assert_close(compiled, eager)
    for got, want in zip(compiled_gradients, eager_gradients):
        torch.testing.assert_close(got, want)
    torch.testing.assert_close(compiled_next, eager_next)
    assert (compiled_next != compiled) == bool(generators)
    torch._dynamo.reset()


def test_a_graph_break_explain_reports_without_a_reason_is_named_from_dynamo_s_log():
    """RecBole's own SGL holds its graphs as sparse tensors, which torch.compile refuses; explain counts those breaks
    without a reason."""
    from recbole.model.general_recommender.sgl import SGL

    model = SGL(model_config("SGL", {"type": "ED"}, BATCH), GRAPH)
    model.train()
    graphs, breaks, reasons = graph_breaks(model, GRAPH, BATCH)
    assert breaks >= 1 and reasons
    assert all("sparse Tensor" in reason and ".py:" in reason for reason in reasons), reasons


class Step(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, users, items):
        return self.model.calculate_loss({"user_id": users, "item_id": items})


@pytest.mark.parametrize("settings", [GPU_CONFIGURATION, BLOCKED], ids=["one chunk and block", "blocks"])
def test_a_whole_step_traces_in_fake_mode_with_the_eager_gradients(settings):
    """No op of the loss or its gradient reads a value on the host: make_fx traces it with fake tensors, and
    the traced graph, run on real tensors, gives the eager loss and gradients."""
    model, _ = build("MGFormer", settings, GRAPH, BATCH)
    step = Step(model)
    names = [name for name, _ in step.named_parameters()]
    state = {**dict(step.named_parameters()), **dict(step.named_buffers())}

    def loss_and_gradients(state, users, items):
        loss = torch.func.functional_call(step, state, (users, items))
        return loss, torch.autograd.grad(loss, [state[name] for name in names])

    batch = GRAPH.batch(BATCH, 5)
    traced = make_fx(loss_and_gradients, tracing_mode="fake")(state, batch["user_id"], batch["item_id"])
    assert any(
        node.target == torch.ops.aten.exp_.default or node.target == torch.ops.aten.exp.default
        for node in traced.graph.nodes
    )
    model.training_steps = 0
    traced_loss, traced_gradients = traced(state, batch["user_id"], batch["item_id"])
    model.training_steps = 0
    eager_loss, eager_gradients = loss_and_gradients(state, batch["user_id"], batch["item_id"])
    torch.testing.assert_close(traced_loss, eager_loss)
    for traced_gradient, eager_gradient in zip(traced_gradients, eager_gradients):
        torch.testing.assert_close(traced_gradient, eager_gradient)


def test_main_writes_the_census_table(tmp_path):
    main(
        [
            "--users",
            "300",
            "--items",
            "200",
            "--interactions",
            "3000",
            "--batch_size",
            "64",
            "--no_explain",
            "--results",
            str(tmp_path),
        ]
    )
    table = (tmp_path / "launch_census.md").read_text()
    for label in (
        "MGFormer, GPU configuration",
        "MGFormer attention=False, GPU configuration",
        "DirectAU, CPU default",
        "SimGCL",
        "XSimGCL",
        "SGL, edge dropout",
        "RecBole LightGCN",
    ):
        assert f"| {label}" in table
    assert "Commit " in table and "torch " in table
    records = list((tmp_path / "runs" / "performance").glob("launch-census-*.json"))
    assert len(records) == 1
    record = json.loads(records[0].read_text())
    assert [row["label"] for row in record["rows"]] == [label for label, _, _ in CENSUS]
    assert all(f"| {row['ops']:,} |" in table for row in record["rows"])
    assert record["settings"]["batch_size"] == 64 and "--no_explain" in record["command"]
