"""Checkpoint files written whole, each write from a temporary of its own."""

import torch

from recbole_mgformer.training.checkpoint_files import load_checkpoint, save_atomically


def test_two_writes_of_one_checkpoint_at_once_each_use_their_own_temporary(tmp_path, monkeypatch):
    # The old temporary was named by host and process only: a second write in the same process (another thread, or
    # a callback saving meanwhile) took the first's temporary, and the first's rename failed on a missing file.
    path = tmp_path / "model.pth"
    real_save, temporaries = torch.save, []

    def another_write_meanwhile(state, file):
        real_save(state, file)
        temporaries.append(str(file))
        if len(temporaries) == 1:
            save_atomically({"epoch": 1}, path)

    monkeypatch.setattr(torch, "save", another_write_meanwhile)
    save_atomically({"epoch": 2}, path)
    assert load_checkpoint(path) == {"epoch": 2}  # the last whole checkpoint
    assert len(set(temporaries)) == 2 and all(name != str(path) for name in temporaries)
    assert [p.name for p in tmp_path.iterdir()] == ["model.pth"]
