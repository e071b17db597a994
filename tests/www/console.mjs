// console.mjs - drive the web console (www/) in a real chromium, as a person
// would: the key typed in, a sandbox created, a command streamed, files
// listed, uploaded and downloaded, a port opened and the app behind it
// visited in the browser, the sandbox destroyed.
//
//   node console.mjs --url http://127.0.0.1:PORT --key KEY [--chromium PATH]
//
// Prints one JSON line (a summary the Python side checks against Docker and
// the host) and exits 0, or prints what failed and exits 1. Sends traffic to
// loopback only: the stack under test and *.sandbox.localhost (which chromium
// resolves to loopback by itself).
import { chromium } from "playwright-core";
import { createHash, randomBytes } from "node:crypto";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith("--") ? [...acc, [a.slice(2), all[i + 1]]] : acc), []),
);
const URL_ = args.url;
const KEY = args.key;
const CHROMIUM = args.chromium || "/usr/bin/chromium";
// --part code: the code cells instead (a sandbox of --python-image)
const PART = args.part || "console";
const PYTHON_IMAGE = args["python-image"] || "nanobox-python:latest";
const T = 30000; // ms for any one step
if (!URL_ || !KEY) {
  console.error("usage: node console.mjs --url URL --key KEY [--chromium PATH] [--part code [--python-image I]]");
  process.exit(2);
}

const summary = { steps: [] };
const step = (name) => summary.steps.push(name);

