"""A stand-in for the `expecttest` package (not in Debian), which torch's common_utils imports. torch's generic
distributed suite only needs the TestCase base class; assertExpectedInline is given the plain comparison."""
import unittest

ACCEPT = False  # the real package's "rewrite the expected text in the source" switch; never set here


class TestCase(unittest.TestCase):
    def assertExpectedInline(self, actual, expect, skip=0):  # noqa: N802 (the real package's name)
        self.assertEqual(str(actual).strip(), str(expect).strip())
