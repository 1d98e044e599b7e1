"""frontier-optuna-proposer: each sampler proposes new, distinct, valid
configurations rebuilt from the told outcomes alone (the same request gives
the same answer), never the baseline or one told or pending; the last untried
configuration is found and an exhausted space ends the search; constraints
reach the sampler; and the Proposer service answers over gRPC.

Run: FRONTIER_PROTO_PYTHON=<build>/python /usr/bin/python3 optuna_proposer_test.py
"""

import contextlib
import io
import itertools
import os
import sys
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path[:0] = [os.path.join(ROOT, "proposers"), os.path.join(ROOT, "proposers", "optuna")]

import grpc  # noqa: E402

import frontier_proposer as fp  # noqa: E402
import optuna_proposer  # noqa: E402

pb = fp.proposer_pb2
SAMPLERS = ["tpe", "motpe", "nsga2", "random"]


def request(count, told=(), pending=(), constrained=False):
    r = pb.ProposeRequest(experiment_id="exp-1", experiment_name="t", count=count, repeats=1, steps=10, seed=5)
    r.dimensions.add(name="block", choices_json=['"basic"', '"mbconv"', '"convnext"'], baseline_index=0)
    r.dimensions.add(name="width", choices_json=["8", "16", "32"], ordinal=True, baseline_index=1)
    r.objectives.add(metric="val_accuracy", maximize=True)
    r.objectives.add(metric="params", maximize=False)
    if constrained:
        r.constraints.add(metric="params", has_max=True, max=2000)
    b = r.baseline
    b.status = "completed"
    b.metrics["val_accuracy"] = 0.6
    b.metrics["params"] = 1600
    for block, width in told:
        o = r.outcomes.add(status="completed" if block != 2 else "failed")
        o.config.choices["block"] = block
        o.config.choices["width"] = width
        if block != 2:
            o.metrics["val_accuracy"] = 0.5 + 0.1 * width
            o.metrics["params"] = 1000 * (width + 1)
            o.violation = max(0.0, (1000 * (width + 1) - 2000) / 2000) if constrained else 0.0
    for block, width in pending:
        p = r.pending.add()
        p.choices["block"] = block
        p.choices["width"] = width
    return r


def configs(response):
    return [(c.config.choices["block"], c.config.choices["width"]) for c in response.configs]