async function api(method, path, body) {
  const r = await fetch(URL_ + path, {
    method,
    headers: { Authorization: `Bearer ${KEY}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  return { status: r.status, text, json: () => JSON.parse(text) };
}

// The code panel: a sandbox of the code interpreter's image made from the
// form, cells run in it; what shows is read back from the page.
async function codeScenario(page) {
  const lastCell = "#cells .cell:last-child";
  // run one cell (Ctrl+Enter when asked) and wait for its end
  const runCell = async (code, { keys = false } = {}) => {
    const n = await page.$$eval("#cells .cell", (els) => els.length);
    await page.fill("#code", code);
    if (keys) await page.press("#code", "Control+Enter");
    else await page.click("#code-run");
    await page.waitForFunction((k) => document.querySelectorAll("#cells .cell").length === k + 1, n, { timeout: T });
    await page.waitForFunction(() => {
      const cells = document.querySelectorAll("#cells .cell");
      return cells[cells.length - 1].dataset.status !== "";
    }, null, { timeout: 120000 });
    const cell = await page.$eval(lastCell, (c) => ({
      status: c.dataset.status, out: c.querySelector(".cell-out").textContent, note: c.querySelector(".cell-status").textContent,
    }));
    if (cell.status === "failed") throw new Error(`cell ${JSON.stringify(code)} failed: ${cell.note}`);
    delete cell.note;
    return cell;
  };

  await page.fill("#create-image", PYTHON_IMAGE);
  await page.fill("#create-ttl", "600");
  await page.click("#create");
  await page.waitForFunction(() => document.querySelector("#detail").dataset.sandboxId, null, { timeout: 120000 });
  const sid = await page.getAttribute("#detail", "data-sandbox-id");
  summary.sandboxId = sid;
  summary.image = (await api("GET", `/sandbox/${sid}`)).json().image;
  step("created a python sandbox");

  summary.cell_set = await runCell("x = 41");
  summary.cell_get = await runCell("print(x + 1)", { keys: true });
  step("state kept");

  summary.cell_plot = await runCell("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()");
  await page.waitForFunction((sel) => {
    const img = document.querySelector(sel + " img.result-image");
    return img && img.complete;
  }, lastCell, { timeout: T });
  summary.plot_image = await page.$eval(`${lastCell} img.result-image`, (img) => ({
    naturalWidth: img.naturalWidth, naturalHeight: img.naturalHeight, src: img.src.slice(0, 22),
  }));
  step("plot shown");

  summary.cell_df = await runCell('import pandas as pd\ndf = pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]})\ndf.head()');
  const frame = page.frameLocator(`${lastCell} iframe.result-html`);
  await frame.locator("table").waitFor({ timeout: T });
  summary.df_rows = await frame.locator("table tbody tr").count();
  summary.df_text = await frame.locator("table").innerText();
  summary.df_iframe = await page.$eval(`${lastCell} iframe.result-html`, (f) => ({
    sandbox: f.getAttribute("sandbox"), srcdoc: f.hasAttribute("srcdoc"),
  }));
  // the sandbox's HTML never lands in the console's own DOM
  summary.tables_in_page = await page.$$eval("#cells table", (els) => els.length);
  step("table shown in a frame");

  summary.cell_error = await runCell("print('before')\n1 / 0");
  summary.error_text = await page.$eval(`${lastCell} .cell-error`, (e) => e.textContent);
  summary.error_color = await page.$eval(`${lastCell} .cell-error`, (e) => getComputedStyle(e).color);
  summary.stdout_color = await page.$eval(`${lastCell} .cell-stream`, (e) => getComputedStyle(e).color);
  step("error shown");

  // Interrupt: a cell that would sleep a minute is stopped from the page
  const n = await page.$$eval("#cells .cell", (els) => els.length);
  await page.fill("#code", "import time\nprint('tick', flush=True)\ntime.sleep(60)");
  await page.click("#code-run");
  await page.waitForFunction((k) => {
    const c = document.querySelectorAll("#cells .cell")[k];
    return c && c.querySelector(".cell-out").textContent.includes("tick");
  }, n, { timeout: T });
  const t0 = Date.now();
  await page.click("#code-interrupt");
  await page.waitForFunction((k) => document.querySelectorAll("#cells .cell")[k].dataset.status !== "", n, { timeout: T });
  summary.interrupt_ms = Date.now() - t0;
  summary.cell_interrupted = await page.$eval(lastCell, (c) => ({ status: c.dataset.status, out: c.querySelector(".cell-out").textContent }));
  summary.after_interrupt = await runCell("print(x)");
  step("interrupted");

  await api("DELETE", `/sandbox/${sid}`);
}

const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
let failed = null;
try {
  const context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const pageErrors = [];
  page.on("pageerror", (e) => pageErrors.push(String(e)));
  // chromium logs every 4xx answer as "Failed to load resource": those are the
  // API's answers the page handles, not errors of the page
  page.on("console", (m) => {
    // a sandboxed frame's own refusals (an HTML result's inline <style> or
    // <script> under the page's CSP and sandbox="") are the console's
    // protections working, not errors of the page
    if (m.type() === "error" && m.location().url === "about:srcdoc" && /Content Security Policy|sandboxed/.test(m.text())) return;
    if (m.type() === "error" && !/Failed to load resource/.test(m.text())) pageErrors.push("console: " + m.text());
  });

  await page.goto(URL_ + "/", { timeout: T });
  await page.waitForSelector("body[data-ready='1']", { timeout: T });
  step("loaded");

  // a wrong key: the API's own JSON error is shown, nothing is listed
  await page.fill("#key", "not-the-key");
  await page.click("#save-key");
  await page.waitForFunction(() => /unauthorized|API key/i.test(document.querySelector("#error").textContent), null, { timeout: T });
  summary.wrong_key_error = (await page.textContent("#error")).trim();
  step("wrong key refused");

  await page.fill("#key", KEY);
  await page.click("#save-key");
  await page.waitForFunction(() => /\bok\b/i.test(document.querySelector("#health").textContent), null, { timeout: T });
  step("health ok");

  if (PART === "code") {
    await codeScenario(page);
  } else {
    // create
    const before = new Set(await page.$$eval("#sandboxes [data-sandbox-id]", (els) => els.map((e) => e.dataset.sandboxId)));
    await page.fill("#create-ttl", "300");
    await page.click("#create");
    const sid = await page.waitForFunction(
      (old) => {
        const ids = [...document.querySelectorAll("#sandboxes [data-sandbox-id]")].map((e) => e.dataset.sandboxId);
        return ids.find((i) => !old.includes(i)) || null;
      },
      [...before],
      { timeout: T },
    ).then((h) => h.jsonValue());
    summary.sandboxId = sid;
    const info = (await api("GET", `/sandbox/${sid}`)).json();
    summary.created_ttl = info.ttl;
    step("created");

    // open it
    await page.click(`#sandboxes [data-sandbox-id='${sid}'] button.open`);
    await page.waitForSelector(`#detail[data-sandbox-id='${sid}']`, { timeout: T });
    step("opened");

    // a streamed command: the first line is on screen while the command still runs
    await page.fill("#cmd", "echo first; sleep 3; echo second; echo oops >&2; exit 3");
    const t0 = Date.now();
    await page.click("#run");
    await page.waitForFunction(() => document.querySelector("#output").textContent.includes("first"), null, { timeout: T });
    summary.first_output_ms = Date.now() - t0;
    summary.exit_code_while_running = (await page.textContent("#exit-code")).trim();
    await page.waitForFunction(() => document.querySelector("#exit-code").textContent.trim() !== "", null, { timeout: T });
    summary.exit_code = (await page.textContent("#exit-code")).trim();
    summary.output = await page.textContent("#output");
    summary.stderr = await page.$$eval("#output span.stderr", (els) => els.map((e) => e.textContent).join(""));
    step("streamed exec");

    // Stop: a command that would run for a minute is ended from the page
    await page.fill("#cmd", "echo long-runner-started; sleep 60");
    await page.click("#run");
    await page.waitForFunction(() => document.querySelector("#output").textContent.includes("long-runner-started"), null, { timeout: T });
    await page.click("#stop");
    // the server kills a streamed command whose client went away: look from the API
    const ps = "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c '^sleep 60' || true";
    for (const until = Date.now() + 10000; ; ) {
      const left = await api("POST", `/sandbox/${sid}/exec`, { command: ps });
      summary.sleeps_left_after_stop = left.json().stdout.trim();
      if (summary.sleeps_left_after_stop === "0" || Date.now() > until) break;
      await page.waitForTimeout(200);
    }
    step("stopped");

    // files: list, enter a directory, upload, download, delete
    let r = await api("POST", `/sandbox/${sid}/exec`, { command: "mkdir -p /workspace/sub && printf hello > /workspace/hello.txt && printf inner > /workspace/sub/inner.txt" });
    if (r.status !== 200) throw new Error(`exec for files: ${r.status} ${r.text}`);
    await page.fill("#path", "/workspace");
    await page.click("#list");
    await page.waitForSelector("#files [data-name='hello.txt'][data-type='file']", { timeout: T });
    await page.waitForSelector("#files [data-name='sub'][data-type='dir']", { timeout: T });
    step("listed");

    const upload = randomBytes(200 * 1024);
    summary.upload_sha256 = createHash("sha256").update(upload).digest("hex");
    await page.setInputFiles("#upload", { name: "up.bin", mimeType: "application/octet-stream", buffer: upload });
    // the listing shows it once the PUT is done (click List again until it does)
    const deadline = Date.now() + T;
    for (;;) {
      if (await page.$("#files [data-name='up.bin']")) break;
      if (Date.now() > deadline) throw new Error("uploaded file never listed");
      await page.waitForTimeout(300);
      await page.click("#list");
    }
    r = await fetch(`${URL_}/sandbox/${sid}/files?path=/workspace/up.bin`, { headers: { Authorization: `Bearer ${KEY}` } });
    const back = Buffer.from(await r.arrayBuffer());
    summary.upload_roundtrip_sha256 = createHash("sha256").update(back).digest("hex");
    step("uploaded");

    const row = await page.$("#files [data-name='hello.txt']");
    const [download] = await Promise.all([
      page.waitForEvent("download", { timeout: T }),
      row.$eval(".download", (el) => el.click()),
    ]);
    const chunks = [];
    for await (const c of await download.createReadStream()) chunks.push(c);
    summary.download_name = download.suggestedFilename();
    summary.download = Buffer.concat(chunks).toString();
    step("downloaded");

    await page.click("#files [data-name='sub']");
    await page.waitForSelector("#files [data-name='inner.txt']", { timeout: T });
    summary.path_after_enter = await page.inputValue("#path");
    step("entered a directory");

    // ports: an app started in the background, opened from the page, visited in the browser
    r = await api("POST", `/sandbox/${sid}/exec`, {
      command: "cd /workspace && exec python3 -m http.server 8000 --bind 127.0.0.1",
      background: true,
    });
    if (r.status !== 200 && r.status !== 201) throw new Error(`background server: ${r.status} ${r.text}`);
    await page.fill("#port", "8000");
    await page.fill("#duration", "120");
    await page.click("#open-port");
    await page.waitForSelector("#ports [data-port='8000'] a.port-url", { timeout: T });
    summary.port_url = await page.getAttribute("#ports [data-port='8000'] a.port-url", "href");
    const app = await context.newPage();
    let text = "";
    for (const until = Date.now() + T; Date.now() < until; ) {
      try {
        const resp = await app.goto(summary.port_url, { timeout: 5000 });
        text = await app.content();
        if (resp && resp.status() === 200 && text.includes("hello.txt")) break;
      } catch (e) {
        text = String(e);
      }
      await app.waitForTimeout(300);
    }
    summary.port_page_has_listing = text.includes("hello.txt");
    await app.close();
    step("visited the port");

    await page.click("#ports [data-port='8000'] button.close");
    await page.waitForFunction(() => !document.querySelector("#ports [data-port='8000']"), null, { timeout: T });
    summary.ports_after_close = (await api("GET", `/sandbox/${sid}/ports`)).json();
    step("closed the port");

    // an API error from a page action is shown, not swallowed: a port out of range
    await page.fill("#port", "70000");
    await page.fill("#duration", "60");
    await page.click("#open-port");
    await page.waitForFunction(() => /out_of_range|422/.test(document.querySelector("#error").textContent), null, { timeout: T });
    summary.bad_port_error = (await page.textContent("#error")).trim();
    step("bad port shown");

    // destroy
    await page.click("#destroy");
    await page.waitForFunction((id) => !document.querySelector(`#sandboxes [data-sandbox-id='${id}']`), sid, { timeout: T });
    summary.status_after_destroy = (await api("GET", `/sandbox/${sid}`)).status;
    step("destroyed");

  }

  summary.page_errors = pageErrors;
} catch (e) {
  failed = e;
} finally {
  await browser.close();
}
if (failed) {
  console.error(`console.mjs failed after steps ${JSON.stringify(summary.steps)}: ${failed.stack || failed}`);
  console.log(JSON.stringify(summary));
  process.exit(1);
}
console.log(JSON.stringify(summary));
