"""dtr-torch under torch.distributed: DistributedDataParallel (gloo, two processes on this machine, each with its
own dtr runtime and budget) over models wrapped by dtr_torch.checkpoint_module trains bitwise as plain DDP, and
c10d collectives on wrapped tensors write values that survive eviction and recomputation (run by Debian's
/usr/bin/python3; the environment is test_dtr_torch.py's)."""
import datetime
import gc
import os
import shutil
import sys
import tempfile
import time
import unittest

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

import dtr_torch

WORLD = 2
TIMEOUT = datetime.timedelta(seconds=30)  # for each collective: a rank left alone fails instead of hanging
P2P_TIMEOUT = datetime.timedelta(seconds=10)  # for a wait on isend or irecv
SPAWN_DEADLINE_S = 480  # for a whole spawn: past it, its processes are killed and the test fails


def spawn(test, worker, *args):
    """Runs worker(rank, init_file, out_dir, *args) in WORLD processes; returns out_dir (a fresh temporary
    directory). A rank that raises or dies, or a spawn that outlives SPAWN_DEADLINE_S, fails `test` with what
    happened (a worker's traceback included); the other processes are killed."""
    out_dir = tempfile.mkdtemp(prefix="dtr_torch_ddp_")
    test.addCleanup(shutil.rmtree, out_dir, True)
    context = mp.spawn(worker, args=(os.path.join(out_dir, "init"), out_dir) + args, nprocs=WORLD, join=False)
    deadline = time.monotonic() + SPAWN_DEADLINE_S
    try:
        while not context.join(timeout=0.5):
            if time.monotonic() > deadline:
                test.fail(f"{worker.__name__}: still running after {SPAWN_DEADLINE_S} s (a collective hangs?)")
    except (mp.ProcessRaisedException, mp.ProcessExitedException) as e:
        test.fail(f"{worker.__name__}: {e}")
    finally:
        for process in context.processes:
            if process.is_alive():
                process.kill()
            process.join()
    return out_dir


def init(rank, init_file):
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank, world_size=WORLD, timeout=TIMEOUT)
    dtr_torch.set_budget(None)  # whatever DTR_MEMORY_BUDGET says: each run sets its own


def plain(t):
    return dtr_torch.decheckpoint(t.detach()).clone()


# DDP training: plain and wrapped in the same process, the same seeds, the same per-rank data.

