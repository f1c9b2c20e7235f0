#!/usr/bin/env python3
"""Browser test of the page that `kgrag serve` embeds (Playwright for Python, sync API).

    python test_page.py --base-url http://127.0.0.1:PORT --screenshots DIR \
        [--chromium /usr/bin/chromium] [--api-key KEY] [--timeout SECONDS]

Needs a running server whose index holds the small offline corpus (a question about the river through
Poland's capital retrieves something) and the strategies `dense` and `hipporag2`. Uses the system's
Chromium through `executable_path` (no browser download). Prints a line per passed step; exits 1 with a
clear message on the first failure (and saves failure.png in the screenshot folder). The document the
test uploads is deleted through the API at the end, so reruns start clean.
"""
import argparse
import json
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

try:
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright
except ImportError:
    sys.exit("test_page.py needs Playwright for Python: pip install playwright (no `playwright install`: "
             "the system's Chromium is used)")

CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
UPLOAD_NAME = "zebra-notes.md"
PDF_NAME = "guilds.pdf"
PDF_PATH = Path(__file__).resolve().parents[3] / "documents" / "tests" / "data" / PDF_NAME
YSELLE_Q = "Where did Yselle Marrowind retire ashore after her long life under sail?"
UPLOAD_TEXT = "Quagga Zebrafish Orchard grows purple lemons in Tbilisi. The orchard keeper is named Ilia Quagga.\n"
POLAND_Q = "Which river flows through the capital of Poland?"
NOTES_Q = "Who keeps the lighthouse on the Hel Peninsula?"
NOTES_INDEX = "notes"  # the second index the server serves (crates/server/tests/browser/corpus-notes)
QUAGGA_Q = "Who keeps the Quagga Zebrafish Orchard?"
# 404s the page asks for and handles (an entity missing from a graph, an index without HiRAG): Chromium
# still logs "Failed to load resource" for them, which is not a page error.
EXPECTED_404_PATHS = ("/v1/graph", "/v1/communities")


