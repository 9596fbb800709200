"""Current generation: how a call's root name is resolved through scopes."""

from __future__ import annotations

from tests.allowlist.scanning import accessor, current

DP = "get_data_parallel_group"
IMPORT = "from megatron.core import parallel_state as ps"


def test_later_import_does_not_hide_an_earlier_one() -> None:
    source = """
        def f():
            from megatron.core import parallel_state as ps
            ps.get_data_parallel_group()
            import os as ps
    """
    assert current(source) == [accessor("f", DP)]


def test_call_after_a_later_import_of_another_module_is_not_a_read() -> None:
    source = """
        from megatron.core import parallel_state as ps
        ps.get_data_parallel_group()
        import os as ps
        ps.get_data_parallel_rank()
    """
    assert current(source) == [accessor("<module>", DP)]


def test_non_import_binding_does_not_hide_an_earlier_import() -> None:
    source = """
        def f():
            from megatron.core import parallel_state as ps
            ps = None
            ps.get_data_parallel_group()
    """
    assert current(source) == [accessor("f", DP)]


def test_local_assignment_shadows_the_module_import() -> None:
    source = f"""
        {IMPORT}
        def f():
            ps = make_grid()
            ps.get_data_parallel_group()
        def g(ps):
            ps.get_data_parallel_group()
    """
    assert current(source) == []


def test_import_after_the_call_in_the_same_scope_leaves_a_local_value() -> None:
    # f binds ps, and no import of ps comes before the call: a local value, even though the
    # module imported ps.
    source = f"""
        {IMPORT}
        def f():
            ps.get_data_parallel_group()
            from megatron.core import parallel_state as ps
    """
    assert current(source) == []


def test_module_level_assignment_only_is_a_local_value() -> None:
    source = """
        ps = object()
        ps.get_data_parallel_group()
    """
    assert current(source) == []


def test_nested_function_resolves_from_enclosing_function() -> None:
    source = """
        def outer():
            from megatron.core import parallel_state as ps
            def inner():
                ps.get_data_parallel_group()
            return inner
    """
    assert current(source) == [accessor("outer.inner", DP)]


def test_enclosing_scope_import_counts_wherever_it_is_in_that_scope() -> None:
    source = """
        def outer():
            def inner():
                ps.get_data_parallel_group()
            from megatron.core import parallel_state as ps
            return inner
    """
    assert current(source) == [accessor("outer.inner", DP)]


def test_enclosing_scope_means_its_last_import() -> None:
    source = """
        def last_is_os():
            from megatron.core import parallel_state as ps
            import os as ps
            def inner():
                ps.get_data_parallel_group()
        def last_is_parallel_state():
            import os as ps
            from megatron.core import parallel_state as ps
            def inner():
                ps.get_data_parallel_group()
    """
    assert current(source) == [accessor("last_is_parallel_state.inner", DP)]


def test_innermost_binding_scope_decides() -> None:
    source = f"""
        {IMPORT}
        def outer():
            ps = None
            def inner():
                ps.get_data_parallel_group()
    """
    assert current(source) == []


def test_module_import_reaches_functions_and_methods() -> None:
    source = f"""
        def early():
            ps.get_data_parallel_group()
        class A:
            def method(self):
                ps.get_data_parallel_group()
        {IMPORT}
    """
    assert current(source) == [accessor("A.method", DP), accessor("early", DP)]


def test_class_body_is_its_own_scope_for_its_statements() -> None:
    source = """
        class A:
            from megatron.core import parallel_state as ps
            group = ps.get_data_parallel_group()
    """
    assert current(source) == [accessor("A", DP)]


def test_class_body_does_not_enclose_its_methods() -> None:
    source = """
        class A:
            from megatron.core import parallel_state as ps
            def method(self):
                ps.get_data_parallel_group()
    """
    assert current(source) == []


def test_method_skips_class_binding_and_sees_the_module() -> None:
    source = f"""
        {IMPORT}
        class A:
            ps = None
            def method(self):
                ps.get_data_parallel_group()
        import os as mpu
        class B:
            from megatron.core import mpu
            def method(self):
                mpu.get_data_parallel_group()
    """
    assert current(source) == [accessor("A.method", DP)]


def test_class_body_sees_enclosing_function_last_import() -> None:
    source = """
        def build():
            class Local:
                group = ps.get_data_parallel_group()
            from megatron.core import parallel_state as ps
    """
    assert current(source) == [accessor("build.Local", DP)]


def test_lambda_adds_nothing_to_key_and_its_argument_is_local() -> None:
    source = f"""
        {IMPORT}
        top = lambda: ps.get_data_parallel_group()
        def f():
            getter = lambda: ps.get_data_parallel_rank()
            shadowed = lambda ps: ps.get_data_parallel_group()
    """
    assert current(source) == [accessor("<module>", DP), accessor("f", "get_data_parallel_rank")]


def test_lambda_sees_last_import_of_enclosing_scope() -> None:
    source = """
        def f():
            getter = lambda: ps.get_data_parallel_group()
            from megatron.core import parallel_state as ps
    """
    assert current(source) == [accessor("f", DP)]


def test_comprehension_adds_nothing_to_key_and_its_target_is_local() -> None:
    source = f"""
        {IMPORT}
        def f(items):
            groups = [ps.get_data_parallel_group() for _ in items]
            shadowed = [ps.get_data_parallel_group() for ps in items]
    """
    assert current(source) == [accessor("f", DP)]


