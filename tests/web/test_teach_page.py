#!/usr/bin/env python3
"""The teaching page (fplab serve): its answers against `fplab reduce --json` bit for bit, its
refusals of bad input, and the page itself in headless Chromium (Debian's chromium,
chromium-driver and python3-selenium, installed by scripts/setup): numbers typed, format and
orders switched, the numbers shown compared with fplab reduce, keyboard use, a phone-width
screen, the state restored from the address. Screenshots go to OUT_DIR.

Usage: test_teach_page.py PATH/TO/fplab OUT_DIR
"""
import json
import os
import shutil
import subprocess
import sys
import time
import unittest
import urllib.error
import urllib.request

FPLAB = None
OUT_DIR = None


def reduce_json(*args, stdin=None):
    r = subprocess.run([FPLAB, "reduce", *args, "--json"], input=stdin, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


class Server:
    def __enter__(self):
        self.process = subprocess.Popen([FPLAB, "serve", "--port", "0"], stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        self.url = line.split("open ", 1)[1].split(" ", 1)[0]
        return self

    def __exit__(self, *exc):
        self.process.terminate()
        self.process.wait(timeout=10)

    def post(self, request, raw=None):
        data = raw if raw is not None else json.dumps(request).encode()
        req = urllib.request.Request(self.url + "api/explain", data=data, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def catalogue(self):
        with urllib.request.urlopen(self.url + "api/catalogue", timeout=10) as r:
            return json.loads(r.read())


class Answers(unittest.TestCase):
    """The server's numbers are fplab reduce's, for every order the page offers."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server().__enter__()
        cls.orders = cls.server.catalogue()["orders"]

    @classmethod
    def tearDownClass(cls):
        cls.server.__exit__()

    def test_every_order_format_and_mode_matches_fplab_reduce(self):
        keys = [o["key"] for o in self.orders]
        for fmt, mode in (("fp32", "rne"), ("bf16", "rz"), ("e5m2", "rne"), ("fp16", "sr")):
            for gen in ("cancel:40", "normal:300"):
                status, a = self.server.post({"gen": gen, "seed": 3, "format": fmt, "mode": mode, "orders": keys,
                                              "impl_seed": 5, "runs": 20})
                self.assertEqual(status, 200, a)
                for o in a["orders"]:
                    if "error_message" in o:  # the order cannot run this arithmetic: nor can fplab reduce
                        r = subprocess.run([FPLAB, "reduce", "--schedule", o["schedule"], "--mode", mode, "--format", fmt,
                                            "--gen", gen],
                                           capture_output=True, text=True, timeout=60)
                        self.assertEqual((r.returncode, mode), (2, "sr"), o)
                        continue
                    with self.subTest(order=o["key"], format=fmt, mode=mode, gen=gen):
                        ref = reduce_json("--schedule", o["schedule"], "--format", fmt, "--mode", mode, "--gen", gen,
                                          "--seed", "3", "--impl-seed", "5", *(["--trace"] if gen == "cancel:40" else []))
                        self.assertEqual(o["value_text"], ref["value_text"])
                        self.assertEqual(a["exact_text"], ref["exact_text"])
                        if gen == "cancel:40":
                            self.assertEqual(o["trace"], ref["trace"])
                        else:
                            self.assertNotIn("trace", o)  # past the page's 256 traced terms
                        if o["nondeterministic"]:
                            self.assertEqual(sum(b["count"] for b in o["histogram"]["bins"]), 20)
                            for run in (0, 7):
                                r = reduce_json("--schedule", o["schedule"], "--format", fmt, "--mode", mode, "--gen",
                                                gen, "--seed", "3", "--impl-seed", str(run))
                                self.assertIn(r["value_text"], [b["value_text"] for b in o["histogram"]["bins"]])

    def test_typed_numbers_match_reduce_from_a_file(self):
        numbers = "0.1, 0.2; 0.3\n1e8 -1e8 0x1.8p-3 1e-30"
        status, a = self.server.post({"numbers": numbers, "format": "bf16", "orders": ["seq", "numpy", "warp"]})
        self.assertEqual(status, 200, a)
        lines = numbers.replace(",", " ").replace(";", " ").split()
        for o in a["orders"]:
            ref = reduce_json("--schedule", o["schedule"], "--format", "bf16", "--file", "-", stdin="\n".join(lines))
            self.assertEqual(o["value_text"], ref["value_text"])
        self.assertEqual(a["inputs_rounded"], reduce_json("--schedule", "all:seq", "--format", "bf16", "--file", "-",
                                                          stdin="\n".join(lines))["inputs_rounded"])
        self.assertTrue(a["why"].endswith("."))

    def test_the_why_names_the_step_that_lost_the_most(self):
        status, a = self.server.post({"numbers": "1e8 1 -1e8 1", "orders": ["seq", "pairwise"]})
        self.assertEqual(status, 200)
        self.assertIn("step s1 added 1e+08 and 1", a["why"])
        self.assertIn("vanished", a["why"])
        status, a = self.server.post({"numbers": "1 2 3", "orders": ["seq", "rev"]})
        self.assertIn("exact sum", a["why"])

    def test_bad_input_gets_one_clear_line_quickly(self):
        cases = [({"numbers": "1 nan 2"}, "NaN"), ({"numbers": "1 abc 2"}, "cannot read 'abc'"),
                 ({"numbers": ""}, "no numbers"), ({"numbers": "1", "format": "fp33"}, "fp33"),
                 ({"numbers": "1", "orders": ["nope"]}, "unknown order"), ({"numbers": "1 2", "custom": "all:nope"}, "schedule"),
                 ({"numbers": "1e39"}, "beyond fp32's range"), ({"gen": "normal:200000"}, "at most 100000"),
                 ({"numbers": "1 " * 100001}, "more than 100000")]
        for request, words in cases:
            with self.subTest(request=str(request)[:60]):
                start = time.monotonic()
                status, a = self.server.post(request)
                self.assertEqual(status, 400)
                self.assertIn(words, a["error"])
                self.assertNotIn("\n", a["error"])
                self.assertLess(time.monotonic() - start, 10)
        # A paste of ten million numbers is refused before it is read.
        start = time.monotonic()
        status, a = self.server.post(None, raw=b'{"numbers": "' + b"1 " * 10_000_000 + b'"}')
        self.assertEqual(status, 413)
        self.assertIn("too large", a["error"])
        self.assertLess(time.monotonic() - start, 10)
        status, a = self.server.post(None, raw=b"not json")
        self.assertEqual((status, a["error"]), (400, "the request is not JSON"))

    def test_the_server_refuses_non_loopback_binds_unless_asked(self):
        r = subprocess.run([FPLAB, "serve", "--host", "0.0.0.0"], capture_output=True, text=True, timeout=10)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--allow-remote", r.stderr)
        self.assertEqual(r.stderr.count("\n"), 1)


def browser():
    """Headless Chromium through Debian's chromedriver, or None with the reason."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        return None, "python3-selenium is not installed (scripts/setup installs it)"
    driver_path = shutil.which("chromedriver")
    if not driver_path or not (shutil.which("chromium") or shutil.which("chromium-browser")):
        return None, "chromium and chromium-driver are not installed (scripts/setup installs them)"
    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1200,1600"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(driver_path), options=options), None


class Page(unittest.TestCase):
    """The page in a real browser."""

    @classmethod
    def setUpClass(cls):
        cls.driver, reason = browser()
        if cls.driver is None:
            if os.environ.get("CI"):
                raise RuntimeError(reason)  # CI must run the browser test
            raise unittest.SkipTest(reason)
        cls.server = Server().__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.driver.quit()
        cls.server.__exit__()

    def wait_for(self, condition, timeout=20):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                value = condition()
                if value:
                    return value
            except Exception:  # the page is between two renders
                pass
            time.sleep(0.1)
        self.fail("the page did not get there in %d s: %s" % (timeout, self.driver.find_element("id", "status").text))

    def shown(self):
        rows = self.driver.find_elements("css selector", "#results tbody tr[data-order]")
        return {r.get_attribute("data-order"): r.find_element("css selector", "td.value").text for r in rows}

    def test_type_switch_and_compare_with_fplab_reduce(self):
        d = self.driver
        d.get(self.server.url)
        self.wait_for(lambda: self.shown().get("seq"))
        box = d.find_element("id", "numbers")
        box.clear()
        numbers = "0.1 0.2 0.3 1e8 -1e8 3.25 1e-3"
        box.send_keys(numbers)
        from selenium.webdriver.support.ui import Select
        Select(d.find_element("id", "format")).select_by_value("bf16")
        d.find_element("id", "order-atomic").click()  # on (seq, rev, pairwise and numpy are on at first)
        d.find_element("id", "order-rev").click()  # off
        expected = {}
        for key, schedule in (("seq", "all:seq"), ("pairwise", "all:tree"), ("numpy", "numpy"), ("atomic", "all:atomic")):
            expected[key] = reduce_json("--schedule", schedule, "--format", "bf16", "--file", "-",
                                        stdin="\n".join(numbers.split()))["value_text"]
        self.wait_for(lambda: self.shown() == expected)
        self.assertIn("format=bf16", d.current_url)
        self.assertIn("numpy", d.current_url)
        why = d.find_element("id", "why").text
        self.assertTrue(why.endswith("."), why)
        # The histogram of the atomic order, and the slider picking another run.
        self.wait_for(lambda: d.find_element("id", "histogram").text.count("runs") >= 1)
        # Keyboard: Tab to a node of the tree and press Enter: its exact result is spelled out.
        from selenium.webdriver.common.keys import Keys
        node = d.find_elements("css selector", "#tree .node.step")[0]
        d.execute_script("arguments[0].focus()", node)
        d.switch_to.active_element.send_keys(Keys.ENTER)
        detail = self.wait_for(lambda: d.find_element("id", "step-detail").text)
        self.assertIn("exact", detail)
        self.assertIn("rounded", detail)
        d.save_screenshot(os.path.join(OUT_DIR, "teach_page.png"))
        # Every control has a label a screen reader reads.
        for control in d.find_elements("css selector", "input, select, textarea"):
            cid = control.get_attribute("id")
            self.assertTrue(d.find_elements("css selector", f"label[for='{cid}']"), cid)
        # The address restores the state in a fresh page.
        url = d.current_url
        d.get("about:blank")
        d.get(url)
        self.wait_for(lambda: self.shown() == expected)
        self.assertEqual(Select(d.find_element("id", "format")).first_selected_option.get_attribute("value"), "bf16")

    def test_generators_tensor_core_and_a_clear_error(self):
        d = self.driver
        d.get(self.server.url + "#gen=big-and-ones&count=24&seed=1&format=fp32&orders=seq,pairwise,tensor&tree=tensor")
        self.wait_for(lambda: self.shown().get("tensor"))
        for key, schedule in (("seq", "all:seq"), ("pairwise", "all:tree"), ("tensor", "tc-h100-tf32-rne")):
            terms = d.find_element("id", "numbers").get_attribute("value").split()
            ref = reduce_json("--schedule", schedule, "--format", "fp32", "--file", "-", stdin="\n".join(terms))
            self.assertEqual(self.shown()[key], ref["value_text"])
        self.assertEqual(len(terms), 24)
        self.assertEqual(self.shown()["seq"], "16777216")  # every 1 lost, left to right
        nodes = d.find_elements("css selector", "#tree .node.step")
        shape = nodes[0].find_element("css selector", "rect, circle")
        d.execute_script("arguments[0].scrollIntoView({block: 'center', inline: 'center'})", shape)
        shape.click()  # a mouse on the node
        self.assertIn("grid 2^", d.find_element("id", "step-detail").text)
        box = d.find_element("id", "numbers")
        box.clear()
        box.send_keys("1 2 x3")
        self.wait_for(lambda: "cannot read 'x3'" in d.find_element("id", "status").text)

    def test_phone_width(self):
        d = self.driver
        d.set_window_size(390, 844)
        try:
            d.get(self.server.url + "#numbers=1e8+1+-1e8+1&format=fp32&orders=seq,rev,pairwise,numpy,warp,atomic")
            self.wait_for(lambda: self.shown().get("warp"))
            overflow = d.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
            self.assertLessEqual(overflow, 0, "the page is wider than a phone's screen")
            d.save_screenshot(os.path.join(OUT_DIR, "teach_page_phone.png"))
        finally:
            d.set_window_size(1200, 1600)


if __name__ == "__main__":
    FPLAB = os.path.abspath(sys.argv.pop(1))
    OUT_DIR = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=1)
