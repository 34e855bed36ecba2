"""The documentation site: ``assocmem docs`` builds it (warnings as errors), and a
real headless browser (Debian's Chromium, driven by Selenium through Debian's
chromedriver) shows the claims, the figures and the notebooks.

The browser test skips, with the reason, where Chromium or its driver is not
installed; ``.ci/run`` installs both.  The screenshot of the claims page is kept
in ``test-artifacts/docs/`` (git-ignored) in the checkout.
"""
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from assocmem.figures import FIGURES
from assocmem.registry import claims
from assocmem.site import SKIP_RESULT_DIRS

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("*.py"))
ARTIFACTS = ROOT / "test-artifacts" / "docs"

pytestmark = pytest.mark.docs


def run_cli(*args, timeout=900):
    return subprocess.run([sys.executable, "-m", "assocmem", "docs", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


@pytest.fixture(scope="module")
def site(tmp_path_factory, verify_report):
    """The site built from the session's verify report (``--claims-json``: verify runs once for the whole
    session; the build without it, running verify itself, is the slow test below)."""
    pytest.importorskip("sphinx", reason="the docs extra is not installed")
    pytest.importorskip("myst_nb", reason="the docs extra is not installed")
    out = tmp_path_factory.mktemp("site") / "html"
    t = time.perf_counter()
    proc = run_cli("--out", str(out), "--claims-json", str(verify_report[2]))
    seconds = time.perf_counter() - t
    assert proc.returncode == 0, proc.stderr[-3000:]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "build.log").write_text(f"assocmem docs: {seconds:.1f} s\n{proc.stdout}", encoding="utf-8")
    return out


def page(site, name):
    return (site / f"{name}.html").read_text(encoding="utf-8")


def test_docs_pages_come_from_the_package(site):
    ids = [c.id for c in claims()]
    text = page(site, "claims")
    missing = [i for i in ids if f'id="claim-{re.sub(r"[^a-z0-9]+", "-", i.lower())}"' not in text]
    assert not missing, missing
    assert "Generated from an <code" in text and "verify.json" in text and "Errata" in text
    figs = page(site, "figures")
    assert all(f"{name}.png" in figs for name in FIGURES)
    for nb in NOTEBOOKS:
        assert (site / "notebooks" / f"{nb}.html").is_file(), nb
    tasks = page(site, "tasks")
    for png in (ROOT / "results" / "figures").glob("*.png"):
        assert png.name in tasks, png.name
    for tdir in (ROOT / "results").iterdir():
        # every task folder of results/ (not the figures, logs and stopped runs the page skips)
        if tdir.is_dir() and any(tdir.glob("*.json")) and tdir.name not in SKIP_RESULT_DIRS:
            assert tdir.name in tasks
    api = page(site, "api/assocmem_theory")
    assert 'id="assocmem.theory.bl_steady_state.steady_state_expansion"' in api


def test_docs_claims_page_matches_verify_json(site):
    """The status shown for each claim is the one `assocmem verify --json` reports."""
    html = page(site, "claims")
    rows = dict(re.findall(r'href="#claim-[^"]*">([^<]+)</a></p></td>\s*<td><p>(\w+)</p></td>', html))
    assert set(rows) == {c.id for c in claims()}
    want = {c.id: c.run().status for c in claims("bl.gain_bound,am.gd_objective,task.mqar")}
    assert {k: rows[k] for k in want} == want


def test_docs_site_is_offline(site):
    remote = re.compile(r"""<(?:script|link|img)[^>]+(?:src|href)=["']https?://""")
    bad = [p.name for p in site.rglob("*.html") if remote.search(p.read_text(encoding="utf-8"))]
    assert not bad, bad
    assert (site / "_static" / "mathjax" / "tex-chtml.js").is_file()


def test_docs_default_out_is_git_ignored():
    probe = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", "docs/_build/html/index.html"])
    assert probe.returncode == 0


def test_docs_bad_out_is_one_line_exit_2(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    proc = run_cli("--out", str(blocker / "html"), timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("assocmem docs: error: --out:")
    full = tmp_path / "full"
    full.mkdir()
    (full / "notes.txt").write_text("mine")
    proc = run_cli("--out", str(full), timeout=120)
    assert proc.returncode == 2 and "--out" in proc.stderr and "not an earlier docs build" in proc.stderr
    assert (full / "notes.txt").read_text() == "mine"
    proc = run_cli("--root", str(tmp_path), timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith("assocmem docs: error: --root:")


@pytest.mark.parametrize("content,why", [(None, "does not exist"), ("not json", "is not a JSON file"),
                                         ('{"claims": []}', "is not an `assocmem verify --json` report"),
                                         ('[1, 2]', "is not an `assocmem verify --json` report"),
                                         ('{"claims": [{"id": "a.b", "status": "confirmed"}]}', "claim a.b lacks layers")])
def test_docs_bad_claims_json_is_one_line_exit_2_and_writes_nothing(tmp_path, content, why):
    f = tmp_path / "report.json"
    if content is not None:
        f.write_text(content)
    out = tmp_path / "html"
    proc = run_cli("--out", str(out), "--claims-json", str(f), timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("assocmem docs: error: --claims-json:") and why in proc.stderr
    assert not out.exists()


def test_claims_page_names_where_its_report_came_from():
    from assocmem.site import claims_page

    report = {"claims": [{"id": "x.y", "status": "confirmed", "layers": ["numpy"], "source": "s", "published": "p",
                          "detail": "d", "items": [], "computed": {}}]}
    assert "when this site was built" in claims_page(report)
    given = claims_page(report, "run.json")
    assert "when this site was built" not in given and "given to the build (`run.json`)" in given


@pytest.mark.slow
def test_docs_build_runs_verify_itself_without_claims_json(tmp_path):
    """Without ``--claims-json`` the build runs ``assocmem verify --json`` itself (a minute more)."""
    out = tmp_path / "html"
    proc = run_cli("--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = (out / "claims.html").read_text(encoding="utf-8")
    assert "when this site was built" in text and "verify --json" in proc.stdout


# -- in a real browser ----------------------------------------------------------
def _browser():
    chromium = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome")
                     if shutil.which(b)), None)
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        pytest.skip("no Chromium + chromedriver installed (Debian: apt-get install chromium chromium-driver)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (dev extra)")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium          # the system's browser: nothing is downloaded
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1280,1800", "--hide-scrollbars"):
        opts.add_argument(a)
    return webdriver.Chrome(service=Service(executable_path=driver), options=opts)


@pytest.fixture(scope="module")
def browser():
    b = _browser()
    yield b
    b.quit()


def _open(browser, path: Path):
    browser.get(path.as_uri())
    deadline = time.time() + 30
    while browser.execute_script("return document.readyState") != "complete" and time.time() < deadline:
        time.sleep(0.1)


IMAGES_LOADED = """
const imgs = Array.from(document.querySelectorAll('img'));
for (const img of imgs) { img.loading = 'eager'; img.scrollIntoView(); }
return imgs.map(i => [i.getAttribute('src'), i.complete, i.naturalWidth]);
"""


def _images(browser):
    deadline = time.time() + 30
    while True:
        imgs = browser.execute_script(IMAGES_LOADED)
        if all(done for _, done, _ in imgs) or time.time() > deadline:
            return imgs
        time.sleep(0.2)


def test_docs_in_browser_claims_page_lists_every_claim(site, browser):
    _open(browser, site / "claims.html")
    text = browser.execute_script("return document.body.innerText")
    missing = [c.id for c in claims() if c.id not in text]
    assert not missing, missing
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "claims.png"
    browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000


@pytest.mark.parametrize("name", ["figures", "tasks", "index"] + [f"notebooks/{n}" for n in NOTEBOOKS])
def test_docs_in_browser_every_image_loads(site, browser, name):
    _open(browser, site / f"{name}.html")
    imgs = _images(browser)
    if name in ("figures",) or name.startswith("notebooks/") and not name.endswith(("01_bl_recurrence",
                                                                                    "06_gpu_kernel")):
        assert imgs, f"no image on {name}"
    broken = [src for src, done, w in imgs if not done or w == 0]
    assert not broken, f"{name}: images not loaded: {broken}"


def test_docs_in_browser_derivations_render_as_mathematics(site, browser):
    _open(browser, site / "notebooks" / "02_bl_steady_state_geometry.html")
    deadline = time.time() + 30
    n = 0
    while time.time() < deadline:
        n = browser.execute_script("return document.querySelectorAll('mjx-container').length")
        if n:
            break
        time.sleep(0.2)
    assert n >= 3, "MathJax typeset nothing"
    errors = browser.execute_script("return document.querySelectorAll('mjx-merror').length")
    assert errors == 0
    text = browser.execute_script("return document.body.innerText")
    assert "Proved:" in text and "✓" in text
