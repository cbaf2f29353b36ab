"""dtr-torch from Python, against plain PyTorch: the same training, bitwise (run by Debian's /usr/bin/python3;
ctest sets DTR_TORCH_LIBRARY and PYTHONPATH)."""
import copy
import io
import os
import json
import pickle
import subprocess
import sys
import unittest

import torch

import dtr_torch

# The zoo in torch.nn (bench/torch/zoo.py), the architectures of the DTR paper's evaluation.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "torch"))
from zoo import BUILDERS  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.blocks = torch.nn.Sequential(*[torch.nn.Sequential(
            torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU()) for _ in range(4)])
        self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.pool = torch.nn.AvgPool2d(4)
        self.fc1 = torch.nn.Linear(8 * 4 * 4, 32)
        self.drop = torch.nn.Dropout(0.2)
        self.fc2 = torch.nn.Linear(32, 10)

    def forward(self, x):
        x = self.blocks(torch.relu(self.bn(self.conv(x))))
        x = self.pool(torch.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        return self.fc2(self.drop(torch.relu(self.fc1(x))))


def train_steps(model, optimizer, batches, wrapped):
    """Trains `model` one step per batch (inputs and labels wrapped when `wrapped`); returns the losses and the
    state dict with the last step's gradients ("grad:" + name), plain."""
    losses = []
    for x, y in batches:
        if wrapped:
            x, y = dtr_torch.checkpoint(x), dtr_torch.checkpoint(y)
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(dtr_torch.decheckpoint(loss.detach()).item())
    state = {k: dtr_torch.decheckpoint(v.detach()).clone() for k, v in model.state_dict().items()}
    for k, p in model.named_parameters():
        state["grad:" + k] = dtr_torch.decheckpoint(p.grad).clone()
    return losses, state


def prepared(model, wrapped, optimizer_name):
    """`model` (checkpointed when `wrapped`) and its optimizer: Adam, or SGD with momentum."""
    if wrapped:
        dtr_torch.checkpoint_module(model)
    if optimizer_name == "adam":
        return model, torch.optim.Adam(model.parameters(), lr=1e-3)
    return model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


def train(wrapped, optimizer_name, steps=20):
    torch.manual_seed(5)
    model, optimizer = prepared(Net(), wrapped, optimizer_name)
    # Drawn as the steps go, between the steps' own random draws (dropout).
    batches = ((torch.randn(32, 1, 16, 16), torch.randint(0, 10, (32,))) for _ in range(steps))
    return train_steps(model, optimizer, batches, wrapped)


class TrainingTest(unittest.TestCase):
    """The CNN (BatchNorm, dropout) for 20 steps, wrapped: unbudgeted, evicting everything after every op
    (each value read again is recomputed), and under 0.5 and 0.3 of the unbudgeted peak."""

    def check(self, optimizer_name):
        plain_losses, plain_state = train(False, optimizer_name)
        dtr_torch.set_budget(None)
        dtr_torch.reset_peak_stats()
        losses, state = train(True, optimizer_name)
        self.assertEqual(plain_losses, losses)
        for k in plain_state:
            self.assertTrue(torch.equal(plain_state[k], state[k]), k)
        peak = dtr_torch.stats()["peak_resident_bytes"]
        self.assertGreater(peak, 0)
        start = dtr_torch.stats()["rematerializations"]
        dtr_torch.evict_after_every_op(True)
        try:
            losses, state = train(True, optimizer_name)
        finally:
            dtr_torch.evict_after_every_op(False)
        self.assertEqual(plain_losses, losses, "evicting after every op")
        for k in plain_state:
            self.assertTrue(torch.equal(plain_state[k], state[k]), f"{k} evicting after every op")
        self.assertGreater(dtr_torch.stats()["rematerializations"], start)
        for ratio in (0.5, 0.3):
            dtr_torch.set_budget(int(peak * ratio))
            start = dtr_torch.stats()
            losses, state = train(True, optimizer_name)
            dtr_torch.set_budget(None)
            end = dtr_torch.stats()
            self.assertEqual(plain_losses, losses, f"losses at {ratio}")
            for k in plain_state:
                self.assertTrue(torch.equal(plain_state[k], state[k]), f"{k} at {ratio}")
            self.assertGreater(end["rematerializations"], start["rematerializations"], f"at {ratio}")

    def test_sgd_momentum(self):
        self.check("sgd")

    def test_adam(self):
        self.check("adam")


class ZooTest(unittest.TestCase):
    """Zoo models (bench/torch/zoo.py: a CIFAR-style ResNet with BatchNorm, a Transformer encoder with dropout),
    20 steps with SGD-momentum and with Adam, wrapped, under 0.5 and 0.3 of their unbudgeted peak, and
    evicting everything after every op (a smaller model of each: every value read again is recomputed through
    its whole lineage, quadratic in the depth): losses, last gradients, parameters and running statistics
    bitwise those of plain PyTorch. Sized so that activations dominate: below about a quarter of the peak a
    step's largest op and the constants (parameters, momentum, gradients) no longer fit (a batch of 8 for
    ResNet-20, a depth of 4 for the Transformer, measured). The run's thrash limit is off (ctest's
    DTR_THRASH_LIMIT): with costs counted in bytes dtr-eq (the default when this was written) recomputed the
    Transformer's cheap clones and softmaxes past twice the base compute (issue 18); exactness is tested here."""

    STEPS = 20

    def check(self, name, spec, batch, modes):
        torch.manual_seed(3)
        base = BUILDERS[name](**spec)
        batches = [(torch.randn(batch, 1, 28, 28), torch.randint(0, 10, (batch,))) for _ in range(self.STEPS)]

        def train(wrapped, optimizer_name):
            model, optimizer = prepared(copy.deepcopy(base), wrapped, optimizer_name)
            torch.manual_seed(4)  # dropout's draws
            return train_steps(model, optimizer, batches, wrapped)

        for optimizer_name in ("sgd", "adam"):
            plain_losses, plain_state = train(False, optimizer_name)
            dtr_torch.set_budget(None)
            dtr_torch.reset_peak_stats()
            losses, _ = train(True, optimizer_name)
            self.assertEqual(plain_losses, losses)
            peak = dtr_torch.stats()["peak_resident_bytes"]
            for mode in modes:
                what = f"{name}, {optimizer_name}, {mode}"
                if mode == "evict after every op":
                    dtr_torch.evict_after_every_op(True)
                else:
                    dtr_torch.set_budget(int(peak * mode))
                start = dtr_torch.stats()["rematerializations"]
                try:
                    losses, state = train(True, optimizer_name)
                finally:
                    dtr_torch.set_budget(None)
                    dtr_torch.evict_after_every_op(False)
                self.assertEqual(plain_losses, losses, what)
                for k in plain_state:
                    self.assertTrue(torch.equal(plain_state[k], state[k]), f"{what}: {k}")
                self.assertGreater(dtr_torch.stats()["rematerializations"], start, what)

    def test_resnet(self):
        self.check("resnet", {"depth": 20, "width": 8, "dropout": 0.1}, 32, (0.5, 0.3))
        self.check("resnet", {"depth": 8, "width": 4, "dropout": 0.1}, 8, ("evict after every op",))

    def test_transformer(self):
        self.check("transformer", {"depth": 8, "dim": 32, "heads": 4, "patch": 0, "dropout": 0.1}, 16, (0.5, 0.3))
        self.check("transformer", {"depth": 2, "dim": 16, "heads": 2, "patch": 0, "dropout": 0.1}, 8, ("evict after every op",))


class WrapperTest(unittest.TestCase):
    def test_tied_weights_stay_tied(self):
        embedding = torch.nn.Embedding(10, 4)
        head = torch.nn.Linear(4, 10, bias=False)
        head.weight = embedding.weight
        model = torch.nn.Sequential(embedding, head)
        dtr_torch.checkpoint_module(model)
        self.assertEqual(len(list(model.parameters())), 1)
        self.assertIs(model[0].weight, model[1].weight)

    def test_wrapped_tensors_print_and_convert(self):
        t = dtr_torch.checkpoint(torch.arange(6.0).reshape(2, 3))
        self.assertTrue(dtr_torch.is_checkpointed(t))
        self.assertEqual((t * 2).sum().item(), 30.0)
        self.assertEqual(dtr_torch.decheckpoint(t).tolist(), [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])


class BoundaryTest(unittest.TestCase):
    """Where values leave PyTorch's ops: a wrapper reads out as the plain tensor it stands for, or says why not."""

    def pair(self, *shape):
        torch.manual_seed(3)
        plain = torch.randn(*shape)
        w = torch.randn(shape[-1], requires_grad=True)
        wrapped_w = dtr_torch.checkpoint(w.detach()).requires_grad_()
        return plain * w, dtr_torch.checkpoint(plain) * wrapped_w, w, wrapped_w

    def test_printing_is_plain_pytorchs(self):
        for shape in [(3,), (2, 3), (40, 50), (2, 0)]:  # (40, 50): summarized with "..."
            plain, wrapped, w, wrapped_w = self.pair(*shape)
            self.assertEqual(repr(wrapped), repr(plain))  # values, and grad_fn=<MulBackward0>
            self.assertEqual(str(wrapped.detach()), str(plain.detach()))
            self.assertEqual(repr(wrapped_w), repr(w))  # requires_grad=True
            self.assertEqual(f"{wrapped.sum()}", f"{plain.sum()}")

    def test_tolist_and_numpy_read_out_a_copy(self):
        plain, wrapped, _, _ = self.pair(4, 5)
        self.assertEqual(wrapped.tolist(), plain.tolist())
        array = wrapped.detach().numpy()
        self.assertTrue((array == plain.detach().numpy()).all())
        array[0, 0] = 7.0  # a copy: the wrapper keeps its value
        self.assertTrue(torch.equal(dtr_torch.decheckpoint(wrapped), plain.detach()))
        with self.assertRaisesRegex(RuntimeError, "requires grad"):  # PyTorch's own rule still applies
            wrapped.numpy()

    def test_storage_and_address_are_clear_errors(self):
        # Without WrappedTensorImpl::storage, t.storage() crashed the interpreter (an empty Storage).
        _, wrapped, _, _ = self.pair(2, 3)
        for read in [wrapped.data_ptr, wrapped.storage, wrapped._storage]:
            with self.assertRaisesRegex(RuntimeError, "no fixed address.*decheckpoint"):
                read()

    def test_save_and_pickle_give_plain_tensors(self):
        plain, wrapped, w, wrapped_w = self.pair(3, 4)
        buffer = io.BytesIO()
        torch.save({"t": wrapped.detach(), "w": wrapped_w, "p": torch.nn.Parameter(wrapped.detach())}, buffer)
        buffer.seek(0)
        loaded = torch.load(buffer)
        for key, expected in [("t", plain.detach()), ("w", w.detach()), ("p", plain.detach())]:
            self.assertFalse(dtr_torch.is_checkpointed(loaded[key]))
            self.assertTrue(torch.equal(loaded[key].detach(), expected))
        self.assertTrue(loaded["w"].requires_grad)
        self.assertIsInstance(loaded["p"], torch.nn.Parameter)
        self.assertTrue(torch.equal(pickle.loads(pickle.dumps(wrapped.detach())), plain.detach()))

    def test_deepcopy_stays_wrapped(self):
        _, _, w, wrapped_w = self.pair(3)
        wrapped_w.grad = dtr_torch.checkpoint(torch.ones(3))
        copied = copy.deepcopy(wrapped_w)
        self.assertTrue(dtr_torch.is_checkpointed(copied))
        self.assertTrue(copied.requires_grad)
        self.assertTrue(torch.equal(dtr_torch.decheckpoint(copied), w.detach()))
        self.assertTrue(torch.equal(dtr_torch.decheckpoint(copied.grad), torch.ones(3)))
        model = dtr_torch.checkpoint_module(torch.nn.Linear(3, 2))
        twin = copy.deepcopy(model)
        self.assertTrue(dtr_torch.is_checkpointed(twin.weight))
        self.assertTrue(torch.equal(dtr_torch.decheckpoint(twin.weight), dtr_torch.decheckpoint(model.weight)))
        with self.assertRaisesRegex(RuntimeError, "graph leaves"):  # PyTorch's own rule still applies
            copy.deepcopy(wrapped_w * 2)


class FactoryModeTest(unittest.TestCase):
    """The opt-in mode for programs that cannot be edited (dtr_torch.wrap_factories, python3 -m dtr_torch)."""

    def test_the_package_loads_on_import_and_refuses_a_second_library(self):
        # With DTR_TORCH_LIBRARY set, importing the package puts its wrapped functions in place before any call.
        code = "import torch.distributed as d, dtr_torch; print(getattr(d.gather, '_dtr_boundary', False))"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        self.assertEqual(out.stdout.strip(), "True")
        self.assertEqual(dtr_torch.load(os.environ["DTR_TORCH_LIBRARY"]), os.environ["DTR_TORCH_LIBRARY"])
        with self.assertRaisesRegex(RuntimeError, "loaded already"):
            # Another file beside the loaded one (it need not exist: the refusal comes first).
            dtr_torch.load(os.path.join(os.path.dirname(os.environ["DTR_TORCH_LIBRARY"]), "another_dtr_torch.so"))

    def test_creation_functions_return_wrappers_while_it_is_on(self):
        import numpy
        self.assertFalse(dtr_torch.wrap_factories(True))
        try:
            self.assertTrue(dtr_torch.wrap_factories(True))  # already on
            for made in [torch.zeros(2, 3), torch.randn(4), torch.tensor([1.0, 2.0]), torch.arange(5),
                         torch.from_numpy(numpy.ones(3)), torch.full((2,), 7), torch.zeros_like(torch.ones(2))]:
                self.assertTrue(dtr_torch.is_checkpointed(made))
            leaf = torch.zeros(3, requires_grad=True)
            self.assertTrue(leaf.requires_grad and leaf.is_leaf)
            # Left as they are: out=, other devices, other layouts.
            plain = torch.ops.dtr.decheckpoint(torch.empty(2))
            self.assertIs(torch.zeros(2, out=plain), plain)
            self.assertFalse(dtr_torch.is_checkpointed(torch.zeros(2, device="meta")))
            self.assertFalse(dtr_torch.is_checkpointed(torch.zeros(2, 2, layout=torch.sparse_coo)))
        finally:
            self.assertTrue(dtr_torch.wrap_factories(False))
        self.assertFalse(dtr_torch.is_checkpointed(torch.zeros(2)))
        with dtr_torch.wrapping_factories():
            self.assertTrue(dtr_torch.is_checkpointed(torch.ones(1)))
        self.assertFalse(dtr_torch.is_checkpointed(torch.ones(1)))

    def run_script(self, runner, budget=None):
        env = dict(os.environ)
        env.pop("DTR_MEMORY_BUDGET", None)
        if budget is not None:
            env["DTR_MEMORY_BUDGET"] = str(budget)
        command = [sys.executable] + (["-m", "dtr_torch"] if runner else []) + [
            os.path.join(os.path.dirname(os.path.abspath(__file__)), "unmodified_training.py"), "3"]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(done.returncode, 0, done.stderr)
        report = [json.loads(line[4:]) for line in done.stderr.splitlines() if line.startswith("dtr {")]
        return done.stdout, report[0] if report else None

    def test_an_unmodified_script_trains_bitwise_under_python_m_dtr_torch(self):
        plain, none = self.run_script(runner=False)
        self.assertIsNone(none)
        unbudgeted, report = self.run_script(runner=True)
        self.assertEqual(unbudgeted, plain)  # every loss, and BatchNorm's running mean, in hex
        self.assertTrue(report["parameters_wrapped"] and report["data_wrapped"], report)
        budgeted, squeezed = self.run_script(runner=True, budget=int(report["peak"] * 0.6))
        self.assertEqual(budgeted, plain)
        self.assertGreater(squeezed["evictions"], 0)
        usage = subprocess.run([sys.executable, "-m", "dtr_torch"], capture_output=True, text=True, timeout=60)
        self.assertEqual(usage.returncode, 2)
        self.assertIn("python3 -m dtr_torch SCRIPT", usage.stderr)


if __name__ == "__main__":
    unittest.main()
