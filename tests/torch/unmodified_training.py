"""A PyTorch training script that knows nothing of dtr: test_dtr_torch runs it plain and under
`python3 -m dtr_torch` and compares what it prints (each step's loss in hex, so bit for bit)."""
import json
import sys

import torch

torch.manual_seed(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
model = torch.nn.Sequential(
    torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
    torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
    torch.nn.Flatten(), torch.nn.Dropout(0.1), torch.nn.Linear(8 * 12 * 12, 10))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
images = torch.tensor([[float((i * 7 + j) % 13) / 13 for j in range(144)] for i in range(32)]).reshape(32, 1, 12, 12)
labels = torch.from_numpy(torch.arange(32).remainder(10).numpy())
for step in range(6):
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()
    print(step, loss.item().hex())
print("running_mean", [v.hex() for v in model[1].running_mean.tolist()])
# What a test needs to know beyond the losses (only when run under dtr_torch).
try:
    is_checkpointed = torch.ops.dtr.is_checkpointed
except (AttributeError, RuntimeError):
    is_checkpointed = None
if is_checkpointed is not None:
    stats = json.loads(torch.ops.dtr.stats())
    print("dtr", json.dumps({"parameters_wrapped": all(is_checkpointed(p) for p in model.parameters()),
                             "data_wrapped": is_checkpointed(images) and is_checkpointed(labels),
                             "evictions": stats["evictions"], "peak": stats["peak_resident_bytes"]}),
          file=sys.stderr)
