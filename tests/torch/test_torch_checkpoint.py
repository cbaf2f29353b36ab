"""torch.utils.checkpoint on dtr-torch's wrapped tensors, against plain PyTorch (run by Debian's
/usr/bin/python3; ctest sets DTR_TORCH_LIBRARY and PYTHONPATH).

Each test reruns a case of PyTorch 1.13's own TestCheckpoint (test/test_utils.py) twice: once on plain tensors
and once with the model's parameters and the inputs wrapped by dtr_torch, and, where the case holds enough
memory for a budget to bite, again under fractions of the wrapped run's unbudgeted peak. Outputs, gradients and
the CPU generator's state after the case must be equal bit for bit (torch.equal after decheckpoint). Error cases
must raise the error plain PyTorch raises.

Cases of TestCheckpoint left out, and why:
- test_checkpoint_rng_cuda, test_checkpointing_without_reentrant_early_free (CUDA memory_allocated as its
  probe), test_get_device_states_recursive (two GPUs): they need CUDA tensors; dtr-torch's wrappers are CPU
  tensors. (test_checkpoint_not_preserve_rng_state_and_without_reentrant is CUDA-only upstream only because
  of where its bug was; it runs here on the CPU.)
- test_checkpoint_no_tensors: the function gets Python numbers only, so there is nothing to wrap.
"""
import gc
import random
import unittest
import warnings

import torch
from torch.utils.checkpoint import checkpoint, checkpoint_sequential

import dtr_torch


def mlp(dropout=False):
    """The 100-50-20-5 ReLU stack of PyTorch's sequential cases (a dropout after the first ReLU if asked)."""
    layers = [torch.nn.Linear(100, 50), torch.nn.ReLU()]
    if dropout:
        layers.append(torch.nn.Dropout(0.3))
    layers += [torch.nn.Linear(50, 20), torch.nn.ReLU(), torch.nn.Linear(20, 5), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers)


