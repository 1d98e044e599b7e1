"""frontier-optuna-proposer: serves the Proposer API with an Optuna sampler.

Stateless: every Propose rebuilds an in-memory study from the outcomes the
coordinator tells (each dimension a distribution over its choice indices:
categorical, or an int range when ordinal), asks the sampler for the
configurations wanted, and answers them. Constraints go through the
sampler's constraints function where it has one (tpe, motpe, nsga2).
The sampler is checked against the space and its objectives before it is
used: at start with --space (a single-objective sampler on a multi-objective
space refuses to start, naming both), else at the first call of each
experiment, which then answers with the reason as its error (the coordinator
pauses the search with it) instead of failing every call. docs/proposers.md.
"""

import math
import random
import sys
import threading
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


def check_sampler(name, population, dists, objectives, has_constraints):
    """None when sampler `name` can search `dists` for `objectives` ([(metric, maximize)]), else why not: a dry
    run of a dozen made-up trials, the way every call uses it."""
    def dry_run(goals):  # as propose does: told trials added to a new study, then asked
        sampler = make_sampler(name, 0, has_constraints, population)
        optuna.logging.set_verbosity(optuna.logging.ERROR)
        study = optuna.create_study(directions=["maximize" if m else "minimize" for _, m in goals], sampler=sampler)
        sizes = [len(d.choices) if isinstance(d, CategoricalDistribution) else d.high + 1 for d in dists.values()]
        for i in range(12):
            params = {n: (i * 7 + k) % size for k, (n, size) in enumerate(zip(dists, sizes))}
            attrs = {_CONSTRAINTS_KEY: (float(i % 3 - 1),)} if has_constraints else {}
            study.add_trial(create_trial(state=TrialState.COMPLETE, params=params, distributions=dists,
                                         values=[float(i * (k + 1) % 5) for k in range(len(goals))],
                                         system_attrs=attrs))
        for _ in range(2):
            study.tell(study.ask(dists), state=TrialState.FAIL)
    names = ", ".join(m for m, _ in objectives)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dry_run(objectives)
        return None
    except SystemExit as e:
        return str(e)
    except Exception as e:
        single = False
        if len(objectives) > 1:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    dry_run(objectives[:1])
                single = True
            except Exception:
                pass
        if single:
            return f"sampler {name} is single-objective: it cannot search the {len(objectives)} objectives " \
                   f"({names}); use tpe, motpe, nsga2 or random"
        return f"sampler {name} cannot search this space ({len(objectives)} objective(s): {names}): " \
               f"{type(e).__name__}: {str(e)[:300]}"


def space_of_file(path):
    """(distributions, objectives, has_constraints) of a search-space file (docs/search-space.md), read as far
    as the check needs: its `space` and `objectives`; SystemExit naming what is wrong."""
    import yaml
    try:
        with open(path) as f:
            doc = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        raise SystemExit(f"--space {path}: {getattr(e, 'strerror', None) or e}")
    if not isinstance(doc, dict) or not isinstance(doc.get("objectives"), list) or not doc["objectives"]:
        raise SystemExit(f"--space {path}: no objectives (a search-space file, docs/search-space.md)")
    dims = doc.get("space") or {}
    if not isinstance(dims, dict) or not all(isinstance(c, list) and c for c in dims.values()):
        raise SystemExit(f"--space {path}: 'space' must map each dimension to a list of choices")
    objectives = []
    for o in doc["objectives"]:
        metric = o.get("metric") if isinstance(o, dict) else None
        if not isinstance(metric, str):
            raise SystemExit(f"--space {path}: every objective needs a metric")
        objectives.append((metric, o.get("goal", "maximize") != "minimize"))
    numbers = lambda c: all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in c)  # noqa: E731
    space = type("FileSpace", (), {})()
    space.names, space.choices = list(dims), list(dims.values())
    space.ordinal = [numbers(c) for c in space.choices]
    return distributions(space), objectives, bool(doc.get("constraints"))


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
        self._checked = {}  # (dimensions, objectives, constrained) -> why the sampler cannot search them, or None
        self._lock = threading.Lock()

    def problem(self, space, dists):
        """Why the sampler cannot search this request's space and objectives (None: it can), checked once."""
        key = (tuple(space.names), tuple(map(str, dists.values())), tuple(space.objectives), bool(space.constraints))
        with self._lock:
            if key not in self._checked:
                self._checked[key] = check_sampler(self.sampler_name, self.population, dists, space.objectives,
                                                   bool(space.constraints))
            return self._checked[key]

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

    def propose(self, request, context=None):
        space = fp.Space(request)
        dists = distributions(space)
        response = fp.proposer_pb2.ProposeResponse(proposer=f"optuna:{self.sampler_name}")
        problem = self.problem(space, dists)
        if problem:
            response.error = problem
            return response
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
    parser.add_argument("--space", default="",
                        help="the experiment's search-space file: the sampler is checked against its dimensions and "
                             "objectives at start (without it, at each experiment's first call)")
    args = parser.parse_args(argv)
    try:
        make_sampler(args.sampler, 0, False, args.population)  # an unknown name fails now, not at the first call
    except ValueError as e:  # e.g. Optuna's NSGA-II wants a population of at least 2
        parser.error(f"--sampler {args.sampler} --population {args.population}: {e}")
    proposer = OptunaProposer(args.sampler, args.population)
    if args.space:
        dists, objectives, constrained = space_of_file(args.space)
        problem = check_sampler(args.sampler, args.population, dists, objectives, constrained)
        if problem:
            print(f"frontier-optuna-proposer: --space {args.space}: {problem}", file=sys.stderr)
            return 2
    else:
        fp.log.info("no --space: sampler %s is checked against each experiment at its first call", args.sampler)
    fp.log.info("optuna %s, sampler %s", optuna.__version__, args.sampler)
    fp.serve(proposer.propose, args)


if __name__ == "__main__":
    sys.exit(main())