class StepFailed(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise StepFailed(msg)


def api_request(base, method, path, api_key, body=None):
    """A plain HTTP call to the server; returns (status, parsed JSON or None)."""
    req = urllib.request.Request(base + path, method=method, data=body)
    if api_key:
        req.add_header("Authorization", "Bearer " + api_key)
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, None


def delete_upload(base, api_key, name=UPLOAD_NAME):
    return api_request(base, "DELETE", "/v1/documents/" + urllib.parse.quote(name, safe=""), api_key)[0]


class PageTest:
    def __init__(self, args, browser):
        self.args = args
        self.browser = browser
        self.shots = Path(args.screenshots)
        self.timeout_ms = int(args.timeout * 1000)
        self.console_errors = []  # (page label, text)
        self.page = None

    # -- helpers ---------------------------------------------------------

    def new_page(self, width, height, label):
        ctx = self.browser.new_context(viewport={"width": width, "height": height})
        if self.args.api_key:
            # Store the key before the page's script runs, as a person would after the key box.
            ctx.add_init_script("localStorage.setItem('kgrag.apiKey', %s);" % json.dumps(self.args.api_key))
        page = ctx.new_page()
        page.set_default_timeout(self.timeout_ms)

        def on_console(msg):
            if msg.type != "error":
                return
            url = (msg.location or {}).get("url", "")
            path = urllib.parse.urlparse(url).path
            if "status of 404" in msg.text and path in EXPECTED_404_PATHS:
                return
            self.console_errors.append((label, f"console: {msg.text} ({url})"))

        page.on("console", on_console)
        page.on("pageerror", lambda exc: self.console_errors.append((label, f"pageerror: {exc}")))
        self.page = page
        return page

    def shot(self, name):
        path = self.shots / name
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def error_banner(self):
        box = self.page.locator("[data-testid=error]")
        return box.inner_text() if box.is_visible() else ""

    def load(self):
        page = self.page
        page.goto(self.args.base_url + "/")
        try:
            page.wait_for_selector("[data-testid=strategy-dense]", timeout=30_000)
            page.wait_for_selector("[data-testid=strategy-hipporag2]", timeout=5_000)
        except PlaywrightError:
            note = self.error_banner()
            if page.locator("#apikey-form").is_visible():
                note += " (the page asks for an API key: pass --api-key)"
            raise StepFailed(f"the strategy checkboxes dense and hipporag2 did not appear: {note or 'no error shown'}")

    def tick_only(self, strategies):
        boxes = self.page.locator("[data-testid^=strategy-]")
        for i in range(boxes.count()):
            boxes.nth(i).set_checked(False)
        for s in strategies:
            self.page.locator(f"[data-testid=strategy-{s}]").set_checked(True)

    def ask(self, question, strategies, press_enter=False):
        """Asks and waits for one result column per strategy (or the error banner); returns the columns."""
        page = self.page
        page.locator("[data-testid=question]").fill(question)
        if press_enter:
            page.locator("[data-testid=question]").press("Enter")
        else:
            page.locator("[data-testid=ask]").click()
        page.wait_for_function(
            """n => !document.getElementById('results').hasAttribute('aria-busy')
                   && (document.querySelectorAll('[data-testid^="result-"]').length >= n
                       || !document.querySelector('[data-testid=error]').hidden)""",
            arg=len(strategies), timeout=self.timeout_ms)
        err = self.error_banner()
        check(not err, f"asking {question!r} showed an error: {err}")
        cols = page.locator('[data-testid^="result-"]')
        check(cols.count() == len(strategies), f"expected {len(strategies)} result columns, found {cols.count()}")
        for s in strategies:
            col = page.locator(f"[data-testid=result-{s}]")
            check(col.count() == 1, f"no result column for {s}")
            n = col.locator("[data-testid=passage]").count()
            check(n >= 1, f"the {s} column has no passage for {question!r}")
        return cols

    # -- steps -----------------------------------------------------------

    def step_ask(self):
        self.new_page(1280, 800, "desktop")
        self.load()
        self.tick_only(["dense", "hipporag2"])
        self.ask(POLAND_Q, ["dense", "hipporag2"], press_enter=True)
        # Side by side: the two columns share a row at this width.
        boxes = [self.page.locator(f"[data-testid=result-{s}]").bounding_box() for s in ("dense", "hipporag2")]
        check(abs(boxes[0]["y"] - boxes[1]["y"]) < 2 and boxes[1]["x"] > boxes[0]["x"],
              f"the result columns are not side by side at 1280×800: {boxes}")
        return f"two result columns with passages; {self.shot('ask.png')}"

    def step_documents(self):
        page = self.page
        page.locator("[data-testid=tab-documents]").click()
        folder = Path(tempfile.mkdtemp(prefix="kgrag-page-"))
        path = folder / UPLOAD_NAME
        path.write_text(UPLOAD_TEXT, encoding="utf-8")
        page.locator("[data-testid=upload-input]").set_input_files(str(path))
        status = page.locator("[data-testid=upload-status]")
        page.wait_for_function(
            "() => ['ok', 'error'].includes(document.querySelector('[data-testid=upload-status]').dataset.state)",
            timeout=max(self.timeout_ms, 180_000))
        check(status.get_attribute("data-state") == "ok", f"the upload failed: {status.inner_text()}")
        # The list refreshes after the upload; the row may be on a later page.
        row = page.locator(f'[data-testid=doc-row][data-id="{UPLOAD_NAME}"]')
        for _ in range(100):
            try:
                row.wait_for(timeout=5_000)
                break
            except PlaywrightError:
                nxt = page.locator("#doc-next")
                check(nxt.is_enabled(), f"no document row with the id {UPLOAD_NAME} after the upload")
                nxt.click()
        check(row.count() == 1, f"no document row with the id {UPLOAD_NAME}")
        shot = self.shot("documents.png")

        page.locator("[data-testid=tab-ask]").click()
        page.locator("[data-testid=strategy-dense]").set_checked(True)
        ticked = page.eval_on_selector_all("[data-testid^=strategy-]:checked", "bs => bs.map(b => b.value)")
        self.ask(QUAGGA_Q, ticked)
        texts = page.locator("[data-testid=passage]").all_inner_texts()
        check(any("Quagga" in t for t in texts), f"no passage mentions Quagga after the upload ({len(texts)} passages)")
        return f"uploaded {UPLOAD_NAME} ({status.inner_text().strip()}); a passage now mentions Quagga; {shot}"

    def step_citations(self):
        """A PDF uploaded through the page, a question whose answer cites it, and the cited page opened."""
        page = self.page
        page.locator("[data-testid=tab-documents]").click()
        page.locator("[data-testid=upload-input]").set_input_files(str(PDF_PATH))
        page.wait_for_function(
            "() => ['ok', 'error'].includes(document.querySelector('[data-testid=upload-status]').dataset.state)",
            timeout=max(self.timeout_ms, 180_000))
        status = page.locator("[data-testid=upload-status]")
        check(status.get_attribute("data-state") == "ok", f"the PDF upload failed: {status.inner_text()}")
        page.locator("[data-testid=tab-ask]").click()
        self.tick_only(["hipporag2"])
        self.ask(YSELLE_Q, ["hipporag2"])
        col = page.locator("[data-testid=result-hipporag2]")
        check(col.locator("[data-testid=citations]").count() == 1, "the answer shows no citations")
        links = col.locator('[data-testid=passage-source]')
        labels = links.all_inner_texts()
        pdf = [i for i, t in enumerate(labels) if t.startswith(PDF_NAME + " p. ")]
        check(pdf, f"no passage cites {PDF_NAME} to a page: {labels}")
        link = links.nth(pdf[0])
        want_page = link.get_attribute("data-page")
        check(want_page, f"the source link of {labels[pdf[0]]!r} has no page")
        shot = self.shot("citations.png")
        # The original is fetched with the key and opened in a new tab as a blob URL at `#page=N`, which
        # Chromium's PDF viewer shows.
        seen = []
        with page.context.expect_page(timeout=self.timeout_ms) as opened:
            link.click()
        tab = opened.value
        tab.on("framenavigated", lambda f: seen.append(f.url))
        for _ in range(int(self.timeout_ms / 100)):
            if any(u.startswith("blob:") for u in seen + [tab.url]):
                break
            tab.wait_for_timeout(100)
        blob = next((u for u in seen + [tab.url] if u.startswith("blob:")), None)
        check(blob, f"the original did not open (the new tab went to {seen or [tab.url]})")
        check(blob.endswith("#page=" + want_page), f"the original opened at {blob}, not at page {want_page}")
        # Chromium shows a PDF in its viewer, an extension page in a frame of the tab. Its navigation can come
        # before the listener above is attached (cold CI runs missed it twice), so the tab's frames are
        # looked at too.
        def viewer():
            urls = seen + [f.url for f in tab.frames]
            return any(u.startswith("chrome-extension://") for u in urls)
        for _ in range(int(self.timeout_ms / 100)):
            if viewer():
                break
            tab.wait_for_timeout(100)
        check(viewer(), f"the original did not open in the PDF viewer (navigations: {seen}; frames: "
                        f"{[f.url for f in tab.frames]})")
        tab.close()
        return f"{labels[pdf[0]]!r} opened the PDF at page {want_page} ({blob[:30]}…#page={want_page}); {shot}"

    def wait_graph(self):
        """Waits for the graph to settle; returns the number of nodes drawn (0 if the entity was not found)."""
        self.page.wait_for_function(
            "() => ['ok', 'missing', 'error'].includes(document.querySelector('[data-testid=graph-svg]').dataset.state)",
            timeout=self.timeout_ms)
        return self.page.locator("[data-testid=graph-svg] [data-testid=graph-node]").count()

    def step_graph(self):
        page = self.page
        # Entity chips of the results, HippoRAG 2's first.
        chips = page.locator("[data-testid=result-hipporag2] [data-testid=entity]")
        if chips.count() == 0:
            chips = page.locator('[data-testid^="result-"] [data-testid=entity]')
        tried = []
        for i in range(min(chips.count(), 6)):
            name = chips.nth(i).inner_text()
            tried.append(name)
            chips.nth(i).click()
            check(page.locator("[data-testid=graph-svg]").is_visible(), "clicking an entity chip did not open the graph")
            n = self.wait_graph()
            if n >= 2:
                return f"entity chip {name!r} -> {n} graph nodes; {self.shot('graph.png')}"
            page.locator("[data-testid=tab-ask]").click()
        # No chip led to a graph: type entities into the Graph tab.
        page.locator("[data-testid=tab-graph]").click()
        if page.locator("#graph-method option[value=hipporag2]").count():
            page.locator("#graph-method").select_option("hipporag2")
        for name in ["Ilia Quagga", "Quagga Zebrafish Orchard", "Tbilisi", "Warsaw", "Vistula", "Poland"]:
            tried.append(name)
            page.locator("#graph-entity").fill(name)
            page.locator("#graph-form button[type=submit]").click()
            n = self.wait_graph()
            if n >= 2:
                return f"typed entity {name!r} -> {n} graph nodes; {self.shot('graph.png')}"
        raise StepFailed(f"no graph with 2 or more nodes for any of {tried}")

    def step_index(self):
        """The index picker: the second index is picked, asked, and kept in the address across a reload."""
        self.new_page(1280, 800, "indexes")
        self.load()
        page = self.page
        picker = page.locator("[data-testid=index-pick]")
        check(picker.is_visible(), "no index picker on a server with two indexes")
        names = picker.locator("option").evaluate_all("os => os.map(o => o.value)")
        check(NOTES_INDEX in names, f"the picker does not offer {NOTES_INDEX}: {names}")
        picker.select_option(NOTES_INDEX)
        page.wait_for_selector(f"body[data-index={NOTES_INDEX}]", timeout=self.timeout_ms)
        check(f"index={NOTES_INDEX}" in page.url, f"the pick is not in the address: {page.url}")
        self.tick_only(["dense"])
        self.ask(NOTES_Q, ["dense"])
        texts = page.locator("[data-testid=passage]").all_inner_texts()
        check(any("Brzezina" in t for t in texts), f"no passage of {NOTES_INDEX} names the keeper: {texts}")
        check(not any("Vistula" in t for t in texts), f"a passage of the other index came back: {texts}")
        shot = self.shot("index.png")
        # A reload (or a shared link) opens the same index.
        page.reload()
        page.wait_for_selector(f"body[data-index={NOTES_INDEX}]", timeout=self.timeout_ms)
        check(picker.input_value() == NOTES_INDEX, f"after a reload the picker shows {picker.input_value()}")
        return f"picked {NOTES_INDEX} of {names}, asked it, kept across a reload; {shot}"

    def step_phone(self):
        self.new_page(390, 844, "phone")
        self.load()
        self.tick_only(["dense", "hipporag2"])
        self.ask(POLAND_Q, ["dense", "hipporag2"])
        shot = self.shot("phone.png")
        width = self.page.evaluate("document.documentElement.scrollWidth")
        check(width <= 391, f"the page is {width}px wide at a 390px viewport (horizontal overflow)")
        return f"scrollWidth {width} <= 391; {shot}"

    def step_console(self):
        check(not self.console_errors, "console errors:\n  " + "\n  ".join(f"[{p}] {t}" for p, t in self.console_errors))
        return "no console errors or page errors"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--screenshots", required=True)
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--api-key")
    ap.add_argument("--timeout", type=float, default=60, help="seconds to wait for an answer (default 60)")
    args = ap.parse_args()
    args.base_url = args.base_url.rstrip("/")
    Path(args.screenshots).mkdir(parents=True, exist_ok=True)
    if not Path(args.chromium).exists():
        print(f"FAIL setup: no Chromium at {args.chromium} (apt-get install chromium, or pass --chromium)")
        return 1

    for name in (UPLOAD_NAME, PDF_NAME):  # left over from an interrupted run: 404 is fine
        delete_upload(args.base_url, args.api_key, name)
    failed = False
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=args.chromium, headless=True, args=CHROMIUM_ARGS)
            t = PageTest(args, browser)
            steps = [("a", "ask", t.step_ask), ("b", "documents", t.step_documents), ("c", "graph", t.step_graph),
                     ("d", "citations", t.step_citations), ("e", "phone", t.step_phone),
                     ("f", "index", t.step_index), ("g", "console", t.step_console)]
            for key, name, fn in steps:
                try:
                    detail = fn()
                except (StepFailed, PlaywrightError) as e:
                    print(f"FAIL {key} {name}: {e}", flush=True)
                    if t.page is not None:
                        try:
                            t.shot("failure.png")
                            print(f"  screenshot: {Path(args.screenshots) / 'failure.png'}")
                        except PlaywrightError:
                            pass
                    failed = True
                    break
                print(f"ok {key} {name}: {detail}", flush=True)
            browser.close()
    finally:
        for name in (UPLOAD_NAME, PDF_NAME):
            status = delete_upload(args.base_url, args.api_key, name)
            if status not in (200, 404):
                print(f"warning: deleting {name} through the API answered {status}")
    if failed:
        return 1
    print("all browser steps passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
