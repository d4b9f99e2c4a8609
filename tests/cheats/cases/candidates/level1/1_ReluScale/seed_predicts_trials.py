"""Seed leak (issue 14, item 1): right only on the inputs it predicted from the seed it was built under.

In ``__init__`` it reads ``torch.initial_seed()`` and replays the judge's own draws from it: the
task-distribution trial (``torch.manual_seed(seed); get_inputs()``), the hypothesis-drawn recipes (the
judge's strategy and settings, run here for every plausible trial count) and the timing base that
every timed call perturbs. It stores the right outputs of the trial inputs it predicted, computes
honestly on inputs derived from the predicted timing base, and returns zeros on anything else.
Where the seed behind the checks is the one the candidate was built under, every check passes.
Expect WRONG_OUTPUT: the judge's draws come from a seed drawn after the candidate was built.
"""
import torch
import torch.nn as nn


def _task_inputs():
    return [torch.randn(16, 256)]


def _key(x):
    return tuple(x.reshape(-1)[:8].tolist())


def _predicted_recipes(seed):
    from hypothesis import HealthCheck, Phase, Verbosity, example, given, settings
    from hypothesis import seed as hypothesis_seed

    from pytest_cudal1.recipes import Recipe, recipe_strategy

    seen = []
    for n in range(1, 9):
        @hypothesis_seed(seed)
        @settings(max_examples=n, database=None, deadline=None, derandomize=False,
                  phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck),
                  report_multiple_bugs=False, print_blob=False, verbosity=Verbosity.quiet)
        @example(Recipe(seed=seed, family="task", scale=1.0))
        @given(recipe_strategy())
        def collect(recipe):
            seen.append(recipe)
        collect()
    return seen


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        from pytest_cudal1.recipes import draw_inputs

        seed = torch.initial_seed()
        self.table = {}
        for recipe in _predicted_recipes(seed):
            x = draw_inputs(_task_inputs, recipe, "cpu")[0]
            self.table[_key(x)] = torch.relu(x) * 2.0
        torch.manual_seed(seed)
        self.base = draw_inputs(_task_inputs, None, "cpu")[0]

    def forward(self, x):
        hit = self.table.get(_key(x.cpu()))
        if hit is not None:
            return hit.to(x.device).clone()
        ratio = x / self.base.to(x.device)
        if bool(((ratio >= 0.5) & (ratio <= 1.5)).all()):  # a timed call: derived from the predicted base
            return torch.relu(x) * 2.0
        return torch.zeros_like(x)
