"""frontier-optuna-proposer: serves the Proposer API with an Optuna sampler.

Stateless: every Propose rebuilds an in-memory study from the outcomes the
coordinator tells (each dimension a distribution over its choice indices:
categorical, or an int range when ordinal), asks the sampler for the
configurations wanted, and answers them. Constraints go through the
sampler's constraints function where it has one (tpe, motpe, nsga2).
docs/proposers.md.
"""

import math
import random
import warnings

import optuna
from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.trial import TrialState, create_trial

import frontier_proposer as fp

warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
warnings.filterwarnings("ignore", category=FutureWarning, module="optuna")

_CONSTRAINTS_KEY = "constraints"           # optuna.samplers._base
_NSGA2_GENERATION_KEY = "nsga2:generation"  # optuna.samplers.nsgaii._sampler


def _constraints_func(trial):
    return trial.system_attrs.get(_CONSTRAINTS_KEY, ())


def make_sampler(name, seed, has_constraints, population):
    cf = _constraints_func if has_constraints else None
    samplers = optuna.samplers
    if name == "tpe":
        return samplers.TPESampler(seed=seed, multivariate=True, constraints_func=cf, n_startup_trials=10)
    if name == "motpe":
        if hasattr(samplers, "MOTPESampler"):
            return samplers.MOTPESampler(seed=seed)  # Optuna 3.1: no constraints function
        return samplers.TPESampler(seed=seed, constraints_func=cf)
    if name == "nsga2":
        return samplers.NSGAIISampler(seed=seed, constraints_func=cf, population_size=population)
    if name == "qmc":
        try:
            import scipy.stats.qmc  # noqa: F401  Optuna's QMCSampler draws from scipy's Sobol'
        except ImportError:
            raise SystemExit("sampler qmc needs scipy (Debian: python3-scipy), which is not installed")
        return samplers.QMCSampler(seed=seed, scramble=True)
    if name == "random":
        return samplers.RandomSampler(seed=seed)
    # Whatever a newer Optuna adds, by class name (e.g. GPSampler).
    cls = getattr(samplers, name, None)
    if cls is None or not isinstance(cls, type):
        raise SystemExit(f"unknown sampler '{name}'; expected tpe, motpe, nsga2, qmc, random or a class "
                         f"of optuna.samplers")
    return cls(seed=seed)


def distributions(space):
    out = {}
    for name, choices, ordinal in zip(space.names, space.choices, space.ordinal):
        n = len(choices)
        out[name] = IntDistribution(0, n - 1) if ordinal and n > 1 else CategoricalDistribution(list(range(n)))
    return out


class OptunaProposer:
    def __init__(self, sampler, population=16):
        self.sampler_name = sampler
        self.population = population

    def _told_trial(self, space, dists, outcome, number):
        indices = space.indices(outcome.config)
        if any(i is None for i in indices):
            return None
        params = dict(zip(space.names, indices))
        system_attrs = {}
        if self.sampler_name == "nsga2":
            system_attrs[_NSGA2_GENERATION_KEY] = number // self.population
        values = [outcome.metrics.get(metric) for metric, _ in space.objectives]
        if outcome.status != "completed" or any(v is None or not math.isfinite(v) for v in values):
            return create_trial(state=TrialState.FAIL, params=params, distributions=dists,
                                system_attrs=system_attrs)
        if space.constraints:
            system_attrs[_CONSTRAINTS_KEY] = tuple(space.constraint_values(outcome))
        return create_trial(state=TrialState.COMPLETE, params=params, distributions=dists, values=values,
                            system_attrs=system_attrs)

    def propose(self, request):
        space = fp.Space(request)
        dists = distributions(space)
        seed = (request.seed * 1_000_003 + len(request.outcomes) * 7919 + len(request.pending)) % (2 ** 31)
        sampler = make_sampler(self.sampler_name, seed, bool(space.constraints), self.population)
        directions = ["maximize" if maximize else "minimize" for _, maximize in space.objectives]
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study = optuna.create_study(directions=directions, sampler=sampler)
        told = ([request.baseline] if request.HasField("baseline") else []) + list(request.outcomes)
        for number, outcome in enumerate(told):
            trial = self._told_trial(space, dists, outcome, number)
            if trial is not None:
                study.add_trial(trial)
        seen = fp.seen_configs(space, request)
        rejected = {space.indices(r.config): r.reason for r in request.rejections}
        rng = random.Random(seed)
        response = fp.proposer_pb2.ProposeResponse(proposer=f"optuna:{self.sampler_name}")
        space_size = space.size()
        for _ in range(max(1, request.count)):
            chosen, how = None, ""
            for attempt in range(20):
                trial = study.ask(dists)
                indices = tuple(trial.params[name] for name in space.names)
                # Told as failed either way, so that the next ask moves on.
                study.tell(trial, state=TrialState.FAIL)
                if indices not in seen and indices not in rejected:
                    chosen, how = indices, f"{self.sampler_name} sample" + (f" (try {attempt + 1})" if attempt else "")
                    break
            if chosen is None and len(seen) + len(rejected) < space_size:
                for _ in range(10 * space_size if space_size < 100000 else 100000):
                    indices = tuple(rng.randrange(len(c)) for c in space.choices)
                    if indices not in seen and indices not in rejected:
                        chosen, how = indices, f"random: {self.sampler_name} repeated known configurations"
                        break
            if chosen is None:
                response.finished = True
                break
            seen.add(chosen)
            response.configs.append(fp.proposed(space, chosen, how))
        return response


def main(argv=None):
    parser = fp.common_flags("Serve Frontier's Proposer API with an Optuna sampler.")
    parser.add_argument("--sampler", default="tpe",
                        help="tpe (multivariate, multi-objective), motpe, nsga2, qmc, random, or a class name "
                             "of optuna.samplers")
    parser.add_argument("--population", type=int, default=16, help="nsga2: population size")
    args = parser.parse_args(argv)
    make_sampler(args.sampler, 0, False, args.population)  # an unknown name fails now, not at the first call
    proposer = OptunaProposer(args.sampler, args.population)
    fp.log.info("optuna %s, sampler %s", optuna.__version__, args.sampler)
    fp.serve(proposer.propose, args)


if __name__ == "__main__":
    main()