class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 32), torch.nn.Linear(32, 10)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class BNNet(torch.nn.Module):
    """Conv2d + BatchNorm2d + Dropout + Linear: DDP broadcasts the running stats from rank 0 every forward."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn = torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.BatchNorm2d(8)
        self.conv2, self.bn2 = torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.BatchNorm2d(8)
        self.pool = torch.nn.AvgPool2d(4)
        self.fc1, self.drop, self.fc2 = torch.nn.Linear(8 * 4 * 4, 32), torch.nn.Dropout(0.2), torch.nn.Linear(32, 10)

    def forward(self, x):
        x = torch.relu(self.bn(self.conv(x)))
        x = self.pool(torch.relu(self.bn2(self.conv2(x))))
        return self.fc2(self.drop(torch.relu(self.fc1(torch.flatten(x, 1)))))


# The zoo in torch.nn (bench/torch/zoo.py): a CIFAR-style ResNet with BatchNorm and a Transformer encoder, both
# with dropout.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "torch"))
from zoo import BUILDERS  # noqa: E402

EVICT = "evict after every op"


class Config:
    """One DDP training: `model` builds the module; `shape` is one rank's input batch; `modes` are the wrapped
    runs beside the unbudgeted one (fractions of its peak, or EVICT); `every_grad`: keep every step's gradients,
    not just the last step's; `broadcast_bucket`: DDP's broadcast_bucket_size (64: the buffer broadcast runs in
    many buckets, as for a model with more than 250 MB of buffers, each through dtr-torch's collectives)."""

    def __init__(self, model, optimizer, shape, steps, modes=(), ddp_kwargs=None, broadcast_bucket=None,
                 every_grad=False):
        self.model, self.optimizer, self.shape, self.steps, self.modes = model, optimizer, shape, steps, modes
        self.ddp_kwargs, self.broadcast_bucket, self.every_grad = ddp_kwargs or {}, broadcast_bucket, every_grad


def zoo(name, **spec):
    return lambda: BUILDERS[name](**spec)


RESNET = zoo("resnet", depth=20, width=8, dropout=0.1)
TRANSFORMER = zoo("transformer", depth=8, dim=32, heads=4, patch=0, dropout=0.1)
SMALL_RESNET = zoo("resnet", depth=8, width=4, dropout=0.1)
SMALL_TRANSFORMER = zoo("transformer", depth=2, dim=16, heads=2, patch=0, dropout=0.1)

# The acceptance: the zoo's ResNet and Transformer, 20 steps, SGD-momentum and Adam, under 0.5 and 0.3
# of the peak and (smaller models: every value read again is recomputed through its whole lineage, quadratic in
# the depth) evicting everything after every op. The small nets check every step's gradients and DDP's options.
CONFIGS = {
    "bn_sgd": Config(lambda: BNNet(), "sgd", (8, 1, 16, 16), 5, every_grad=True),
    "bn_sgd_small_broadcast_buckets": Config(lambda: BNNet(), "sgd", (8, 1, 16, 16), 5, (0.7,),
                                             broadcast_bucket=64, every_grad=True),
    "mlp_adam_gradient_as_bucket_view": Config(lambda: MLP(), "adam", (8, 16), 5,
                                               ddp_kwargs={"gradient_as_bucket_view": True}, every_grad=True),
    **{f"resnet20_{o}": Config(RESNET, o, (16, 1, 28, 28), 20, (0.5, 0.3)) for o in ("sgd", "adam")},
    **{f"transformer8_{o}": Config(TRANSFORMER, o, (8, 1, 28, 28), 20, (0.5, 0.3)) for o in ("sgd", "adam")},
    **{f"small_resnet_{o}": Config(SMALL_RESNET, o, (4, 1, 28, 28), 20, (EVICT,)) for o in ("sgd", "adam")},
    **{f"small_transformer_{o}": Config(SMALL_TRANSFORMER, o, (4, 1, 28, 28), 20, (EVICT,))
       for o in ("sgd", "adam")},
}


def train(rank, config, wrapped):
    """config.steps steps of DDP; the losses, the gradients (after DDP's allreduce) of every step or of the last,
    the final parameters and buffers, plain."""
    torch.manual_seed(0)
    model = config.model()
    if rank == 1:  # other weights on rank 1: DDP's construction must broadcast rank 0's
        with torch.no_grad():
            for p in model.parameters():
                p.add_(1.0)
    if wrapped:
        dtr_torch.checkpoint_module(model)
    ddp = torch.nn.parallel.DistributedDataParallel(model, **config.ddp_kwargs)
    if config.broadcast_bucket:
        ddp.broadcast_bucket_size = config.broadcast_bucket
    if config.optimizer == "adam":
        optimizer = torch.optim.Adam(ddp.parameters(), lr=1e-3)
    else:
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    data = torch.Generator().manual_seed(100 + rank)  # different data on each rank
    torch.manual_seed(1234 + rank)  # dropout
    out = {"losses": [], "grads": []}
    for step in range(config.steps):
        x = torch.randn(*config.shape, generator=data)
        y = torch.randint(0, 10, (config.shape[0],), generator=data)
        if wrapped:
            x, y = dtr_torch.checkpoint(x), dtr_torch.checkpoint(y)
        optimizer.zero_grad()
        loss = F.cross_entropy(ddp(x), y)
        loss.backward()
        if config.every_grad or step == config.steps - 1:
            out["grads"].append([plain(p.grad) for p in model.parameters()])
        optimizer.step()
        out["losses"].append(plain(loss).item())
    out["params"] = [plain(p) for p in model.parameters()]
    out["buffers"] = [plain(b) for b in model.buffers()]
    return out


def ddp_worker(rank, init_file, out_dir, names):
    init(rank, init_file)
    results = {}
    for name in names:
        config = CONFIGS[name]
        runs = {"plain": train(rank, config, False)}
        gc.collect()  # the last run's wrappers go: the peak and the budgets are this run's
        dtr_torch.reset_peak_stats()
        runs["wrapped"] = train(rank, config, True)
        gc.collect()
        peak = dtr_torch.stats()["peak_resident_bytes"]
        for mode in config.modes:
            if mode == EVICT:
                dtr_torch.evict_after_every_op(True)
            else:
                dtr_torch.set_budget(int(peak * mode))
            start = dtr_torch.stats()
            try:
                runs[mode] = train(rank, config, True)
            finally:
                dtr_torch.set_budget(None)
                dtr_torch.evict_after_every_op(False)
            end = dtr_torch.stats()
            runs[mode]["stats"] = {k: end[k] - start[k] for k in ("evictions", "rematerializations")}
            gc.collect()
        results[name] = runs
    torch.save(results, os.path.join(out_dir, f"ddp{rank}.pt"))
    dist.destroy_process_group()


# Collectives on wrapped tensors: what they write must be the wrapper's value for good, through eviction and
# recomputation (dtr-torch runs them on plain copies and copies the results back).

def evict_everything(targets_bytes):
    """Puts the runtime under pressure: a budget of what it holds now, then 4x targets_bytes of new computed
    values, so that the values already held are evicted (the caller checks that reading them recomputes)."""
    gc.collect()
    one = dtr_torch.checkpoint(torch.ones(256))
    dtr_torch.reset_peak_stats()
    dtr_torch.set_budget(dtr_torch.stats()["peak_resident_bytes"])
    try:
        junk = [one * i for i in range(4 * targets_bytes // 1024)]
    finally:
        dtr_torch.set_budget(None)
    del junk


def computed(values):
    """A wrapper that the runtime may evict and recompute (a constant times one, not a constant)."""
    return dtr_torch.checkpoint(values) * 1


def write_collectives(rank):
    """broadcast, all_reduce and all_gather into computed wrappers; what each should read."""
    broadcast = computed(torch.full((1024,), float(rank + 1)))
    dist.broadcast(broadcast, src=0)
    reduced = computed(torch.arange(1024.0) * (rank + 1))
    dist.all_reduce(reduced)
    gathered = [computed(torch.zeros(256)) for _ in range(WORLD)]
    # A wrapped input: all_gather hands it to gloo directly (dtr_torch reads it out first; without that,
    # "Cannot access data pointer of Tensor that doesn't have storage").
    dist.all_gather(gathered, computed(torch.full((256,), 10.0 + rank)))
    gathered_kw = [computed(torch.zeros(8)) for _ in range(WORLD)]
    dist.all_gather(tensor_list=gathered_kw, tensor=computed(torch.full((8,), 20.0 + rank)))
    return {"broadcast": (broadcast, torch.full((1024,), 1.0)),
            "all_reduce": (reduced, torch.arange(1024.0) * 3),
            **{f"all_gather[{i}]": (t, torch.full((256,), 10.0 + i)) for i, t in enumerate(gathered)},
            **{f"all_gather kw[{i}]": (t, torch.full((8,), 20.0 + i)) for i, t in enumerate(gathered_kw)}}


def write_gather_scatter(rank):
    """gather, scatter (each also with async_op=True) and all_to_all_single, with splits, between computed
    wrappers: 1.13 hands these tensors' data pointers to gloo, which a wrapper does not have (without dtr_torch's
    plain copies: "Cannot access data pointer of Tensor that doesn't have storage"). What each should read."""
    targets = {}
    for async_op in (False, True):
        gathered = [computed(torch.zeros(64)) for _ in range(WORLD)] if rank == 0 else None
        sent = computed(torch.full((64,), 30.0 + rank))
        work = dist.gather(sent, gathered, dst=0, async_op=async_op)
        scattered = computed(torch.zeros(64))
        parts = [computed(torch.full((64,), 40.0 + i)) for i in range(WORLD)] if rank == 0 else None
        work2 = dist.scatter(scattered, parts, src=0, async_op=async_op)
        if async_op:
            work.wait()
            work2.wait()
        tag = " async" if async_op else ""
        targets[f"gather{tag} input"] = (sent, torch.full((64,), 30.0 + rank))
        for i, t in enumerate(gathered or []):
            targets[f"gather{tag}[{i}]"] = (t, torch.full((64,), 30.0 + i))
        targets[f"scatter{tag}"] = (scattered, torch.full((64,), 40.0 + rank))
    # Rank r sends r + 1 elements to rank 0 and 3 - r to rank 1 (its values: 100 r + 0, 1, 2).
    sends = [rank + 1, 3 - rank]
    receives = [i + 1 if rank == 0 else 3 - i for i in range(WORLD)]
    received = computed(torch.zeros(sum(receives)))
    dist.all_to_all_single(received, computed(100.0 * rank + torch.arange(4.0)), receives, sends)
    expected = [100.0 * i + (0 if rank == 0 else i + 1) + torch.arange(float(n)) for i, n in enumerate(receives)]
    targets["all_to_all_single"] = (received, torch.cat(expected))
    return targets


def write_point_to_point(rank):
    """isend and irecv between wrappers, both ways; rank 1 posts its receive first, so rank 0's send must not
    wait for its receiver. What each should read."""
    peer = 1 - rank
    sent, received = computed(torch.full((512,), 100.0 + rank)), computed(torch.zeros(512))
    if rank == 0:
        works = [dist.isend(sent, peer), dist.irecv(received, peer)]
    else:
        works = [dist.irecv(received, peer), dist.isend(sent, peer)]
    for work in works:
        work.wait(P2P_TIMEOUT)
    return {"sent": (sent, torch.full((512,), 100.0 + rank)), "received": (received, torch.full((512,), 100.0 + peer))}


def versions_worker(rank, init_file, out_dir):
    """Each collective that dtr_torch runs on plain copies, on plain outputs and on wrapped ones: how their
    versions move, and whether a leaf that requires grad is refused as an output."""
    init(rank, init_file)
    got = {}
    for wrap in (False, True):
        def make(values):
            return computed(values) if wrap else values.clone()
        out = [make(torch.zeros(4)) for _ in range(WORLD)]
        before = [t._version for t in out]
        dist.all_gather(out, make(torch.ones(4)))
        moved = {"all_gather": [t._version - b for t, b in zip(out, before)]}
        out = [make(torch.zeros(4)) for _ in range(WORLD)] if rank == 0 else None
        before = [t._version for t in out or []]
        dist.gather(make(torch.ones(4)), out, dst=0)
        moved["gather"] = [t._version - b for t, b in zip(out or [], before)]
        scattered = make(torch.zeros(4))
        before = scattered._version
        dist.scatter(scattered, [make(torch.ones(4)) for _ in range(WORLD)] if rank == 0 else None, src=0)
        moved["scatter"] = scattered._version - before
        exchanged = make(torch.zeros(4))
        before = exchanged._version
        dist.all_to_all_single(exchanged, make(torch.ones(4)))
        moved["all_to_all_single"] = exchanged._version - before
        leaf = (dtr_torch.checkpoint(torch.zeros(4)) if wrap else torch.zeros(4)).requires_grad_()
        try:
            dist.all_gather([leaf, make(torch.zeros(4))], make(torch.ones(4)))
            moved["leaf that requires grad"] = "accepted"
        except RuntimeError as e:
            moved["leaf that requires grad"] = "refused: " + ("leaf" if "leaf Variable" in str(e) else str(e))
        got["wrapped" if wrap else "plain"] = moved
    torch.save(got, os.path.join(out_dir, f"versions{rank}.pt"))
    dist.destroy_process_group()


def overwrite_worker(rank, init_file, out_dir):
    """Evicted wrapped outputs of all_gather and scatter: the collective overwrites them, so their old values
    are not recomputed (rematerializations during the calls)."""
    init(rank, init_file)
    dtr_torch.evict_after_every_op(True)
    try:
        gathered = [computed(torch.full((64,), 5.0)) for _ in range(WORLD)]
        scattered = computed(torch.full((64,), 6.0))
        sent = dtr_torch.checkpoint(torch.full((64,), float(rank)))
    finally:
        dtr_torch.evict_after_every_op(False)
    start = dtr_torch.stats()["rematerializations"]
    dist.all_gather(gathered, sent)
    dist.scatter(scattered, [sent, sent] if rank == 0 else None, src=0)
    got = {"recomputed": dtr_torch.stats()["rematerializations"] - start,
           "values": [plain(t) for t in gathered] + [plain(scattered)]}
    torch.save(got, os.path.join(out_dir, f"overwrite{rank}.pt"))
    dist.destroy_process_group()


def collectives_worker(rank, init_file, out_dir, write):
    init(rank, init_file)
    targets = write(rank)
    got = {"expected": {k: e for k, (_, e) in targets.items()},
           "before eviction": {k: plain(t) for k, (t, _) in targets.items()}}
    evict_everything(sum(t.numel() * t.element_size() for t, _ in targets.values()))
    got["after eviction"], got["recomputed"] = {}, {}
    for k, (t, _) in targets.items():
        start = dtr_torch.stats()["rematerializations"]
        got["after eviction"][k] = plain(t)
        got["recomputed"][k] = dtr_torch.stats()["rematerializations"] > start
    torch.save(got, os.path.join(out_dir, f"{write.__name__}{rank}.pt"))
    dist.destroy_process_group()


class DistributedDataParallelTest(unittest.TestCase):
    """DDP over checkpointed modules, each rank against plain DDP in the same process: losses, gradients,
    parameters and buffers bitwise, unbudgeted, under budgets and evicting after every op."""

    def check(self, names):
        out_dir = spawn(self, ddp_worker, names)
        final = {}
        for rank in range(WORLD):
            for name, runs in torch.load(os.path.join(out_dir, f"ddp{rank}.pt")).items():
                expected = runs.pop("plain")
                for run, got in runs.items():
                    where = f"rank {rank}, {name}, {run if run in ('wrapped', EVICT) else f'budget {run} of the peak'}"
                    self.assertEqual(got["losses"], expected["losses"], where)
                    self.assertEqual(len(got["grads"]), len(expected["grads"]), where)
                    for step, (grads, expected_grads) in enumerate(zip(got["grads"], expected["grads"])):
                        for i, (g, e) in enumerate(zip(grads, expected_grads)):
                            self.assertTrue(torch.equal(g, e), f"{where}: gradients {step}, gradient {i}")
                    for part in ("params", "buffers"):
                        self.assertEqual(len(got[part]), len(expected[part]), where)
                        for i, (g, e) in enumerate(zip(got[part], expected[part])):
                            self.assertTrue(torch.equal(g, e), f"{where}: {part} {i}")
                    if run != "wrapped":  # evictions: the heuristic's (evicting after every op is not)
                        if run != EVICT:
                            self.assertGreater(got["stats"]["evictions"], 0, where)
                        self.assertGreater(got["stats"]["rematerializations"], 0, where)
                    final.setdefault((name, run), []).append(got["params"])
        self.assertEqual({name for name, _ in final}, set(names))
        for (name, run), (params0, params1) in final.items():  # DDP kept the ranks' parameters equal
            for i, (p0, p1) in enumerate(zip(params0, params1)):
                self.assertTrue(torch.equal(p0, p1), f"{name}, {run}: parameter {i} differs between the ranks")

    def test_small_nets_and_ddp_options(self):
        self.check(["bn_sgd", "bn_sgd_small_broadcast_buckets", "mlp_adam_gradient_as_bucket_view"])

    def test_zoo_resnet(self):
        self.check(["resnet20_sgd", "resnet20_adam", "small_resnet_sgd", "small_resnet_adam"])

    def test_zoo_transformer(self):
        self.check(["transformer8_sgd", "transformer8_adam", "small_transformer_sgd", "small_transformer_adam"])


class CollectivesTest(unittest.TestCase):
    """c10d's collectives on wrappers: each rank reads what plain tensors would hold, right after the collective
    and again once the runtime has evicted the wrappers and recomputed them."""

    def check(self, write):
        out_dir = spawn(self, collectives_worker, write)
        wrong = []
        for rank in range(WORLD):
            got = torch.load(os.path.join(out_dir, f"{write.__name__}{rank}.pt"))
            for when in ("before eviction", "after eviction"):
                for k, e in got["expected"].items():
                    if not torch.equal(got[when][k], e):
                        wrong.append(f"rank {rank}, {k} {when}: {got[when][k][:3].tolist()}..., "
                                     f"not {e[:3].tolist()}...")
            for k, recomputed in got["recomputed"].items():
                if not recomputed:  # the test's own failure: eviction did not take this value
                    wrong.append(f"rank {rank}, {k}: not evicted, so not read back by recomputation")
        if wrong:
            self.fail("\n".join(wrong))

    def test_broadcast_all_reduce_all_gather(self):
        self.check(write_collectives)

    def test_isend_irecv_both_ways(self):
        self.check(write_point_to_point)

    def test_gather_scatter_all_to_all(self):
        self.check(write_gather_scatter)

    def test_evicted_outputs_are_overwritten_not_recomputed(self):
        out_dir = spawn(self, overwrite_worker)
        for rank in range(WORLD):
            got = torch.load(os.path.join(out_dir, f"overwrite{rank}.pt"))
            self.assertEqual(got["recomputed"], 0, f"rank {rank}")
            expected = [torch.full((64,), float(i)) for i in range(WORLD)] + [torch.zeros(64)]
            for i, (g, e) in enumerate(zip(got["values"], expected)):
                self.assertTrue(torch.equal(g, e), f"rank {rank}, output {i}")

    def test_outputs_versions_move_as_for_plain_tensors(self):
        out_dir = spawn(self, versions_worker)
        for rank in range(WORLD):
            got = torch.load(os.path.join(out_dir, f"versions{rank}.pt"))
            self.assertEqual(got["wrapped"], got["plain"], f"rank {rank}")


if __name__ == "__main__":
    unittest.main()
