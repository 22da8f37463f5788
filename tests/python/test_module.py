"""The Python module against the CLI on the public fixtures: same answers, same encodings, same
error messages. CTest runs it (tests/CMakeLists.txt) with PYTHONPATH at the built module and
STAVE_CLI, STAVE_FIXTURES in the environment."""

import json
import os
import subprocess
import threading
import time
import unittest

import stave

CLI = os.environ.get("STAVE_CLI", "")
FIXTURES = os.environ.get("STAVE_FIXTURES", "")
MODEL = os.path.join(FIXTURES, "public", "model-mxfp4")
CASES = os.path.join(FIXTURES, "public", "cases")
REQUIRE = os.environ.get("STAVE_REQUIRE_FIXTURES", "0") not in ("", "0")


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def cli(*args, stdin=None):
    """Runs the stave CLI; returns (exit status, parsed stdout)."""
    p = subprocess.run([CLI, *args], input=stdin, capture_output=True, text=True)
    return p.returncode, (json.loads(p.stdout) if p.stdout.strip() else None)


def ordered(value):
    """The JSON text with key order kept: equal dicts whose keys come in another order differ."""
    return json.dumps(value, ensure_ascii=False)


class ModuleMatchesCli(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.isdir(MODEL):
            if REQUIRE:
                raise AssertionError("missing fixtures: " + MODEL)
            raise unittest.SkipTest("fixtures not found (%s)" % MODEL)
        cls.exact = stave.load(MODEL, precision="exact", threads=1)
        cls.fast = stave.load(MODEL, device="cpu", precision="fast", threads=1)

    def case(self, name):
        return os.path.join(CASES, name, "request.json")

    def test_systemone_equals_cli_and_reference(self):
        # exact: also the release code's own answer, recorded in the fixture; fast: the CLI's
        for name, precision in (("000-docs-example", "exact"), ("017-image-one", "exact"),
                                ("001-card-example", "fast"), ("004-unicode-state", "fast")):
            with self.subTest(case=name, precision=precision):
                clef = self.exact if precision == "exact" else self.fast
                answer = clef.systemone(read_json(self.case(name)))
                rc, printed = cli("decide", "--model", MODEL, "--precision", precision, "--threads", "1",
                                  self.case(name))
                self.assertEqual(rc, 0)
                self.assertEqual(ordered(answer), ordered(printed))
                if precision == "exact":
                    expected = read_json(os.path.join(CASES, name, "expected-mxfp4.json"))["response"]
                    self.assertEqual(ordered(answer), ordered(expected))

    def test_fast_and_options_equal_cli(self):
        path = self.case("000-docs-example")
        answer = self.fast.systemone(read_json(path), confidence="jev", logits=True, max_length=512)
        rc, printed = cli("decide", "--model", MODEL, "--threads", "1", "--confidence", "jev", "--logits",
                          "--max-length", "512", path)
        self.assertEqual(rc, 0)
        self.assertEqual(ordered(answer), ordered(printed))
        self.assertIn("logits", answer)

    def test_json_text_request(self):
        path = self.case("001-card-example")
        with open(path, encoding="utf-8") as f:
            text = f.read()
        self.assertEqual(ordered(self.exact.systemone(text)), ordered(self.exact.systemone(read_json(path))))

    def test_decide_batch_equals_one_by_one(self):
        requests = [read_json(self.case(n)) for n in ("000-docs-example", "002-json-state-sorted-keys", "000-docs-example")]
        batch = self.exact.decide_batch(requests)
        self.assertEqual(len(batch), 3)
        for request, answer in zip(requests, batch):
            self.assertEqual(ordered(answer), ordered(self.exact.systemone(request)))

    def test_encode_equals_cli(self):
        for name in ("015-long-state-truncated", "018-image-two"):
            with self.subTest(case=name):
                rc, printed = cli("encode", "--model", MODEL, "--max-length", "2048", self.case(name))
                self.assertEqual(rc, 0)
                self.assertEqual(ordered(self.exact.encode(read_json(self.case(name)), max_length=2048)), ordered(printed))

    def test_request_errors_carry_the_cli_messages(self):
        for name in ("019-err-missing-state", "021-err-bad-type"):
            with self.subTest(case=name):
                rc, printed = cli("decide", "--model", MODEL, "--threads", "1", self.case(name))
                self.assertEqual(rc, 2)
                with self.assertRaises(stave.InvalidRequestError) as caught:
                    self.exact.systemone(read_json(self.case(name)))
                self.assertEqual(str(caught.exception), printed["error"]["message"])
                self.assertIsInstance(caught.exception, stave.Error)
                self.assertEqual(caught.exception.kind, "invalid_request")
                with self.assertRaises(stave.InvalidRequestError) as encoded:
                    self.exact.encode(read_json(self.case(name)))
                self.assertEqual(str(encoded.exception), printed["error"]["message"])
        with self.assertRaises(stave.InvalidRequestError):
            self.exact.decide_batch([read_json(self.case("000-docs-example")), {"model": "clef"}])

    def test_model_errors_carry_the_cli_messages(self):
        missing = os.path.join(FIXTURES, "public", "no-such-model")
        rc, printed = cli("decide", "--model", missing, self.case("000-docs-example"))
        self.assertEqual(rc, 2)
        with self.assertRaises(stave.InvalidModelError) as caught:
            stave.load(missing)
        self.assertEqual(str(caught.exception), printed["error"]["message"])
        with self.assertRaises(ValueError):
            stave.load(MODEL, precision="medium")
        with self.assertRaises(ValueError):
            stave.load(MODEL, device="tpu")
        with self.assertRaises(ValueError):
            stave.load(MODEL, fp8_cache_gib=-1)
        # The FP8 weight cache is a GPU's: asked for on the CPU, the engine's own message.
        rc, printed = cli("decide", "--model", MODEL, "--fp8-cache-gib", "2", self.case("000-docs-example"))
        self.assertEqual(rc, 2)
        with self.assertRaises(stave.InvalidRequestError) as caught:
            stave.load(MODEL, fp8_cache_gib=2)
        self.assertEqual(str(caught.exception), printed["error"]["message"])
        with self.assertRaises(TypeError):
            self.exact.systemone(42)

    def test_random_weights_warn(self):
        import tempfile, warnings
        with tempfile.TemporaryDirectory() as tmp:
            model = os.path.join(tmp, "model")
            os.mkdir(model)
            for name in os.listdir(MODEL):
                os.symlink(os.path.join(MODEL, name), os.path.join(model, name))
            with open(os.path.join(model, "stave_synth.json"), "w") as f:
                f.write("{}")
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                stave.load(model, threads=1)
            self.assertTrue(any("RANDOM" in str(w.message) for w in caught), [str(w.message) for w in caught])
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                stave.load(MODEL, threads=1)
            self.assertEqual([str(w.message) for w in caught], [])

    def test_info(self):
        info = self.fast.info
        self.assertEqual(info["weight_format"], "mxfp4")
        self.assertEqual(info["precision"], "fast")
        self.assertTrue(info["path"].endswith("model-mxfp4"))

    def test_chat_equals_cli_and_reference_prompt(self):
        lm = read_json(os.path.join(FIXTURES, "public", "lm", "lm-mxfp4.json"))
        chat = lm["chats"][0]
        got = self.fast.chat(chat["messages"], temperature=0, max_tokens=8)
        self.assertEqual(got["prompt_token_ids"], chat["prompt_ids"])  # the reference's rendering
        rc, printed = cli("chat", "--model", MODEL, "--precision", "fast", "--threads", "1", "--json",
                          "--temperature", "0", "--max-tokens", "8", "-",
                          stdin=json.dumps({"messages": chat["messages"]}))
        self.assertEqual(rc, 0)
        self.assertEqual(got, printed)
        # A whole OpenAI body works too, its own fields included.
        body = self.fast.chat({"messages": chat["messages"], "max_tokens": 8, "temperature": 0})
        self.assertEqual(body, got)

    def test_perplexity_equals_cli(self):
        lm = read_json(os.path.join(FIXTURES, "public", "lm", "lm-mxfp4.json"))
        windows = [lm["perplexity"][0]["input_ids"][:24], lm["perplexity"][1]["input_ids"][:16]]
        got = self.fast.perplexity(ids=windows, per_token=True)
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "ids.json")
            with open(path, "w") as f:
                json.dump(windows, f)
            rc, printed = cli("perplexity", "--model", MODEL, "--precision", "fast", "--threads", "1",
                              "--per-token", "--ids", path)
        self.assertEqual(rc, 0)
        self.assertEqual(got, printed)
        with self.assertRaises(ValueError):
            self.fast.perplexity()
        with self.assertRaises(stave.Error):
            self.fast.perplexity(ids=[[1]])  # a window needs two tokens

    def test_gil_is_released_while_deciding(self):
        # A long request keeps one decision busy (a second or so); the main thread, stamping the
        # time meanwhile, gets to run throughout it only if the call released the GIL (holding
        # it, the stamps would stop for the whole decision: one gap as long as the call).
        request = read_json(self.case("015-long-state-truncated"))
        best = 1.0
        for _ in range(3):
            window = {}
            def decide():
                window["start"] = time.monotonic()
                self.fast.systemone(request)
                window["end"] = time.monotonic()
            worker = threading.Thread(target=decide)
            stamps = []
            worker.start()
            while worker.is_alive():
                stamps.append(time.monotonic())
            worker.join()
            inside = [t for t in stamps if window["start"] <= t <= window["end"]]
            edges = [window["start"]] + inside + [window["end"]]
            longest_gap = max(b - a for a, b in zip(edges, edges[1:]))
            best = min(best, longest_gap / (window["end"] - window["start"]))
            if best < 0.5:
                break
        self.assertLess(best, 0.5, "the main thread stalled for most of the decision: the GIL was held")


if __name__ == "__main__":
    unittest.main()
