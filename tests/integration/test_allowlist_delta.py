"""``regenerate_by_file`` must equal the domain's ``regenerate`` on any input."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from stackbot.domain.allowlist import (
    Allowlist,
    Generation,
    ScanOutcome,
    TreeScan,
    detect_generation,
    regenerate,
)
from stackbot.services.allowlist_delta import regenerate_by_file

FILES = [f"megatron/core/m{n}.py" for n in range(4)]
DETAILS = [
    "parallel_state.get_tensor_model_parallel_group",
    "parallel_state.get_data_parallel_rank",
]


def entries(generation: Generation) -> st.SearchStrategy[list[str]]:
    keys = (
        st.sampled_from(["3", "7", "12"])
        if generation is Generation.LINE
        else st.sampled_from(["f", "C.g", "<module>"])
    )
    entry = st.builds(lambda k, d: f"{k}:accessor:{d}", keys, st.sampled_from(DETAILS))
    return st.lists(entry, max_size=4)


@st.composite
def cases(draw: st.DrawFn) -> tuple[Allowlist | None, Allowlist | None, TreeScan, Generation]:
    generation = draw(st.sampled_from(list(Generation)))

    def side() -> Allowlist | None:
        if draw(st.booleans()) and draw(st.booleans()):
            return None
        # Now and then a side written by the other checker generation, which is left out.
        written_by = draw(st.sampled_from([generation] * 5 + list(Generation)))
        allowed = {
            f: tuple(sorted(draw(entries(written_by))))
            for f in draw(st.lists(st.sampled_from(FILES), unique=True))
        }
        allowed = {f: e for f, e in allowed.items() if e}
        return Allowlist("c", allowed, draw(st.integers(0, 20)))

    ours, theirs = side(), side()
    outcomes = {}
    for path in FILES:
        if draw(st.integers(0, 5)) == 0:
            outcomes[path] = ScanOutcome(error="line 1: invalid syntax")
            continue
        # Often exactly what a side lists, so the shortcut is taken.
        some_side = ours or theirs
        listed = some_side.allowed.get(path, ()) if some_side and draw(st.booleans()) else ()
        found = sorted(listed) if listed else sorted(draw(entries(generation)))
        if generation is Generation.LINE:
            found = sorted(set(found))
        outcomes[path] = ScanOutcome(tuple(found), tuple(range(1, len(found) + 1)))
    return ours, theirs, TreeScan(generation, outcomes, len(outcomes), 0), generation


@settings(max_examples=400, deadline=None)
@given(cases())
def test_same_value_as_the_domain(
    case: tuple[Allowlist | None, Allowlist | None, TreeScan, Generation],
) -> None:
    ours, theirs, tree, generation = case
    expected = regenerate(ours=ours, theirs=theirs, tree=tree, generation=generation, comment="c")
    actual = regenerate_by_file(
        ours=ours, theirs=theirs, tree=tree, generation=generation, comment="c"
    )
    assert actual == expected
    if all(detect_generation(s, generation) is generation for s in (ours, theirs) if s is not None):
        trusted = regenerate_by_file(
            ours=ours,
            theirs=theirs,
            tree=tree,
            generation=generation,
            comment="c",
            sides_checked=True,
        )
        assert trusted == expected
