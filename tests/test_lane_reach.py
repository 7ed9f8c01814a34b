"""hawk/ir/reach.py: what a sharded run reads off a kernel (how far `.at` reads reach along the leading axis,
whether the leading coordinate is read), including the adjoint's `own` key of a row result's cotangent, which a
shard may give its own row numbers (docs/distributed.md, "Gradients through row results")."""

import re

import hawk
import hawk.math as hm
from hawk import Grid, Mutable, Param, Scalar

W = 4


@hawk.kernel
def reach_halo(lane: Grid["row", "col":W], u: Scalar, v: Scalar) -> Scalar:
    return u.at(row=lane.row - 2, col=lane.col) + v.at(row=lane.row + 1, col=lane.col + 1)


@hawk.kernel
def reach_coord(lane: Grid["row", "col":W], x: Scalar) -> Scalar:
    return x * lane.row


@hawk.kernel
def reach_rows(lane: Grid["row", "col":W], x: Scalar, w: Param) -> Scalar:
    return hawk.sum(x * w, over="col", policy="ordered")


@hawk.kernel
def reach_rows_total(lane: Grid["row", "col":W], x: Scalar, s: Mutable[Scalar], tot: Mutable[Scalar],
                     z: Mutable[Scalar]):
    s = hawk.sum(x, over="col")
    tot = hawk.sum(x, policy="ordered")
    z = x - tot  # (tot read below its reduction: its cotangent meets the lanes' at the run's first lane)


@hawk.kernel
def reach_clamped(lane: Grid["row", "col":W], u: Scalar, v: Scalar, w: Scalar) -> Scalar:
    up = u.at(row=hm.clamp(lane.row - 2, 0, lane.extent("row") - 1))  # the read docs/semantics.md writes
    down = v.at(row=hm.min(lane.row + 1, lane.extent("row") - 1), col=hm.max(lane.col - 1, 0))
    return up + down + w.at(row=hm.max(0, hm.min(lane.row + 3, lane.extent("row") - 1)))


@hawk.kernel
def reach_clamped_elsewhere(lane: Grid["row", "col":W], u: Scalar, v: Scalar, w: Scalar) -> Scalar:
    a = u.at(row=hm.clamp(lane.row + 1, 0, 7))  # the last row of some grid, not of every run
    b = v.at(row=hm.clamp(lane.row + 1, 0, lane.extent("row") - 2))  # short of the edge
    return a + b + w.at(row=hm.max(lane.row - 1, 1))  # (likewise)


def _adjoint(kernel, wrt):
    import eagle
    from eagle.reverse import adjoint_for

    return adjoint_for(eagle.deploy(kernel), wrt, (6, W))[0].kernel


def test_neighbour_reads_reach_their_offsets_and_coordinates_count():
    assert reach_halo.lane_reach() == ({"u": 2, "v": 1}, True)
    assert reach_coord.lane_reach() == ({}, True)
    assert reach_rows.lane_reach() == ({}, False)


def test_the_adjoint_of_a_row_sum_keys_its_cotangent_by_own_rows():
    """The row result's cotangent is read at the lane's row through a `hawk.lane` marked `own`, which reach does
    not count: the adjoint runs with a shard's own lane numbers. Unmarked, the same read would count."""
    adj = _adjoint(reach_rows, ("x", "w"))
    text = adj.hawk_ir()
    assert re.search(r'"hawk.lane"\(\) \{axis = "row", own\}', text), text
    assert adj.lane_reach() == ({}, False)
    from hawk.ir.reach import lane_reach

    plain = text.replace('axis = "row", own}', 'axis = "row"}')
    assert lane_reach(plain, "row", frozenset({"x"}))[1] is True


def test_a_total_read_in_the_body_keeps_whole_run_lane_numbers_in_the_adjoint():
    """Its cotangent meets the lanes' shares at the whole run's first lane (unmarked coordinates)."""
    assert _adjoint(reach_rows_total, ("x",)).lane_reach()[1] is True


def test_reads_clamped_to_the_grid_reach_their_offsets():
    """A neighbour row clamped to the grid (`m.clamp`, `m.min`, `m.max` with 0 or `lane.extent("row") - 1`, nested
    either way) is the read past the edge the host clamps anyway: it reaches its offset. Other bounds can reach
    rows that are not the lane's own plus a constant."""
    assert reach_clamped.lane_reach() == ({"u": 2, "v": 1, "w": 3}, True)
    assert reach_clamped_elsewhere.lane_reach() == ({"u": None, "v": None, "w": None}, True)
