"""Fused groups: a stack of a shape found valid before still has its groups checked."""

from __future__ import annotations

from typing import Any

import pytest

from deerflow_ext.extensions.composition.isolation import IsolatedMiddleware
from deerflow_ext.extensions.composition.ordering import OrderingError, assert_ordering
from deerflow_ext.extensions.composition.wrap_fusion import check_fused_groups, fuse_wrap_only_runs
from deerflow_extension_api import Placement
from extensions.test_ordering import ModelWrap, host_stack, placed


def _standard_group() -> list[Any]:
    """The lead stack with two STANDARD model wrappers fused into one group, as composed."""
    stack = host_stack()
    stack[-1:-1] = [placed(ModelWrap(), Placement.STANDARD), placed(ModelWrap(), Placement.STANDARD)]
    return fuse_wrap_only_runs(stack)


def test_a_shape_found_valid_still_has_its_fused_groups_checked() -> None:
    valid = _standard_group()  # a valid stack of this shape
    assert_ordering(valid)
    check_fused_groups(valid)
    stack = _standard_group()
    head = next(mw for mw in stack if isinstance(mw, IsolatedMiddleware) and mw.fused_group)
    at = stack.index(head)
    other = _standard_group()  # a member of another construction's group, same class, same place
    stack[at + 1] = other[at + 1]
    assert_ordering(stack)  # the placements still hold: the broken group is fusion's to find
    with pytest.raises(OrderingError, match="do not follow it in order"):
        check_fused_groups(stack)