@contextlib.contextmanager
def serving(sampler, interceptors=()):
    """A stub of the Proposer service of `sampler` on a free loopback port."""
    server = grpc.server(fp.futures.ThreadPoolExecutor(max_workers=2), interceptors=list(interceptors))
    fp.proposer_pb2_grpc.add_ProposerServicer_to_server(
        fp._Servicer(optuna_proposer.OptunaProposer(sampler).propose), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield fp.proposer_pb2_grpc.ProposerStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
    finally:
        server.stop(0)


class OptunaProposerTest(unittest.TestCase):
    def test_each_sampler_proposes_new_distinct_configurations(self):
        told, pending = [(1, 0), (2, 2)], [(0, 2)]
        for name in SAMPLERS:
            with self.subTest(sampler=name):
                p = optuna_proposer.OptunaProposer(name, population=4)
                r = p.propose(request(3, told, pending, constrained=True))
                got = configs(r)
                self.assertEqual(len(got), 3)
                self.assertEqual(len(set(got)), 3)
                for c in got:
                    self.assertNotIn(c, told + pending + [(0, 1)])
                    self.assertTrue(0 <= c[0] < 3 and 0 <= c[1] < 3)
                self.assertEqual(r.proposer, f"optuna:{name}")
                self.assertFalse(r.finished)
                again = optuna_proposer.OptunaProposer(name, population=4).propose(
                    request(3, told, pending, constrained=True))
                self.assertEqual(configs(again), got, "stateless: the same request, the same answer")

    def test_finds_the_last_configuration_then_finishes(self):
        everything = [c for c in itertools.product(range(3), range(3)) if c != (0, 1)]
        for name in SAMPLERS:
            with self.subTest(sampler=name):
                p = optuna_proposer.OptunaProposer(name, population=4)
                r = p.propose(request(2, told=everything[:-1]))
                self.assertEqual(configs(r), [everything[-1]])
                self.assertTrue(r.finished)
                r = p.propose(request(1, told=everything))
                self.assertEqual(configs(r), [])
                self.assertTrue(r.finished)

    def test_constraints_reach_the_sampler(self):
        space = fp.Space(request(1, constrained=True))
        o = pb.ProposerOutcome(status="completed")
        o.metrics["params"] = 3000
        self.assertEqual(space.constraint_values(o), [1000])
        proposer = optuna_proposer.OptunaProposer("tpe")
        dists = optuna_proposer.distributions(space)
        o.config.choices["block"] = 1
        self.assertEqual(proposer._told_trial(space, dists, o, 0).state.name, "FAIL",
                         "an objective is missing: a failed trial for Optuna")
        o.metrics["val_accuracy"] = 0.7
        trial = proposer._told_trial(space, dists, o, 0)
        self.assertEqual(trial.state.name, "COMPLETE")
        self.assertEqual(trial.values, [0.7, 3000])
        self.assertEqual(trial.params, {"block": 1, "width": 1})  # width left out: the baseline's
        self.assertEqual(trial.system_attrs["constraints"], (1000,))

    def test_tpe_past_its_random_start_follows_the_outcomes(self):
        # 8 x 6 configurations; val_accuracy is high only where a >= 6 (12 of 48), params flat. Told 14
        # outcomes (TPE's n_startup_trials is 10), 3 of them good: TPE's model, not its random start,
        # proposes, so most of its 5 proposals are good (3: the first three); random search draws good
        # ones at their share among the untold (9 of 34; 0 of 5 at this seed).
        def req(told):
            r = pb.ProposeRequest(experiment_id="exp-1", experiment_name="t", count=5, repeats=1, steps=10, seed=5)
            r.dimensions.add(name="a", choices_json=[str(i) for i in range(8)], ordinal=True, baseline_index=0)
            r.dimensions.add(name="b", choices_json=[str(i) for i in range(6)], ordinal=True, baseline_index=0)
            r.objectives.add(metric="val_accuracy", maximize=True)
            r.objectives.add(metric="params", maximize=False)
            r.baseline.status = "completed"
            r.baseline.metrics["val_accuracy"] = 0.1
            r.baseline.metrics["params"] = 1000
            for a, b in told:
                o = r.outcomes.add(status="completed")
                o.config.choices["a"], o.config.choices["b"] = a, b
                o.metrics["val_accuracy"] = 0.9 if a >= 6 else 0.1
                o.metrics["params"] = 1000
            return r
        told = [(a, b) for a in range(6) for b in (1, 4)][:11] + [(6, 2), (7, 0), (7, 5)]
        self.assertEqual(len(told), 14)
        def good(name):
            r = optuna_proposer.OptunaProposer(name).propose(req(told))
            got = [(c.config.choices["a"], c.config.choices["b"]) for c in r.configs]
            self.assertEqual(len(set(got)), 5)
            return sum(a >= 6 for a, _ in got)
        self.assertGreaterEqual(good("tpe"), 3)
        self.assertLessEqual(good("random"), 1)

    def test_serves_the_proposer_api_over_grpc(self):
        with serving("tpe") as stub:
            r = stub.Propose(request(2), timeout=30)
            self.assertEqual(len(r.configs), 2)
            bad = request(1)
            bad.dimensions.add(name="empty")  # no choices: the handler fails, the server answers an error
            with self.assertRaises(grpc.RpcError) as e:
                stub.Propose(bad, timeout=30)
            self.assertEqual(e.exception.code(), grpc.StatusCode.INTERNAL)
            self.assertEqual(len(stub.Propose(request(1), timeout=30).configs), 1, "still serving")

    def test_a_token_is_required_when_set(self):
        with serving("random", [fp._TokenCheck("proposer-token-0123456789")]) as stub:
            with self.assertRaises(grpc.RpcError) as e:
                stub.Propose(request(1), timeout=30, metadata=[("authorization", "Bearer wrong")])
            self.assertEqual(e.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
            r = stub.Propose(request(1), timeout=30,
                             metadata=[("authorization", "Bearer proposer-token-0123456789")])
            self.assertEqual(len(r.configs), 1)

    def test_a_single_objective_sampler_on_two_objectives_is_refused_naming_both(self):
        proposer = optuna_proposer.OptunaProposer("CmaEsSampler")
        r = proposer.propose(request(2))
        self.assertEqual(len(r.configs), 0)
        self.assertIn("CmaEsSampler is single-objective", r.error)
        self.assertIn("val_accuracy, params", r.error)
        one = request(2)
        del one.objectives[1]
        self.assertEqual(proposer.propose(one).error, "", "one objective: CmaEs can search it")

    def test_the_sampler_is_checked_against_the_space_file_at_start(self):
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write("space:\n  block: [basic, mbconv]\n  width: [8, 16, 32]\n"
                    "objectives:\n  - {metric: val_accuracy, goal: maximize}\n  - {metric: throughput}\n")
        self.addCleanup(os.unlink, f.name)
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            self.assertEqual(optuna_proposer.main(["--sampler", "CmaEsSampler", "--space", f.name]), 2)
        self.assertIn("CmaEsSampler is single-objective", err.getvalue())
        self.assertIn("val_accuracy, throughput", err.getvalue())
        with self.assertRaises(SystemExit) as e:
            optuna_proposer.main(["--sampler", "tpe", "--space", f.name + ".missing"])
        self.assertIn(".missing", str(e.exception))

if __name__ == "__main__":
    unittest.main()