class ListNet(torch.nn.Module):
    """The same stack held in an nn.ModuleList and run by a loop."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(list(mlp().children()))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def segments_without_reentrant(functions, segments, x):
    """checkpoint_sequential's split, each segment but the last checkpointed with use_reentrant=False
    (1.13's checkpoint_sequential has no use_reentrant argument; later versions run the same split)."""
    functions = list(functions.children()) if isinstance(functions, torch.nn.Sequential) else list(functions)
    size = len(functions) // segments

    def run(start, stop):
        def forward(t):
            for f in functions[start:stop]:
                t = f(t)
            return t
        return forward

    start = 0
    for _ in range(segments - 1):
        x = checkpoint(run(start, start + size), x, use_reentrant=False)
        start += size
    return run(start, len(functions))(x)


def sequential(functions, segments, x, reentrant):
    if reentrant:
        return checkpoint_sequential(functions, segments, x)
    return segments_without_reentrant(functions, segments, x)


def plain(value):
    """A case's result as plain values: tensors decheckpointed and detached, containers walked."""
    if isinstance(value, torch.Tensor):
        return dtr_torch.decheckpoint(value.detach()).clone()
    if isinstance(value, (list, tuple)):
        return type(value)(plain(v) for v in value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def grads(module):
    return {name: p.grad for name, p in module.named_parameters()}


class Wrapping:
    """What a case wraps: nothing (plain PyTorch) or its inputs and its model's parameters."""

    def __init__(self, wrapped):
        self.wrapped = wrapped

    def tensor(self, t):
        """A new leaf with t's value: wrapped, or a plain copy."""
        return dtr_torch.checkpoint(t) if self.wrapped else t.detach().clone()

    def module(self, m):
        return dtr_torch.checkpoint_module(m) if self.wrapped else m


class CheckpointCase(unittest.TestCase):
    def assertBitwise(self, expected, actual, where=""):
        if isinstance(expected, torch.Tensor):
            self.assertIsInstance(actual, torch.Tensor, where)
            self.assertFalse(dtr_torch.is_checkpointed(actual), where)
            self.assertEqual(expected.dtype, actual.dtype, where)
            self.assertTrue(torch.equal(expected, actual), f"{where}: {expected} != {actual}")
        elif isinstance(expected, (list, tuple)):
            self.assertEqual(type(expected), type(actual), where)
            self.assertEqual(len(expected), len(actual), where)
            for i, (e, a) in enumerate(zip(expected, actual)):
                self.assertBitwise(e, a, f"{where}[{i}]")
        elif isinstance(expected, dict):
            self.assertEqual(sorted(expected), sorted(actual), where)
            for k in expected:
                self.assertBitwise(expected[k], actual[k], f"{where}[{k!r}]")
        else:
            self.assertEqual(expected, actual, where)

    def compare(self, case, ratios=(), seed=0):
        """Runs case(Wrapping) plain, wrapped, and wrapped under each fraction of the wrapped run's peak;
        each run starts from torch.manual_seed(seed) and returns its results; the CPU generator's state
        after the run is compared too. Returns the plain results."""
        def run(wrapped):
            torch.manual_seed(seed)
            result = plain(case(Wrapping(wrapped)))
            return result, torch.get_rng_state()

        expected = run(False)
        gc.collect()
        dtr_torch.set_budget(None)
        dtr_torch.reset_peak_stats()
        self.assertBitwise(expected, run(True), "wrapped")
        peak = dtr_torch.stats()["peak_resident_bytes"]
        self.assertGreater(peak, 0)
        before = dtr_torch.stats()["rematerializations"]
        for ratio in ratios:
            gc.collect()
            start = dtr_torch.stats()
            dtr_torch.set_budget(int(peak * ratio))
            try:
                actual = run(True)
            finally:
                dtr_torch.set_budget(None)
            end = dtr_torch.stats()
            self.assertBitwise(expected, actual, f"wrapped at {ratio} of the peak")
            self.assertGreater(end["evictions"], start["evictions"], f"nothing evicted at {ratio}")
        if ratios:
            self.assertGreater(dtr_torch.stats()["rematerializations"], before, "nothing recomputed")
        return expected[0]


class SequentialTest(CheckpointCase):
    """The sequential cases: checkpoint_sequential (or its split with use_reentrant=False) against the
    model run whole, on an nn.Sequential, the list of its children, and an nn.ModuleList."""

    def sequential_case(self, build, pieces, segments, reentrant, batch=64, dropout=False):
        def case(w):
            model = w.module(build())
            x = torch.randn(batch, 100)
            results = {}
            for label, functions in [("whole", None)] + [(f"pieces{i}", p) for i, p in enumerate(pieces(model))]:
                model.zero_grad()
                inp = w.tensor(x).requires_grad_()
                out = model(inp) if functions is None else sequential(functions, segments, inp, reentrant)
                out.sum().backward()
                results[label] = plain((out, inp.grad, grads(model)))  # plain now: held results are not resident
                del inp, out  # before the next input is wrapped
            return results

        # The floor is about 0.76 of the peak (measured): the input and the parameters are constants, and the
        # first ReLU's backward needs its output, its gradient and its result resident at once.
        results = self.compare(case, ratios=(0.85, 0.8))
        # And checkpointing changes nothing either, as in plain PyTorch (without dropout, whose draws differ).
        if not dropout:
            for label in results:
                self.assertBitwise(results["whole"], results[label], label)

    def test_checkpoint_sequential(self):
        # Mirrors test_checkpoint (nn.Sequential and its list of children, use_reentrant True and False),
        # with several segment counts.
        for reentrant in (True, False):
            for segments in (1, 2, 3, 6):
                with self.subTest(reentrant=reentrant, segments=segments):
                    self.sequential_case(mlp, lambda m: [list(m.children()), m], segments, reentrant)

    def test_checkpoint_module_list(self):
        # Mirrors test_checkpoint_module_list (an nn.ModuleList and the list of its children).
        for reentrant in (True, False):
            with self.subTest(reentrant=reentrant):
                self.sequential_case(ListNet, lambda m: [list(m.layers.children()), m.layers], 2, reentrant)

    def test_checkpoint_sequential_with_dropout(self):
        # Mirrors test_checkpoint (sequential) and test_checkpoint_rng_cpu together: a dropout inside a
        # checkpointed segment draws the same mask in the recomputation.
        for reentrant in (True, False):
            with self.subTest(reentrant=reentrant):
                self.sequential_case(lambda: mlp(dropout=True), lambda m: [m], 2, reentrant, dropout=True)

    def test_checkpoint_trigger(self):
        # Mirrors test_checkpoint_trigger: each module of the checkpointed half runs twice, the rest once.
        class Counted(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.calls = 0

            def forward(self, x):
                self.calls += 1
                return x * torch.tensor(2.0)  # a plain tensor saved for backward (by use_reentrant=False too)

        def case(w, reentrant):
            modules = [Counted() for _ in range(10)]
            x = w.tensor(torch.randn(3, 4)).requires_grad_()
            out = sequential(modules, 2, x, reentrant)
            after_forward = [m.calls for m in modules]
            out.sum().backward()
            return after_forward, [m.calls for m in modules], out, x.grad

        for reentrant in (True, False):
            with self.subTest(reentrant=reentrant):
                forward_calls, calls, _, _ = self.compare(lambda w: case(w, reentrant))
                self.assertEqual(forward_calls, [1] * 10)
                self.assertEqual(calls, [2] * 5 + [1] * 5)


class RngTest(CheckpointCase):
    def test_checkpoint_rng_cpu(self):
        # Mirrors test_checkpoint_rng_cpu: a dropout before and one inside the checkpoint; the checkpointed
        # run's gradient equals the run without checkpoint from the same generator state.
        def case(w, checkpointed, reentrant):
            first, second = torch.nn.Dropout(), torch.nn.Dropout()
            results = []
            for _ in range(3):
                inp = w.tensor(torch.randn(20000)).requires_grad_()
                out = first(inp)
                out = checkpoint(second, out, use_reentrant=reentrant) if checkpointed else second(out)
                out.sum().backward()
                results.append(plain((out, inp.grad)))
                del inp, out
            return results

        for reentrant in (True, False):
            with self.subTest(reentrant=reentrant):
                checkpointed = self.compare(lambda w: case(w, True, reentrant), ratios=(0.8, 0.7))
                torch.manual_seed(0)
                self.assertBitwise(plain(case(Wrapping(False), False, reentrant)), checkpointed, "no checkpoint")

    def test_checkpoint_not_preserve_rng_state(self):
        # Mirrors test_checkpoint_not_preserve_rng_state_and_without_reentrant (CUDA upstream; CPU here): with
        # preserve_rng_state=False the recomputation draws afresh, as in plain PyTorch, and runs.
        def case(w, reentrant):
            layer = torch.nn.Dropout()
            inp = w.tensor(torch.randn(1000)).requires_grad_()
            out = checkpoint(layer, inp, use_reentrant=reentrant, preserve_rng_state=False)
            out.sum().backward()
            return out, inp.grad

        for reentrant in (True, False):
            with self.subTest(reentrant=reentrant):
                self.compare(lambda w: case(w, reentrant))


class ArgumentsTest(CheckpointCase):
    def test_checkpoint_non_tensor(self):
        # Mirrors test_checkpoint_non_tensor: None among the arguments.
        def add(a, b):
            return a if b is None else a + b

        def case(w, reentrant):
            x = w.tensor(torch.randn(100, 100)).requires_grad_()
            y = w.tensor(torch.randn(100, 100)).requires_grad_()
            first = checkpoint(add, x, None, use_reentrant=reentrant)
            second = checkpoint(add, x, y, use_reentrant=reentrant)
            (first.sum() + second.sum()).backward()
            return first, second, x.grad, y.grad

        for reentrant in (True, False):
            with self.subTest(reentrant=reentrant):
                self.compare(lambda w: case(w, reentrant), ratios=(0.9, 0.8))

    def test_checkpoint_non_tensor_inputs_outputs(self):
        # Mirrors test_checkpoint_non_tensor_inputs_outputs: numbers, None, a bool and a string among the
        # arguments and results, in-place updates inside, results used in part and one backward too many.
        def mixed(t1, t2, scale, t3):
            t4 = t1 + t2 * t3
            t5 = t1 * t2 + t3
            t4 *= scale
            t5 *= scale
            return scale, t4, None, True, t5, "bar", t1

        def case(w, reentrant):
            scale = random.Random(7).randint(1, 10)
            t1 = w.tensor(torch.rand(10000)).requires_grad_()
            t2 = w.tensor(torch.rand(10000)).requires_grad_()
            t3 = w.tensor(torch.rand(10000))
            res = checkpoint(mixed, t1, t2, scale, t3, use_reentrant=reentrant)
            self.assertEqual(res[0], scale)
            self.assertEqual(res[2:4], (None, True))
            self.assertEqual(res[5], "bar")
            res[1].sum().backward(retain_graph=True)
            res[4].sum().backward(retain_graph=True)
            res[6].sum().backward()
            if reentrant:  # the checkpoint's own graph was freed (without reentrant, res[6] is t1's view)
                with self.assertRaisesRegex(RuntimeError, "Trying to backward through the graph a second time"):
                    res[6].sum().backward()
            checkpointed = (res, t1.grad, t2.grad)
            t1.grad = t2.grad = None
            res = mixed(t1, t2, scale, t3)
            torch.autograd.backward([res[1].sum(), res[4].sum(), res[6].sum()])
            return checkpointed, (res, t1.grad, t2.grad)

        for reentrant in (True, False):
            with self.subTest(reentrant=reentrant):
                # Only 0.9: with use_reentrant=True, t4 and t5 are updated in place under no_grad and become
                # constants (see ReentrantInplaceTest); at 0.8 they leave no room.
                checkpointed, uncheckpointed = self.compare(lambda w: case(w, reentrant), ratios=(0.9,))
                self.assertBitwise(uncheckpointed, checkpointed, "checkpoint against none")

    def test_checkpoint_partial_grad(self):
        # Mirrors test_checkpoint_partial_grad: an input that does not require grad, a result left unused,
        # and the error when no result requires grad.
        def case(w):
            a = w.tensor(torch.randn(1, 4)).requires_grad_()
            b = w.tensor(torch.randn(1, 4))
            out = checkpoint(lambda x, y: (x * 3, y), a, b)
            out[0].sum().backward()
            with self.assertRaisesRegex(RuntimeError, "none of output has requires_grad=True"):
                c = w.tensor(torch.randn(1, 4))
                d = w.tensor(torch.randn(1, 4)).requires_grad_()
                checkpoint(lambda x, y: x, c, d).sum().backward()
            return out, out[1].requires_grad, a.grad

        self.compare(case)

    def test_checkpoint_no_input_requires_grad(self):
        # Mirrors check_backward_validity, run by every reentrant case: a warning when no input requires grad.
        def case(w):
            x = w.tensor(torch.randn(3))
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                out = checkpoint(torch.sin, x)
            self.assertTrue(any("None of the inputs have requires_grad=True" in str(c.message) for c in caught))
            return out

        self.compare(case)

    def test_checkpoint_sequential_arguments(self):
        # Mirrors test_checkpoint_sequential_deprecated_multiple_args and ..._no_args: one input, no more, no less.
        class Two(torch.nn.Module):
            def forward(self, a, b):
                return a, b

        class NoArgs(torch.nn.Module):
            def forward(self):
                return None

        a = dtr_torch.checkpoint(torch.randn(1, 100)).requires_grad_()
        b = dtr_torch.checkpoint(torch.randn(1, 100)).requires_grad_()
        with self.assertRaises(TypeError):
            checkpoint_sequential(torch.nn.Sequential(Two()), 1, a, b)
        with self.assertRaises(TypeError):
            checkpoint_sequential(torch.nn.Sequential(NoArgs()), 1)


class GradTest(CheckpointCase):
    def test_checkpoint_valid(self):
        # Mirrors test_checkpoint_valid: torch.autograd.grad (and backward's `inputs`) through a reentrant
        # checkpoint is an error; without reentrant it gives the gradients of the model run whole.
        def case(w):
            model = w.module(mlp())
            x = w.tensor(torch.randn(1, 100)).requires_grad_()
            ones = torch.ones(1, 5)
            out = checkpoint_sequential(list(model.children()), 2, x)
            with self.assertRaisesRegex(RuntimeError, "Checkpointing is not compatible"):
                torch.autograd.grad([out], [x], grad_outputs=[ones], create_graph=True)
            out = checkpoint_sequential(list(model.children()), 2, x)
            with self.assertRaisesRegex(RuntimeError, "Checkpointing is not compatible"):
                out.backward(ones, inputs=[x])
            whole = model(x)
            expected = torch.autograd.grad([whole], [x], grad_outputs=[ones], create_graph=True)
            out = segments_without_reentrant(list(model.children()), 2, x)
            actual = torch.autograd.grad([out], [x], grad_outputs=[ones], create_graph=True)
            self.assertTrue(actual[0].requires_grad)
            return whole, expected, out, actual

        whole, expected, out, actual = self.compare(case)
        self.assertBitwise(whole, out, "output")
        self.assertBitwise(expected, actual, "gradient")



class ReentrantInplaceTest(CheckpointCase):
    """test_checkpoint's sequential case with ReLU(inplace=True), the common form in CNNs, under a budget that
    the same model with out-of-place ReLUs trains in with either implementation (measured)."""

    def inplace_case(self, reentrant):
        def case(w):
            layers = []
            for _ in range(8):
                layers += [torch.nn.Linear(32, 32), torch.nn.ReLU(inplace=True)]
            model = w.module(torch.nn.Sequential(*layers))
            x = w.tensor(torch.randn(512, 32)).requires_grad_()
            out = sequential(model, 8, x, reentrant)
            out.sum().backward()
            return out, x.grad, grads(model)

        self.compare(case, ratios=(0.7,))

    def test_checkpoint_sequential_inplace_without_reentrant(self):
        # Mirrors test_checkpoint (use_reentrant=False) with in-place ReLUs, under a budget.
        self.inplace_case(reentrant=False)

    def test_checkpoint_sequential_inplace_reentrant(self):
        # Mirrors test_checkpoint (use_reentrant=True) with in-place ReLUs, under a budget. Each segment runs
        # under no_grad: when every in-place update under no_grad made a constant (dispatch.cpp's state rule
        # before it waited for a second update), 7 of 8 activations could not be evicted and 0.7 of the peak
        # ran out of memory where the out-of-place model fits.
        self.inplace_case(reentrant=True)


if __name__ == "__main__":
    unittest.main()
