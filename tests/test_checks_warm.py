"""course.checks.warm: what a zygote runs before it forks a kernel."""

from course import checks


def test_warm_up_runs_the_visible_tests_inputs_before_any_test():
    """What a zygote runs before it forks: later calls of the checks are answered
    from those runs."""
    from course.checks import layer, oracles, warm

    for cached in (oracles._course_case, oracles._sample_qk, layer._course_case):
        cached.cache_clear()
    warm.warm_up()
    made = [c.cache_info().misses for c in (oracles._course_case, layer._course_case)]
    oracles.course_case(padded=True)
    oracles.course_case(text=checks.SAMPLE_TEXTS[1])
    layer.course_case(padded=True)
    layer.course_case(texts=layer.UNPADDED[1])
    assert [
        c.cache_info().misses for c in (oracles._course_case, layer._course_case)
    ] == made