def test_list_comprehension_sees_imports_before_it_generator_sees_the_last() -> None:
    source = """
        def f(r):
            eager = [ps.get_data_parallel_group() for _ in r]
            also_eager = {ps.get_data_parallel_group() for _ in r}
            eager_too = {k: ps.get_data_parallel_group() for k in r}
            lazy = list(ps.get_data_parallel_rank() for _ in r)
            from megatron.core import parallel_state as ps
            after = [ps.get_data_parallel_src_rank() for _ in r]
    """
    assert current(source) == [
        accessor("f", "get_data_parallel_rank"),
        accessor("f", "get_data_parallel_src_rank"),
    ]


def test_module_level_list_comprehension_before_the_import() -> None:
    source = """
        eager = [ps.get_data_parallel_group() for _ in range(2)]
        lazy = (ps.get_data_parallel_rank() for _ in range(2))
        from megatron.core import parallel_state as ps
    """
    assert current(source) == [accessor("<module>", "get_data_parallel_rank")]


def test_list_comprehension_in_function_not_binding_the_name_sees_the_module() -> None:
    # The nearest enclosing function does not bind ps, so the module decides, with its
    # last import.
    source = """
        def f(r):
            return [ps.get_data_parallel_group() for _ in r]
        from megatron.core import parallel_state as ps
    """
    assert current(source) == [accessor("f", DP)]


def test_comprehension_in_class_body_does_not_see_class_bindings() -> None:
    source = """
        class A:
            from megatron.core import parallel_state as ps
            groups = [g for g in ps.get_data_parallel_group()]
            ranks = [ps.get_data_parallel_rank() for _ in range(2)]
    """
    # Only the first iterable belongs to the class body.
    assert current(source) == [accessor("A", DP)]


def test_first_iterable_belongs_to_the_enclosing_scope_later_ones_do_not() -> None:
    source = f"""
        {IMPORT}
        def f(r):
            first = [ps for ps in ps.get_data_parallel_group()]
            second = [x for ps in r for x in ps.get_data_parallel_rank()]
            condition = [ps for ps in r if ps.get_data_parallel_src_rank()]
            kept = [x for x in r if ps.get_data_parallel_world_size() > 1]
    """
    assert current(source) == [accessor("f", DP), accessor("f", "get_data_parallel_world_size")]


def test_nested_comprehensions_and_lambdas() -> None:
    source = f"""
        {IMPORT}
        def f(r):
            return [[ps.get_data_parallel_group() for _ in row] for row in r], lambda: [
                (lambda: ps.get_data_parallel_rank())() for _ in r
            ]
    """
    assert current(source) == [accessor("f", DP), accessor("f", "get_data_parallel_rank")]


def test_del_except_match_global_and_nonlocal_bind_nothing() -> None:
    source = f"""
        {IMPORT}
        def deleted():
            del ps
            ps.get_data_parallel_group()
        def caught():
            try:
                pass
            except Exception as ps:
                pass
            ps.get_data_parallel_group()
        def matched(value):
            match value:
                case [ps, *rest]:
                    ps.get_data_parallel_group()
                case {{"k": ps}}:
                    ps.get_data_parallel_group()
        def declared_global():
            global ps
            ps.get_data_parallel_group()
        def outer():
            from megatron.core import parallel_state as ps
            def declared_nonlocal():
                nonlocal ps
                ps.get_data_parallel_group()
    """
    assert current(source) == [
        accessor("caught", DP),
        accessor("declared_global", DP),
        accessor("deleted", DP),
        accessor("matched", DP),
        accessor("matched", DP),
        accessor("outer.declared_nonlocal", DP),
    ]


def test_walrus_binds_outside_comprehensions_only() -> None:
    source = f"""
        {IMPORT}
        def walrus():
            if (ps := make()):
                ps.get_data_parallel_group()
        def walrus_in_comprehension(r):
            [(ps := v) for v in r]
            ps.get_data_parallel_group()
    """
    assert current(source) == [accessor("walrus_in_comprehension", DP)]


def test_walrus_inside_a_lambda_binds_only_in_the_lambda() -> None:
    source = f"""
        {IMPORT}
        def f():
            remember = lambda: (ps := 1)
            ps.get_data_parallel_group()
    """
    assert current(source) == [accessor("f", DP)]


def test_for_with_augmented_annotated_and_tuple_targets_bind() -> None:
    source = f"""
        {IMPORT}
        def for_target(r):
            for ps in r:
                ps.get_data_parallel_group()
        def with_target():
            with open_grid() as ps:
                ps.get_data_parallel_group()
        def augmented():
            ps += 1
            ps.get_data_parallel_group()
        def annotated():
            ps: Grid
            ps.get_data_parallel_group()
        def unpacked():
            a, (b, *ps) = things()
            ps.get_data_parallel_group()
        async def async_for(r):
            async for ps in r:
                ps.get_data_parallel_group()
    """
    assert current(source) == []


def test_attribute_and_subscript_targets_bind_nothing() -> None:
    source = f"""
        {IMPORT}
        def f():
            ps.cache = None
            ps[0] = None
            ps.get_data_parallel_group()
    """
    assert current(source) == [accessor("f", DP)]


def test_def_and_class_names_bind() -> None:
    source = f"""
        {IMPORT}
        def f():
            def ps():
                pass
            ps.get_data_parallel_group()
        def g():
            class ps:
                pass
            ps.get_data_parallel_group()
    """
    assert current(source) == []


def test_import_inside_control_flow_counts_for_its_scope() -> None:
    source = """
        def f(flag):
            if flag:
                from megatron.core import parallel_state as ps
            else:
                try:
                    import os as other
                except ImportError:
                    pass
            ps.get_data_parallel_group()
    """
    assert current(source) == [accessor("f", DP)]


def test_import_in_nested_function_does_not_bind_in_the_outer_one() -> None:
    source = """
        def outer():
            def helper():
                from megatron.core import parallel_state as ps
            ps.get_data_parallel_group()
    """
    assert current(source) == []
