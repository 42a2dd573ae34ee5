#!/usr/bin/env python3
"""`hank serve` in a real browser: Debian's Chromium driven headless through Selenium (PyPI)
and Debian's chromedriver — no browser or driver is downloaded.

From a clean HOME it makes three projects with the fake agent (fixtures/bin/claude): `solo`, a
finished two-loop `hank run` whose live log holds a script-injecting line; `squad`, a `hank
fleet` of two tasks that runs while the browser looks; `big`, 1,000 loops of records (the first
paint benchmark). Then it starts `hank serve` and checks, failing with a message on the first
miss:
  - without the token: a status and a line, no data; a wrong Host is refused (421);
  - with it: the list, the run page (its SVG timeline), the log (the `<script>` line shown as
    text, never run), the fleet page (the SVG Gantt chart), each with no console error (a CSP
    violation is one);
  - the fleet page updates live: a task shown running becomes merged without a reload;
  - at 390 px wide (a phone) no page scrolls sideways;
  - a screenshot of each page goes to OUT_DIR (CI keeps them as artifacts), and the first
    paint of the 1,000-loop run page is printed (measured, not asserted: PERFORMANCE.md).

Usage: scripts/browser-serve.py [HANK_BIN] [OUT_DIR]
       scripts/browser-serve.py --bench [HANK_BIN]   (the first paint only: scripts/bench-serve.sh)
  (defaults: target/debug/hank, target/serve-screenshots). CHROMIUM and CHROMEDRIVER name the
  browser and driver (defaults: `chromium` and `chromedriver` on PATH).
"""

import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = sys.argv[1:2] == ["--bench"]
ARGS = sys.argv[2:] if BENCH else sys.argv[1:]
HANK = os.path.abspath(ARGS[0] if ARGS else os.path.join(REPO, "target/debug/hank"))
OUT = os.path.abspath(ARGS[1] if len(ARGS) > 1 else os.path.join(REPO, "target/serve-screenshots"))
# Bounds on a stuck server or fleet, not timing assertions.
LIMIT = 180

WORK = tempfile.mkdtemp(prefix="hank-browser-")
HOME = os.path.join(WORK, "home")
BIN = os.path.join(WORK, "bin")
children = []


def fail(msg):
    print(f"browser-serve: FAILED: {msg}", file=sys.stderr)
    sys.exit(1)


def env_for(fake):
    return {
        "PATH": f"{BIN}:/usr/local/bin:/usr/bin:/bin",
        "HOME": HOME,
        "FAKE_CLAUDE_DIR": fake,
        "SANDBOX": "off",
        "NO_COLOR": "1",
        "LANG": "C.UTF-8",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
    }


def run(args, cwd, env, ok=(0,)):
    p = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    if p.returncode not in ok:
        fail(f"{' '.join(args)} exited {p.returncode}: {p.stderr[-2000:]}")
    return p


def project(name, plan, effect, sleep=None):
    """A git project with hank's files, `plan` as its fix_plan and the fake agent doing
    `effect` (after `sleep` seconds); its folder and environment."""
    d = os.path.join(WORK, name)
    fake = os.path.join(WORK, f"fake-{name}")
    os.makedirs(os.path.join(d, ".hank"))
    os.makedirs(fake)
    files = {
        ".hank/PROMPT.md": "# Prompt\nDo the next task.\n",
        ".hank/fix_plan.md": plan,
        ".hank/AGENT.md": "# Agent notes\n",
        ".hankrc": "RETRY_BACKOFF_SECONDS=0\n",
        ".gitignore": open(os.path.join(REPO, "templates/gitignore")).read(),
    }
    for rel, text in files.items():
        with open(os.path.join(d, rel), "w") as f:
            f.write(text)
    with open(os.path.join(fake, "effect.sh"), "w") as f:
        f.write(effect)
    if sleep:
        with open(os.path.join(fake, "sleep"), "w") as f:
            f.write(str(sleep))
    env = env_for(fake)
    run(["git", "-c", "init.defaultBranch=main", "init", "-q"], d, env)
    run(["git", "add", "-A"], d, env)
    run(["git", "commit", "-q", "-m", "init"], d, env)
    return d, env


