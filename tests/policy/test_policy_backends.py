"""The built-in backend behind the generation interface: n completions, parsed like a model's, building on exemplars."""

from __future__ import annotations

from kernelbench.loaders import load_tasks
from policy.backends import (BuiltinBackend, Completion, GenerationBackend, GenerationRequest, SamplingSettings,
                             make_backend)
from policy.builtin import Rewrite, first_round, render, steps_of
from policy.parser import extract_code

CONV = {t.name: t for t in load_tasks(None)[0]}["2_Conv2d_ReLU_Add"]


def request(n: int, exemplars: tuple[str, ...] = ()) -> GenerationRequest:
    return GenerationRequest(task=CONV, prompt="(unused by the built-in backend)", prompt_sha256="0" * 64, n=n,
                             exemplar_codes=exemplars)


def steps(completion: Completion) -> tuple[str, ...] | None:
    code = extract_code(completion.text)
    assert isinstance(code, str), code
    return steps_of(code)


def test_first_round_answers_are_distinct_single_steps_parsed_like_model_answers() -> None:
    backend: GenerationBackend = BuiltinBackend()
    (answers,) = backend.generate([request(3)], SamplingSettings(seed=4))
    assert len(answers) == 3 and all(a.finish_reason == "stop" and a.error is None for a in answers)
    got = [steps(a) for a in answers]
    assert len(set(got)) == 3 and all(Rewrite(s) in first_round(CONV) for s in got)
    assert extract_code(answers[0].text) == render(CONV, Rewrite(got[0]))
    assert backend.generate([request(3)], SamplingSettings(seed=4)) == [answers]  # the seed decides
    # torch.compile's default always comes first, whatever the seed: with a small budget it is the one judged.
    assert {steps(BuiltinBackend().generate([request(1)], SamplingSettings(seed=s))[0][0]) for s in range(8)} == \
        {("compile_default",)}


def test_later_rounds_combine_the_exemplars_steps_first() -> None:
    best = (render(CONV, Rewrite(("channels_last",))), render(CONV, Rewrite(("compile_default",))))
    (answers,) = BuiltinBackend().generate([request(2, best)], SamplingSettings(seed=0))
    assert steps(answers[0]) == ("channels_last", "compile_default")
    assert steps(answers[1]) not in {("channels_last",), ("compile_default",)}  # nothing shown is proposed again


def test_more_completions_than_rewrites_are_left_empty_as_exhausted_not_failed() -> None:
    (answers,) = BuiltinBackend().generate([request(20)], SamplingSettings(seed=0))
    assert len(answers) == 20
    empty = [a for a in answers if a.finish_reason == "exhausted"]
    assert empty and all(a.error is None and a.text == "" for a in empty)
    assert len(answers) - len(empty) == len(first_round(CONV))


def test_steps_named_in_the_spec_are_the_only_ones_proposed_or_combined() -> None:
    """``builtin?steps=compile_default,cuda_graph``: the baselines a report needs, without max-autotune's long
    compile; the combination of the two comes once both are exemplars."""
    backend = make_backend("builtin?steps=compile_default,cuda_graph")
    (first,) = backend.generate([request(20)], SamplingSettings(seed=0))
    assert [steps(a) for a in first if a.finish_reason == "stop"] == [("compile_default",), ("cuda_graph",)]
    shown = tuple(render(CONV, Rewrite(s)) for s in (("cuda_graph",), ("channels_last",), ("compile_default",)))
    (later,) = backend.generate([request(20, shown)], SamplingSettings(seed=0))
    assert [steps(a) for a in later if a.finish_reason == "stop"] == [("compile_default", "cuda_graph")]
