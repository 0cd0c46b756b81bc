#!/usr/bin/env python3
"""Unit tests of compare_table.py's medians and ratios: python3 scripts/test_compare_table.py"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_table as ct  # noqa: E402


class MedianAndRatios(unittest.TestCase):
    def test_median(self):
        self.assertEqual(ct.median([3.0]), 3.0)
        self.assertEqual(ct.median([5.0, 1.0, 3.0]), 3.0)
        self.assertEqual(ct.median([4.0, 1.0, 3.0, 2.0]), 2.5)
        with self.assertRaises(ValueError):
            ct.median([])

    def test_speed_ratio_uses_medians(self):
        py = {"us_per_op": 30.0, "p50_us": 20.0}
        rs = {"us_per_op": 12.0, "median_us": 10.0}
        self.assertAlmostEqual(ct.speed_ratio(py, rs), 2.0)
        # lines without medians fall back to the means
        self.assertAlmostEqual(ct.speed_ratio({"us_per_op": 30.0}, {"us_per_op": 10.0}), 3.0)

    def test_floor_ratio(self):
        self.assertAlmostEqual(ct.floor_ratio({"us_per_op": 9.0, "median_us": 5.0, "floor_us": 4.0}), 1.25)
        self.assertIsNone(ct.floor_ratio({"us_per_op": 9.0}))

    def test_targets_cover_every_op(self):
        ops = [op for op, *_ in ct.OPS]
        self.assertEqual(len(ops), len(set(ops)))
        for op, _, targets, _ in ct.OPS:
            self.assertEqual(len(targets), len(ct.SAVERS), op)
            for t in targets:
                self.assertTrue(t is None or t > 0, op)

    def test_redis_issue_targets(self):
        redis = {op: targets[ct.SAVERS.index("redis")] for op, _, targets, _ in ct.OPS}
        self.assertEqual((redis["put"], redis["get_tuple_latest"], redis["list_limit10"]), (3, 3, 3))


if __name__ == "__main__":
    unittest.main()
