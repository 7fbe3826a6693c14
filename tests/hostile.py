"""Hostile strings for the property-based tests (hypothesis).

They mix script tags, Redis key syntax (``: * ? [ ] { }``, spaces, line breaks),
control characters, NUL, lone surrogates, far-away Unicode and very long runs. The
sampled set keeps the known-bad cases in every run; examples are few, so the suite
stays fast.
"""

from collections.abc import Callable

from hypothesis import HealthCheck, example, settings
from hypothesis import strategies as st

SCRIPT = "<script>alert('x')</script>"
# Escaped HTML never holds this; a page that does shows user text unescaped.
UNESCAPED = "<script>alert("
SURROGATE = "\ud800"
DANGEROUS = [
    *":*?[]{}\\ \n\r\t\x00\x01\x1b\x7f\u200b\u2028\ufeff<>&\"'",
    *"\u00e9\u0301\u5f20\U0001f98aaZ0",
]
SAMPLES = ["", " ", "x" * 201, "y" * 100_000, "\x00", "a:b", "{tag}", "*", "e\u0301", SCRIPT]


def hostile_text(*, surrogates: bool = True) -> st.SearchStrategy[str]:
    """Hostile strings; ``surrogates=False`` for what can travel as UTF-8 (HTTP)."""
    alphabet = [*DANGEROUS, SURROGATE] if surrogates else DANGEROUS
    return st.one_of(
        st.text(st.sampled_from(alphabet), max_size=24),
        st.text(max_size=24),
        st.builds(lambda a, b: a + SCRIPT + b, st.text(max_size=4), st.text(max_size=4)),
        st.sampled_from([*SAMPLES, SURROGATE] if surrogates else SAMPLES),
    )


def few(examples: int = 20):
    """Hypothesis settings of these tests: few examples, no deadline, fixtures shared."""
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )


def always(argument: str, values: list[str], **others: str) -> Callable:
    """Run every one of ``values`` as ``argument`` (the test's other arguments: ``others``)
    on every run, not only when drawn."""

    def decorate(test: Callable) -> Callable:
        for value in reversed(values):
            test = example(**{argument: value}, **others)(test)
        return test

    return decorate
