"""The comparison and sweep reports as a reader opens them: in a real browser (Debian's Chromium,
headless, no network), at 1440 and 800 px. Each page loads without an error, fits its width (a
wide table scrolls inside its own box, its policy column kept in view), answers first (the table
of the numbers that decide, with the best policy on each, before any plot), and every chart has
its axis titles and, where several policies are drawn, each one named in its legend.

    report_in_browser.py EPLB SCENARIOS_DIR
Exits 77 (ctest: skipped, said so) when Chromium is not installed; tools/setup installs it."""

import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

# Injected into a copy of the report: errors and console errors from the first script on, then,
# once the page has loaded, what a reader would see, as JSON in a <pre> the DOM dump carries.
PROBE_HEAD = """<script>window.__errors = [];
window.addEventListener('error', e => __errors.push('error: ' + e.message));
const __consoleError = console.error;
console.error = function (...a) { __errors.push('console.error: ' + a.join(' '));
  __consoleError.apply(console, a); };</script>"""
PROBE_TAIL = """<script>window.addEventListener('load', () => {
  const width = innerWidth, out = {errors: __errors, width: width,
    scroll_width: document.documentElement.scrollWidth, overflow: [], charts: [], first: []};
  for (const el of document.body.querySelectorAll('*')) {
    const box = el.closest('.wide');
    if (box && box !== el) continue;  // scrolls inside its own box
    const r = el.getBoundingClientRect();
    if (r.width > 0 && r.right > width + 0.5)
      out.overflow.push(el.tagName + (el.id ? '#' + el.id : '') + ' right ' + Math.round(r.right));
  }
  for (const svg of document.querySelectorAll('svg[aria-label]'))
    out.charts.push({label: svg.getAttribute('aria-label'),
                     texts: [...svg.querySelectorAll('text')].map(t => t.textContent)});
  // What comes first: the headings and tables in page order, with where each starts.
  for (const el of document.body.querySelectorAll('h2, table, svg[aria-label]'))
    out.first.push({tag: el.tagName, id: el.id || '', top: el.getBoundingClientRect().top,
                    text: el.tagName === 'H2' ? el.textContent : ''});
  const sticky = document.querySelector('#summary td');
  out.sticky = sticky ? getComputedStyle(sticky).position : '';
  const pre = document.createElement('pre');
  pre.id = 'eplb-browser-check';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});</script>"""


def eplb(binary, *args):
    done = subprocess.run([binary, *args], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"eplb {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")


def open_in_browser(chromium, report, width, tmp):
    probed = os.path.join(tmp, f"probed-{width}.html")
    with open(report, encoding="utf-8") as f:
        page = f.read()
    page = page.replace("<head>", "<head>" + PROBE_HEAD, 1).replace("</body>", PROBE_TAIL + "</body>", 1)
    with open(probed, "w", encoding="utf-8") as f:
        f.write(page)
    done = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--no-first-run",
         "--disable-background-networking", "--disable-extensions",
         f"--user-data-dir={os.path.join(tmp, 'profile')}", f"--window-size={width},900",
         "--virtual-time-budget=5000", "--dump-dom", "file://" + probed],
        capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="eplb-browser-check">(.*?)</pre>', done.stdout, re.S)
    if not found:
        sys.exit(f"{report} at {width} px: Chromium gave no page ({done.returncode}):\n"
                 f"{done.stderr[-2000:]}")
    return json.loads(html.unescape(found.group(1)))


def check(report, seen, width, labels, failures):
    where = f"{report} at {width} px"
    if seen["errors"]:
        failures.append(f"{where}: errors: {seen['errors']}")
    if seen["scroll_width"] > width or seen["overflow"]:
        failures.append(f"{where}: wider than the window ({seen['scroll_width']} px): "
                        f"{seen['overflow'][:5]}")
    if not seen["charts"]:
        failures.append(f"{where}: no chart")
    for chart in seen["charts"]:
        texts = chart["texts"]
        # A title, and its axis titles: at least the title and two more texts beyond the ticks.
        if chart["label"] not in texts or len(texts) < 5:
            failures.append(f"{where}: chart {chart['label']!r} lacks its title or axes: {texts}")
        # A chart drawing every policy names each in its legend (heat maps are one a policy).
        per_policy = any(chart["label"].endswith(": " + label) for label in labels)
        if not per_policy and not chart["label"].startswith("Load per GPU"):
            missing = [label for label in labels if label not in texts]
            if missing and len(labels) > 1 and not chart["label"].startswith("Where"):
                failures.append(f"{where}: chart {chart['label']!r} has no legend entry for "
                                f"{missing}")
    return seen


def main():
    binary, scenarios = sys.argv[1], sys.argv[2]
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("SKIPPED: the reports are not opened in a browser: Chromium is not installed "
              "(tools/setup installs Debian's chromium)")
        return 77
    tiny = os.path.join(scenarios, "tiny.yaml")
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        compare = os.path.join(tmp, "compare")
        policies = ["static", "deepseek", "migration-aware"]
        eplb(binary, "compare", tiny, "--policies", ",".join(policies), "--seeds", "1,2",
             "--set", "run.steps=200", "--no-trace", "--out", compare)
        sweep = os.path.join(tmp, "sweep")
        eplb(binary, "sweep", tiny, "--vary", "eplb.step_interval=50,1000", "--set",
             "run.steps=120", "--no-trace", "--out", sweep)
        for width in (1440, 800):
            seen = check(os.path.join(compare, "report.html"),
                         open_in_browser(chromium, os.path.join(compare, "report.html"), width,
                                         tmp), width, policies, failures)
            # The answer first: the deciding table is the first table, before any chart, and
            # starts on the first screen; the full table keeps its policy column in view.
            first = [e for e in seen["first"] if e["tag"] != "H2"]
            if not first or first[0]["id"] != "decides" or first[0]["top"] > 900:
                failures.append(f"compare at {width} px: the first thing is not the deciding "
                                f"table on the first screen: {first[:2]}")
            if seen["sticky"] != "sticky":
                failures.append(f"compare at {width} px: the full table's policy column scrolls "
                                f"away ({seen['sticky']!r})")
            # Lines that coincide stay visible: each policy's line after the first is dashed
            # its own way; an axis cut above 0 says so.
            with open(os.path.join(compare, "report.html"), encoding="utf-8") as f:
                page = f.read()
            chart = page[page.index('aria-label="Balancedness over the run"'):]
            chart = chart[:chart.index("</svg>")]
            dashes = [re.search(r'stroke-dasharray="([^"]*)"', line)
                      for line in re.findall(r'<polyline class="series"[^>]*>', chart)]
            dashes = [d.group(1) if d else "" for d in dashes]
            if len(dashes) != len(policies) or len(set(dashes)) != len(dashes):
                failures.append(f"compare: the balancedness lines are not told apart: {dashes}")
            if "y axis from " not in chart:
                failures.append("compare: the balancedness chart's axis is cut without saying so")
            check(os.path.join(sweep, "report.html"),
                  open_in_browser(chromium, os.path.join(sweep, "report.html"), width, tmp),
                  width, ["deepseek"], failures)
    for failure in failures:
        print(failure)
    print(f"{len(failures)} failures" if failures else "both reports read well at 1440 and 800 px")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
