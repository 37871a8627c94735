"""Errors are fplab.Error (a ValueError) with one line that names the problem."""

import unittest

import numpy as np

import fplab


class Errors(unittest.TestCase):
    def message(self, call):
        with self.assertRaises(fplab.Error) as caught:
            call()
        text = str(caught.exception)
        self.assertIsInstance(caught.exception, ValueError)
        self.assertNotIn("\n", text)
        self.assertFalse(text.startswith("fplab: error"), text)
        return text

    def test_bad_format_and_mode(self):
        self.assertIn("unknown format 'fp33'", self.message(lambda: fplab.round(1.0, "fp33")))
        self.assertIn("'fp33'", self.message(lambda: fplab.reduce([1.0], "seq", "fp33")))
        self.assertIn("'xx'", self.message(lambda: fplab.round(1.0, "fp32", "xx")))
        self.assertIn("'fma'", self.message(lambda: fplab.dot([1.0], [1.0], "seq", products="fma")))

    def test_bad_schedule(self):
        text = self.message(lambda: fplab.Schedule("contig(4):sqe"))
        self.assertIn("unknown reducer 'sqe'", text)
        self.assertIn("position 11", text)  # docs/schedules.md's example
        self.assertIn("'sqe'", self.message(lambda: fplab.reduce([1.0], "contig(4):sqe")))

    def test_unknown_profile_lists_the_known_ones(self):
        text = self.message(lambda: fplab.profile("no-such-gpu"))
        self.assertIn("'no-such-gpu'", text)
        self.assertIn("h100", text)
        self.assertIn("no-such-file.toml", self.message(lambda: fplab.profile("/no-such-file.toml")))

    def test_control_characters_stay_on_one_line(self):
        text = self.message(lambda: fplab.Schedule("seq\nrm -rf /"))
        self.assertIn("\\n", text)

    def test_arrays_of_the_wrong_kind(self):
        self.assertIn("one-dimensional", self.message(lambda: fplab.reduce(np.ones((2, 2)), "seq")))
        self.assertIn("array of numbers", self.message(lambda: fplab.reduce("abc", "seq")))


if __name__ == "__main__":
    unittest.main()