TICK = "sed -i '0,/- \\[ \\]/s//- [x]/' .hank/fix_plan.md\nn=$(basename \"$PWD\"); date +%s%N >> \"$n.txt\"\n"


def big_records(d):
    """1,000 loops of records (events and status), as a long run leaves them."""
    t0 = int(time.time()) - 1001 * 120
    lines = []
    for n in range(1, 1001):
        start = t0 + n * 120
        at = lambda s: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(s))
        lines.append(json.dumps({"schema_version": 2, "type": "loop_started", "at": at(start), "loop": n,
                                 "resume": n > 1, "context_bytes": 900}))
        lines.append(json.dumps({"schema_version": 2, "type": "agent_finished", "at": at(start + 30 + n % 60), "loop": n,
                                 "outcome": "success" if n % 17 else "error",
                                 "error_kind": None if n % 17 else "api_error",
                                 "exit_signal": False, "files_changed": n % 5,
                                 "plan_items_checked": 0, "cost_usd": 0.02 + (n % 7) / 100,
                                 "duration_ms": (30 + n % 60) * 1000, "permission_denials": 0,
                                 "completion_indicators": [], "session_id": "s-1",
                                 "tokens": {"input": 1200, "output": 300, "cache_read": 9000,
                                            "cache_creation": 0}}))
    with open(os.path.join(d, ".hank/events.jsonl"), "w") as f:
        f.write("\n".join(lines) + "\n")
    status = {"schema_version": 2, "updated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "state": "completed", "loop_count": 1000, "total_cost_usd": 51.3,
              "circuit_state": "CLOSED", "circuit_reason": "", "exit_reason": "plan_complete",
              "exit_code": 0, "usage_windows": {
                  "five_hour": {"utilization": 0.62, "resets_at": "2030-01-01T00:00:00Z"},
                  "seven_day": {"utilization": 0.93, "resets_at": "2030-01-05T00:00:00Z"}}}
    with open(os.path.join(d, ".hank/status.json"), "w") as f:
        json.dump(status, f)


def get(host_port, path, host=None, cookie=None):
    c = http.client.HTTPConnection(host_port, timeout=30)
    headers = {"Host": host or host_port}
    if cookie:
        headers["Cookie"] = cookie
    c.request("GET", path, headers=headers)
    r = c.getresponse()
    return r.status, r.read().decode("utf-8", "replace")


def console_errors(driver):
    return [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


def check_page(driver, url, name, selector):
    driver.get(url)
    if not driver.find_elements(By.CSS_SELECTOR, selector):
        fail(f"{name}: no {selector} on {url}: {driver.page_source[:2000]}")
    errors = console_errors(driver)
    if errors:
        fail(f"{name}: console errors: {errors}")
    driver.save_screenshot(os.path.join(OUT, f"{name}.png"))


def tools():
    """The browser and its driver: CHROMIUM and CHROMEDRIVER when set, else Debian's
    `chromium` and `chromedriver` on PATH (a GitHub runner's Chrome and CHROMEWEBDRIVER
    otherwise). Never downloaded."""
    browser = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("google-chrome")
    driver = os.environ.get("CHROMEDRIVER") or shutil.which("chromedriver")
    if not driver and os.environ.get("CHROMEWEBDRIVER"):
        driver = os.path.join(os.environ["CHROMEWEBDRIVER"], "chromedriver")
    if not browser or not driver or not os.path.exists(driver):
        fail("Chromium and chromedriver are required (apt install chromium chromium-driver)")
    return browser, driver


def start_browser():
    browser, chromedriver = tools()
    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for a in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
              "--window-size=1280,900", "--no-first-run", "--disable-extensions"]:
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(chromedriver), options=opts)


def serve_in(d, env):
    """`hank serve` started in `d`: the URL it printed."""
    serve = subprocess.Popen([HANK, "serve"], cwd=d, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    children.append(serve)
    url = serve.stdout.readline().strip()
    if not url.startswith("http://127.0.0.1:") or "/?token=" not in url:
        fail(f"first line of hank serve: {url!r}")
    return url


PAINT = ("var p = performance.getEntriesByName('first-contentful-paint')[0];"
         "var n = performance.getEntriesByType('navigation')[0];"
         "return [p ? p.startTime : null, n ? n.responseEnd - n.requestStart : null, "
         "document.querySelectorAll('#loop-timeline rect').length];")


def painted(driver):
    """The page's first contentful paint, server response (ms) and timeline bars, once the
    browser has recorded the paint (it may come after the load event)."""
    deadline = time.time() + 30
    while True:
        got = driver.execute_script(PAINT)
        if got[0] is not None or time.time() > deadline:
            return got
        time.sleep(0.05)


def bench(loads=15):
    """The first paint of the 1,000-loop run page, loaded `loads` times (PERFORMANCE.md)."""
    os.makedirs(HOME)
    big, env = project("big", "# Plan\n\n## Tasks\n- [x] all\n", TICK)
    big_records(big)
    url = serve_in(big, env)
    driver = start_browser()
    try:
        driver.get(url)  # the cookie, then the project's page
        page = driver.current_url
        paints, responses = [], []
        for _ in range(loads):
            driver.get(page)
            fcp, response, bars = painted(driver)
            if bars != 1000:
                fail(f"{bars} bars on {page}")
            paints.append(fcp)
            responses.append(response)
    finally:
        driver.quit()
    paints.sort()
    responses.sort()
    print(f"bench-serve: 1,000-loop run page, {loads} loads: first contentful paint median "
          f"{paints[len(paints) // 2]:.0f} ms (min {paints[0]:.0f}, max {paints[-1]:.0f}); "
          f"server response median {responses[len(responses) // 2]:.0f} ms "
          f"(min {responses[0]:.0f}, max {responses[-1]:.0f})")


def main():
    os.makedirs(HOME)
    os.makedirs(BIN)
    os.makedirs(OUT, exist_ok=True)
    os.symlink(os.path.join(REPO, "fixtures/bin/claude"), os.path.join(BIN, "claude"))

    solo, env = project("solo", "# Plan\n\n## Tasks\n- [ ] one\n- [ ] two\n", TICK)
    run([HANK, "run"], solo, env)
    with open(os.path.join(solo, ".hank/live.log"), "a") as f:
        f.write("<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">\n")
    big, env_big = project("big", "# Plan\n\n## Tasks\n- [x] all\n", TICK)
    big_records(big)
    squad, env_squad = project(
        "squad", "# Plan\n\n## Api\n- [ ] the api\n\n## Ui\n- [ ] the ui\n\n## Docs\n- [ ] the docs\n", TICK, sleep=4)
    # The fleet's per-user folder (with its project record) exists once the fleet starts.
    fleet = subprocess.Popen([HANK, "fleet", "--agents", "2"], cwd=squad, env=env_squad,
                             stdout=subprocess.DEVNULL, stderr=open(os.path.join(OUT, "fleet.log"), "w"))
    children.append(fleet)
    # `big` gets its record the way a user's project does: hank serve started inside it.
    url = serve_in(big, env_big)
    base, token = url.split("/?token=")
    host_port = base[len("http://"):]
    cookie = f"hank_token={token}"

    # No token, a wrong token, a wrong Host: nothing but a status and a line.
    for path, host, ck, code in [("/projects", None, None, 401), ("/p/x/log", None, None, 401),
                                 ("/projects?token=wrong", None, None, 403),
                                 ("/projects", "attacker.example:" + host_port.split(":")[1], cookie, 421)]:
        status, body = get(host_port, path, host, ck)
        if status != code or "solo" in body or "<" in body:
            fail(f"{path} (Host {host}): {status} {body[:300]!r}, expected {code} and no data")

    driver = start_browser()
    try:
        driver.set_page_load_timeout(60)
        # Without the token the browser gets no data either.
        driver.get(base + "/projects")
        text = driver.find_element(By.TAG_NAME, "body").text
        if not text.startswith("token required") or "solo" in text:
            fail(f"no token: {text[:500]!r}")
        driver.get_log("browser")  # the 401 is logged as a failed load: expected here

        driver.get(url)  # the cookie, then `/` of the project it was started in (big)
        keys = {}
        deadline = time.time() + LIMIT
        while len(keys) < 3 and time.time() < deadline:
            driver.get(base + "/projects")
            for a in driver.find_elements(By.CSS_SELECTOR, "section.project h2 a"):
                keys[a.text] = a.get_attribute("href").rsplit("/", 1)[1]
            time.sleep(0.5)
        if set(keys) != {"solo", "squad", "big"}:
            fail(f"the list shows {sorted(keys)}: {driver.page_source[:2000]}")
        check_page(driver, base + "/projects", "projects", "section.project")
        check_page(driver, f"{base}/p/{keys['solo']}", "run", "svg#loop-timeline rect")
        check_page(driver, f"{base}/p/{keys['big']}", "run-1000-loops", "svg#loop-timeline rect")
        paint = painted(driver)
        print(f"browser-serve: 1,000-loop run page: first contentful paint {paint[0]:.0f} ms, "
              f"response {paint[1]:.0f} ms, {paint[2]} bars")
        check_page(driver, f"{base}/p/{keys['solo']}/log", "log", "pre#log")
        log_text = driver.find_element(By.ID, "log").text
        if "<script>document.title='pwned'</script>" not in log_text:
            fail(f"the script line is not shown as text: {log_text!r}")
        if driver.title.find("pwned") >= 0 or driver.find_elements(By.CSS_SELECTOR, "main script, main img"):
            fail("the log line ran as HTML")

        # The fleet page, live: a task seen running becomes merged without a reload.
        driver.get(f"{base}/p/{keys['squad']}/fleet")
        driver.execute_script("window.hankMarker = 'same page';")
        running = None
        deadline = time.time() + LIMIT
        while running is None and time.time() < deadline:
            rows = driver.find_elements(By.CSS_SELECTOR, "#tasks tr[data-state='running']")
            running = rows[0].get_attribute("id") if rows else None
            time.sleep(0.2)
        if os.environ.get("DEBUG_SERVE"):
            f = json.load(open(os.path.join(squad, ".hank/fleet.json")))
            for t in f["tasks"]:
                print(t["name"], t["state"], t["worktree"], t["worktree"] and os.listdir(os.path.join(t["worktree"], ".hank")))
            print(driver.find_element(By.ID, "fleet-gantt").get_attribute("outerHTML")[:3000])
        if running is None:
            fail(f"no task shown running: {driver.page_source[:3000]}")
        merged = False
        while not merged and time.time() < deadline:
            merged = bool(driver.find_elements(By.CSS_SELECTOR, f"tr#{running}[data-state='merged']"))
            time.sleep(0.2)
        if not merged:
            fail(f"{running} never shown merged: {driver.page_source[:3000]}")
        if driver.execute_script("return window.hankMarker;") != "same page":
            fail("the fleet page was reloaded, not updated")
        if not driver.find_elements(By.CSS_SELECTOR, "svg#fleet-gantt rect"):
            fail("no Gantt chart on the fleet page")
        errors = console_errors(driver)
        if errors:
            fail(f"fleet: console errors: {errors}")
        driver.save_screenshot(os.path.join(OUT, "fleet.png"))
        print(f"browser-serve: {running} went from running to merged on the open page")

        # A phone's width: nothing scrolls sideways.
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                               {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True})
        for name, path in [("projects", "/projects"), ("run", f"/p/{keys['solo']}"),
                           ("run-1000-loops", f"/p/{keys['big']}"),
                           ("log", f"/p/{keys['solo']}/log"), ("fleet", f"/p/{keys['squad']}/fleet")]:
            driver.get(base + path)
            wide = driver.execute_script(
                "return [document.documentElement.scrollWidth, document.documentElement.clientWidth];")
            if wide[0] > wide[1]:
                fail(f"{path} at 390 px: {wide[0]} px wide, scrolls sideways")
            driver.save_screenshot(os.path.join(OUT, f"phone-{name}.png"))
    finally:
        driver.quit()
    print(f"browser-serve: all checks passed; screenshots in {OUT}")


if __name__ == "__main__":
    try:
        bench() if BENCH else main()
    finally:
        for c in children:
            if c.poll() is None:
                c.terminate()
                try:
                    c.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    c.kill()
        shutil.rmtree(WORK, ignore_errors=True)
