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
// --part templates: the template built (and deleted) under this name; --part snapshot: the snapshot's
const TEMPLATE = args["template-name"] || "";
const BASE_IMAGE = args["base-image"] || "nanobox:latest";
// --part layout: full-page screenshots written here, <view>-<width>.png
const SHOTS = args.shots || "";
// --part terminal: the terminal in sandbox --sandbox; --vim: how to run vim there
const T = 30000; // ms for any one step
if (!URL_ || !KEY) {
  console.error("usage: node console.mjs --url URL --key KEY [--chromium PATH] [--part console|code|manage|templates|snapshot|layout|terminal|screen|volumes]\n" +
    "  [--python-image I] [--template-name N --base-image I] [--shots DIR] [--sandbox ID [--vim CMD]]");
  process.exit(2);
}

const summary = { steps: [], sandboxIds: [] };
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
  // its chart, from the kernel's data, under the picture (folded: the picture shows it)
  summary.plot_chart = await page.$eval(`${lastCell} details.result-chart`, (d) => ({
    open: d.open, summary: d.querySelector("summary").textContent, data: d.querySelector("pre").textContent,
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

  // the sandbox's typescript session, picked from the list: types erased, state kept
  await page.selectOption("#code-context", "typescript");
  summary.ts_set = await runCell("interface P { x: number }\nconst p: P = { x: 6 }");
  summary.ts_get = await runCell("console.log(p.x * 7)");
  step("typescript");

  await api("DELETE", `/sandbox/${sid}`);
}

// The sandbox ids in the list, in the order shown, the hidden ones left out.
const shownIds = (page) => page.$$eval("#sandboxes [data-sandbox-id]", (els) => els.filter((e) => !e.hidden).map((e) => e.dataset.sandboxId));

// Answer the next confirm() with yes or no; resolves to its message.
const nextDialog = (page, accept) => new Promise((resolve) => {
  page.once("dialog", async (d) => {
    const msg = d.message();
    if (accept) await d.accept(); else await d.dismiss();
    resolve(msg);
  });
});

// The list, sorted newest first and narrowed by the filter; pause and resume
// of the open sandbox through its buttons, its state on the page and in the API.
async function manageScenario(page) {
  const tag = randomBytes(4).toString("hex");
  const mk = async (who) => {
    const r = await api("POST", "/sandbox", { ttl: 300, metadata: { owner: `www-${who}-${tag}`, batch: `b-${tag}` } });
    if (r.status !== 201) throw new Error(`create: ${r.status} ${r.text}`);
    const id = r.json().sandboxId;
    summary.sandboxIds.push(id);
    return id;
  };
  const a = await mk("a");
  await new Promise((res) => setTimeout(res, 1100));   // created_at is in seconds
  const b = await mk("b");
  summary.older = a;
  summary.newer = b;
  await page.click("#refresh");
  await page.waitForFunction(([x, y]) => document.querySelector(`#sandboxes [data-sandbox-id='${x}']`) &&
    document.querySelector(`#sandboxes [data-sandbox-id='${y}']`), [a, b], { timeout: T });
  summary.order = (await shownIds(page)).filter((i) => i === a || i === b);
  step("sorted");

  const filtered = async (text) => {
    await page.fill("#filter", text);
    return { ids: await shownIds(page), count: (await page.textContent("#sandboxes-count")).trim() };
  };
  summary.filter_meta = await filtered(`owner=www-a-${tag}`);
  summary.filter_id = await filtered(b.slice(0, 13).toUpperCase());
  summary.filter_batch = await filtered(`b-${tag}`);
  summary.filter_none = await filtered(`nothing-${tag}`);
  summary.filter_none_text = (await page.textContent("#sandboxes-empty")).trim();
  summary.filter_none_visible = await page.isVisible("#sandboxes-empty");
  summary.filter_cleared = (await filtered("")).ids.length;
  step("filtered");

  await page.click(`#sandboxes [data-sandbox-id='${b}'] button.open`);
  await page.waitForSelector(`#detail[data-sandbox-id='${b}'][data-state='running']`, { timeout: T });
  summary.resume_hidden_while_running = await page.isHidden("#resume");
  const badgeBg = (sel) => page.$eval(sel, (e) => getComputedStyle(e).backgroundColor);
  summary.running_badge_bg = await badgeBg(`#sandboxes [data-sandbox-id='${b}'] .sb-status`);
  await page.click("#pause");
  await page.waitForSelector(`#detail[data-state='paused']`, { timeout: T });
  await page.waitForSelector(`#sandboxes [data-sandbox-id='${b}'][data-state='paused']`, { timeout: T });
  summary.paused_api_state = (await api("GET", `/sandbox/${b}`)).json().state;
  summary.paused_list_badge = (await page.textContent(`#sandboxes [data-sandbox-id='${b}'] .sb-status`)).trim();
  summary.paused_badge_bg = await badgeBg(`#sandboxes [data-sandbox-id='${b}'] .sb-status`);
  summary.paused_detail_badge = (await page.textContent("#detail-state")).trim();
  summary.paused_note_visible = await page.isVisible("#paused-note");
  summary.pause_hidden_while_paused = await page.isHidden("#pause");
  // a command on the paused sandbox: the API's 409 is shown
  await page.fill("#cmd", "echo hi");
  await page.click("#run");
  await page.waitForFunction(() => /paused/.test(document.querySelector("#error").textContent), null, { timeout: T });
  summary.exec_while_paused_error = (await page.textContent("#error")).trim();
  step("paused");

  await page.click("#resume");
  await page.waitForSelector(`#detail[data-state='running']`, { timeout: T });
  await page.waitForSelector(`#sandboxes [data-sandbox-id='${b}'][data-state='running']`, { timeout: T });
  summary.resumed_api_state = (await api("GET", `/sandbox/${b}`)).json().state;
  summary.paused_note_after_resume = await page.isVisible("#paused-note");
  await page.click("#run");
  await page.waitForFunction(() => document.querySelector("#exit-code").textContent.trim() !== "", null, { timeout: T });
  summary.exec_after_resume = { exit: (await page.textContent("#exit-code")).trim(), output: await page.textContent("#output") };
  step("resumed");

  for (const id of [a, b]) await api("DELETE", `/sandbox/${id}`);
}

// The Templates page: a Dockerfile built from the form, its log streaming
// in, "ready", a sandbox created from it, the template deleted (after a
// confirmation, declined once).
// The Volumes card (Templates page): a volume made through the API listed
// there, and mounted from the create form's Volumes field (name:/path); a
// malformed field is refused before any request.
async function volumesScenario(page) {
  if (!TEMPLATE) throw new Error("--part volumes needs --template-name (the volume's name)");
  const r = await api("POST", "/volumes", { name: TEMPLATE, size: "16m" });
  if (r.status !== 201) throw new Error(`POST /volumes -> ${r.status} ${r.text}`);
  await page.click("#nav-templates");
  await page.waitForSelector(`#volumes [data-volume='${TEMPLATE}']`, { timeout: T });
  summary.volume_item = (await page.textContent(`#volumes [data-volume='${TEMPLATE}']`)).trim();
  step("volume listed");
  await page.click("#nav-sandboxes");
  await page.waitForSelector("#view-sandboxes:not([hidden])", { timeout: T });
  await page.fill("#create-volumes", `${TEMPLATE}:/data`);
  await page.click("#create");
  await page.waitForFunction(() => document.querySelector("#detail").dataset.sandboxId, null, { timeout: 120000 });
  const sid = await page.getAttribute("#detail", "data-sandbox-id");
  summary.sandboxIds.push(sid);
  const ex = (await api("POST", `/sandbox/${sid}/exec`, { command: "df -k /data | tail -1; touch /data/ok && ls /data" })).json();
  summary.df = ex.stdout;
  step("mounted from the form");
  await page.fill("#create-volumes", "nope");
  await page.click("#create");
  await page.waitForFunction(() => /name:\/path/.test(document.querySelector("#error").textContent), null, { timeout: T });
  summary.bad_error = (await page.textContent("#error")).trim();
  summary.sandboxes_after_bad = (await api("GET", "/sandbox")).json().sandboxes.length;
  step("a bad field refused");
}

async function templatesScenario(page) {
  if (!TEMPLATE) throw new Error("--part templates needs --template-name");
  await page.click("#nav-templates");
  await page.waitForSelector("#view-templates:not([hidden])", { timeout: T });
  await page.waitForSelector(`#templates [data-template='${BASE_IMAGE.split(":")[0]}'][data-kind='image']`, { timeout: T });
  summary.hash = await page.evaluate(() => location.hash);
  summary.operator_template_has_delete = !!(await page.$(`#templates [data-template='${BASE_IMAGE.split(":")[0]}'] button.delete`));
  step("templates listed");

  // every change of the log pane: how much text, and the status shown then
  await page.evaluate(() => {
    window.__logSeen = [];
    const log = document.querySelector("#template-log");
    const st = document.querySelector("#template-log-status");
    new MutationObserver(() => {
      window.__logSeen.push({ t: Date.now(), len: log.textContent.length, status: st.dataset.status });
    }).observe(log, { childList: true, subtree: true, characterData: true });
  });
  await page.fill("#tpl-name", TEMPLATE);
  await page.fill("#tpl-dockerfile", `FROM ${BASE_IMAGE}
RUN echo hi > /etc/x
`);
  const t0 = Date.now();
  await page.click("#tpl-build");
  await page.waitForFunction(() => /Step 1/.test(document.querySelector("#template-log").textContent), null, { timeout: T });
  summary.first_log_ms = Date.now() - t0;
  summary.status_at_first_log = await page.getAttribute("#template-log-status", "data-status");
  summary.listed_while_building = await page.$eval(`#templates [data-template='${TEMPLATE}']`, (e) => e.dataset.status).catch(() => "");
  await page.waitForFunction(() => document.querySelector("#template-log-status").dataset.status !== "", null, { timeout: 180000 });
  summary.log_end_status = await page.getAttribute("#template-log-status", "data-status");
  summary.log_text = await page.textContent("#template-log");
  summary.log_seen = await page.evaluate(() => window.__logSeen);
  summary.name_after_build = await page.inputValue("#tpl-name");
  await page.waitForSelector(`#templates [data-template='${TEMPLATE}'][data-status='ready']`, { timeout: T });
  summary.item_text = (await page.textContent(`#templates [data-template='${TEMPLATE}']`)).trim();
  summary.api_template = (await api("GET", `/templates/${TEMPLATE}`)).json();
  step("built");

  // the page at a phone's width with a built template listed and its log shown
  await page.setViewportSize({ width: 375, height: 800 });
  await page.waitForTimeout(300);
  summary.layout_375 = await page.evaluate(measureLayout);
  if (SHOTS) await page.screenshot({ path: `${SHOTS}/templates-built-375.png`, fullPage: true });
  await page.setViewportSize({ width: 1280, height: 900 });
  step("measured at 375 px");

  await page.click(`#templates [data-template='${TEMPLATE}'] button.create-from`);
  await page.waitForSelector("#view-sandboxes:not([hidden])", { timeout: T });
  await page.waitForFunction(() => document.querySelector("#detail").dataset.sandboxId, null, { timeout: 120000 });
  const sid = await page.getAttribute("#detail", "data-sandbox-id");
  summary.sandboxIds.push(sid);
  summary.sandbox_image = (await api("GET", `/sandbox/${sid}`)).json().image;
  await page.fill("#cmd", "cat /etc/x");
  await page.click("#run");
  await page.waitForFunction(() => document.querySelector("#exit-code").textContent.trim() !== "", null, { timeout: T });
  summary.cat_output = await page.textContent("#output");
  step("sandbox from the template");

  // destroyed from the list, after saying yes; then the template goes
  let msg = nextDialog(page, true);
  await page.click(`#sandboxes [data-sandbox-id='${sid}'] button.destroy`);
  summary.destroy_dialog = await msg;
  await page.waitForFunction((id) => !document.querySelector(`#sandboxes [data-sandbox-id='${id}']`), sid, { timeout: T });
  await page.click("#nav-templates");
  await page.waitForSelector(`#templates [data-template='${TEMPLATE}']`, { timeout: T });
  msg = nextDialog(page, false);
  await page.click(`#templates [data-template='${TEMPLATE}'] button.delete`);
  summary.delete_dialog = await msg;
  await page.waitForTimeout(500);
  summary.status_after_no = (await api("GET", `/templates/${TEMPLATE}`)).status;
  msg = nextDialog(page, true);
  await page.click(`#templates [data-template='${TEMPLATE}'] button.delete`);
  await msg;
  await page.waitForFunction((n) => !document.querySelector(`#templates [data-template='${n}']`), TEMPLATE, { timeout: T });
  summary.status_after_yes = (await api("GET", `/templates/${TEMPLATE}`)).status;
  step("deleted");
}

// Snapshot (--part snapshot, under --template-name): files written in a
// sandbox, its Snapshot button (the name prompt dismissed once: nothing
// made), the template shown under the card and measured at 375 and 1440 px,
// then listed on the Templates page and chosen in the create form; the new
// sandbox has the files.
async function snapshotScenario(page) {
  if (!TEMPLATE) throw new Error("--part snapshot needs --template-name");
  const tag = randomBytes(6).toString("hex");
  const r = await api("POST", "/sandbox", { ttl: 300, metadata: { owner: `www-snap-${tag}` } });
  if (r.status !== 201) throw new Error(`create: ${r.status} ${r.text}`);
  const src = r.json().sandboxId;
  summary.sandboxIds.push(src);
  summary.source = src;
  summary.tag = tag;
  const prep = await api("POST", `/sandbox/${src}/exec`, { command: `printf ${tag} > /workspace/kept.txt && printf tmp-${tag} > /tmp/kept-tmp.txt` });
  if (prep.status !== 200) throw new Error(`prep: ${prep.status} ${prep.text}`);
  await page.click("#refresh");
  await page.click(`#sandboxes [data-sandbox-id='${src}'] button.open`);
  await page.waitForSelector(`#detail[data-sandbox-id='${src}'][data-state='running']`, { timeout: T });
  summary.result_hidden_before = await page.isHidden("#snapshot-result");
  step("opened");

  // the prompt dismissed: nothing is made
  const count = async () => (await api("GET", "/templates")).json().templates.length;
  summary.templates_before = await count();
  let asked = new Promise((resolve) => page.once("dialog", async (d) => { resolve({ type: d.type(), message: d.message() }); await d.dismiss(); }));
  await page.click("#snapshot");
  summary.prompt = await asked;
  await page.waitForTimeout(500);
  summary.templates_after_cancel = await count();
  summary.result_hidden_after_cancel = await page.isHidden("#snapshot-result");
  step("cancelled");

  // named: the template, once ready, under the card
  asked = new Promise((resolve) => page.once("dialog", async (d) => { await d.accept(` ${TEMPLATE} `); resolve(); }));
  const t0 = Date.now();
  await page.click("#snapshot");
  await asked;
  await page.waitForSelector(`#snapshot-result[data-template='${TEMPLATE}']`, { timeout: 120000 });
  summary.snapshot_ms = Date.now() - t0;
  summary.result_text = (await page.textContent("#snapshot-result")).trim();
  summary.result_status = await page.getAttribute("#snapshot-result", "data-status");
  summary.api_template = (await api("GET", `/templates/${TEMPLATE}`)).json();
  summary.source_state_after = (await api("GET", `/sandbox/${src}`)).json().state;
  summary.in_create_list = await page.$eval("#template-names", (dl, n) => [...dl.options].some((o) => o.value === n), TEMPLATE);
  step("snapshot shown");

  summary.layout = {};
  for (const width of [1440, 375]) {
    await page.setViewportSize({ width, height: 800 });
    await page.waitForTimeout(300);
    summary.layout[width] = await page.evaluate(measureLayout);
    summary.layout[width].result = await page.$eval("#snapshot-result", (e) => {
      const b = e.getBoundingClientRect();
      return { left: Math.round(b.left), right: Math.round(b.right), button: Math.round(e.querySelector("button").getBoundingClientRect().right) };
    });
    if (SHOTS) await page.screenshot({ path: `${SHOTS}/snapshot-${width}.png`, fullPage: true });
  }
  await page.setViewportSize({ width: 1280, height: 900 });
  step("measured");

  // on the Templates page, as a snapshot, with its Delete button
  await page.click("#nav-templates");
  await page.waitForSelector(`#templates [data-template='${TEMPLATE}'][data-kind='snapshot'][data-status='ready']`, { timeout: T });
  summary.listed_text = (await page.textContent(`#templates [data-template='${TEMPLATE}']`)).trim();
  summary.listed_has_delete = !!(await page.$(`#templates [data-template='${TEMPLATE}'] button.delete`));
  summary.listed_has_log = !!(await page.$(`#templates [data-template='${TEMPLATE}'] button.log`));
  await page.click("#nav-sandboxes");
  await page.waitForSelector("#view-sandboxes:not([hidden])", { timeout: T });
  step("listed");

  // chosen at create: a new sandbox with the files
  await page.fill("#create-template", TEMPLATE);
  await page.fill("#create-ttl", "300");
  await page.click("#create");
  await page.waitForFunction((s) => { const id = document.querySelector("#detail").dataset.sandboxId; return id && id !== s; }, src, { timeout: 120000 });
  const kid = await page.getAttribute("#detail", "data-sandbox-id");
  summary.sandboxIds.push(kid);
  summary.child = kid;
  summary.child_image = (await api("GET", `/sandbox/${kid}`)).json().image;
  summary.result_hidden_on_child = await page.isHidden("#snapshot-result");
  await page.fill("#cmd", "cat /workspace/kept.txt; echo; cat /tmp/kept-tmp.txt");
  await page.click("#run");
  await page.waitForFunction(() => document.querySelector("#exit-code").textContent.trim() !== "", null, { timeout: T });
  summary.child_output = await page.textContent("#output");
  step("created from it");

  for (const id of [src, kid]) await api("DELETE", `/sandbox/${id}`);
}

// What the page looks like at a phone's width and a wide screen: nothing
// sticks out of the viewport, nothing scrolls sideways, no two buttons
// overlap, every Delete/Destroy button can be reached. Geometry, not pixels.
function measureLayout() {
  const vw = document.documentElement.clientWidth;
  const visible = (e) => {
    if (!e.getClientRects().length) return false;
    const r = e.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility !== "hidden";
  };
  // inside a box that scrolls or clips, an element may go past its edge
  const clipped = (e) => {
    for (let p = e.parentElement; p && p !== document.body; p = p.parentElement) {
      if (getComputedStyle(p).overflowX !== "visible") return true;
    }
    return false;
  };
  const name = (e) => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") +
    (e.className && typeof e.className === "string" ? "." + e.className.trim().split(/\s+/).join(".") : "");
  const outside = [];
  const scope = [...document.querySelectorAll("header.topbar, #error-box, main:not([hidden])")];
  for (const root of scope) {
    for (const e of [root, ...root.querySelectorAll("*")]) {
      if (!visible(e) || e.closest(".visually-hidden") || clipped(e)) continue;
      const r = e.getBoundingClientRect();
      if (r.left < -0.5 || r.right > vw + 0.5) outside.push(`${name(e)} ${Math.round(r.left)}..${Math.round(r.right)}`);
    }
  }
  const buttons = [...document.querySelectorAll("main:not([hidden]) button, header button, main:not([hidden]) .button-like")].filter(visible);
  const overlaps = [];
  for (let i = 0; i < buttons.length; i++) {
    for (let j = i + 1; j < buttons.length; j++) {
      const a = buttons[i].getBoundingClientRect(), b = buttons[j].getBoundingClientRect();
      const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
      const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (w > 1 && h > 1) overlaps.push(`${name(buttons[i])} / ${name(buttons[j])}`);
    }
  }
  const deletes = [...document.querySelectorAll("main:not([hidden]) button.delete, main:not([hidden]) button.destroy, main:not([hidden]) #destroy")]
    .filter(visible).map((e) => {
      const r = e.getBoundingClientRect();
      return { what: name(e), left: Math.round(r.left), right: Math.round(r.right), width: Math.round(r.width) };
    });
  return {
    viewport: vw,
    scrollWidth: document.documentElement.scrollWidth,
    bodyScrollWidth: document.body.scrollWidth,
    outside: outside.slice(0, 30),
    overlaps: overlaps.slice(0, 30),
    deletes,
  };
}

async function layoutScenario(browser) {
  if (!SHOTS) throw new Error("--part layout needs --shots DIR");
  const tag = randomBytes(4).toString("hex");
  const r = await api("POST", "/sandbox", { ttl: 300, metadata: { owner: `www-layout-${tag}`, purpose: "a rather long metadata value to see how it wraps on a phone" } });
  if (r.status !== 201) throw new Error(`create: ${r.status} ${r.text}`);
  const sid = r.json().sandboxId;
  summary.sandboxIds.push(sid);
  const long = "a-file-with-a-rather-long-name-that-does-not-fit-on-a-phone-" + "x".repeat(40) + ".txt";
  const prep = await api("POST", `/sandbox/${sid}/exec`, {
    command: `mkdir -p /workspace/some-directory && printf hi > /workspace/${long} && printf hello > /workspace/hello.txt`,
  });
  if (prep.status !== 200) throw new Error(`prep: ${prep.status} ${prep.text}`);
  summary.layout = {};
  for (const width of [1440, 375]) {
    const context = await browser.newContext({ viewport: { width, height: 800 }, deviceScaleFactor: 1 });
    const page = await context.newPage();
    page.on("pageerror", (e) => summary.page_errors_layout.push(String(e)));
    await page.goto(URL_ + "/", { timeout: T });
    await page.waitForSelector("body[data-ready='1']", { timeout: T });
    await page.fill("#key", KEY);
    await page.click("#save-key");
    await page.click(`#sandboxes [data-sandbox-id='${sid}'] button.open`);
    await page.waitForSelector(`#files [data-name='${long}']`, { timeout: T });
    // a long line without spaces, and a failing exit code
    await page.fill("#cmd", "printf '%0300d\n' 7; ls -la /workspace; exit 1");
    await page.click("#run");
    await page.waitForFunction(() => document.querySelector("#exit-code").textContent.trim() === "1", null, { timeout: T });
    await page.waitForTimeout(300);
    const m = { sandboxes: await page.evaluate(measureLayout) };
    await page.screenshot({ path: `${SHOTS}/sandboxes-${width}.png`, fullPage: true });
    await page.click("#nav-templates");
    await page.waitForSelector("#templates [data-template]", { timeout: T });
    await page.waitForTimeout(300);
    m.templates = await page.evaluate(measureLayout);
    await page.screenshot({ path: `${SHOTS}/templates-${width}.png`, fullPage: true });
    summary.layout[width] = m;
    await context.close();
  }
  step("layout measured");
  await api("DELETE", `/sandbox/${sid}`);
}

// The terminal (--part terminal, in the sandbox --sandbox): a shell on a PTY
// drawn by xterm.js; what is on the screen is read from its DOM rows (the
// rows the page shows, not the scrollback).
const screenRows = (page) => page.$$eval("#terminal .xterm-rows > div", (rows) => rows.map((r) => r.textContent.replace(/\u00a0/g, " ").replace(/\s+$/, "")));
const waitScreen = async (page, fn, what, timeout = T) => {
  const t0 = Date.now();
  for (;;) {
    const rows = await screenRows(page);
    const got = fn(rows);
    if (got) return got;
    if (Date.now() - t0 > timeout) throw new Error(`${what}: not on the screen after ${timeout} ms:\n${rows.join("\n")}`);
    await page.waitForTimeout(100);
  }
};
// type a line into the terminal, as keys
const typeLine = async (page, line) => {
  await page.keyboard.type(line, { delay: 5 });
  await page.keyboard.press("Enter");
};

// The screen of a desktop sandbox (--sandbox, whose display :0 runs with a
// terminal at its top left writing what it reads to /tmp/keys.txt): shown
// live, then interactive: a click on the picture moves the pointer there,
// keys typed on it reach the terminal.
async function screenScenario(page) {
  const sid = args.sandbox;
  if (!sid) throw new Error("--part screen needs --sandbox ID");
  summary.sandboxId = sid;
  await page.click(`#sandboxes [data-sandbox-id='${sid}'] button.open`);
  await page.waitForSelector(`#detail[data-sandbox-id='${sid}']`, { timeout: T });
  await page.click("#screen-show");
  await page.waitForFunction(() => Number(document.querySelector("#screen").dataset.shots || 0) >= 3, null, { timeout: T });
  summary.screen_state = (await page.textContent("#screen-state")).trim();
  summary.screen_size = await page.$eval("#screen", (i) => ({ width: i.naturalWidth, height: i.naturalHeight }));
  step("screen live");

  // view-only: a click changes nothing
  const where = async () => (await api("POST", `/sandbox/${sid}/exec`, { command: "DISPLAY=:0 xdotool getmouselocation" })).json().stdout;
  const box = await page.$eval("#screen", (i) => { const r = i.getBoundingClientRect(); return { x: r.left, y: r.top, w: r.width, h: r.height }; });
  const before = await where();
  await page.mouse.click(box.x + box.w / 2, box.y + box.h / 2);
  await page.waitForTimeout(500);
  summary.view_only_pointer_unchanged = (await where()) === before;

  await page.check("#screen-interactive");
  // a point on the picture, as a fraction of it: the same fraction of the screen
  await page.mouse.click(box.x + box.w * 0.25, box.y + box.h * 0.2);
  const want = [Math.round(summary.screen_size.width * 0.25), Math.round(summary.screen_size.height * 0.2)];
  let got = "";
  for (let i = 0; i < 50 && !got.includes(`x:${want[0]} y:${want[1]}`); i++) {
    // rounding of the page's layout: a pixel either way
    got = await where();
    const m = got.match(/x:(\d+) y:(\d+)/);
    if (m && Math.abs(Number(m[1]) - want[0]) <= 1 && Math.abs(Number(m[2]) - want[1]) <= 1) break;
    await page.waitForTimeout(100);
  }
  summary.pointer = { want, got: got.trim() };
  step("clicked");
  await page.keyboard.type("hi there", { delay: 30 });
  await page.keyboard.press("Enter");
  let typed = "";
  for (let i = 0; i < 150 && !typed.includes("\n"); i++) {
    typed = (await api("POST", `/sandbox/${sid}/exec`, { command: "cat /tmp/keys.txt 2>/dev/null" })).json().stdout;
    await page.waitForTimeout(100);
  }
  summary.typed = typed;
  step("typed");
  await page.click("#screen-stop");
  summary.shots_after_stop = await page.$eval("#screen", (i) => Number(i.dataset.shots));
  await page.waitForTimeout(1000);
  summary.shots_later = await page.$eval("#screen", (i) => Number(i.dataset.shots));
  step("stopped");
}

async function terminalScenario(page) {
  const sid = args.sandbox;
  if (!sid) throw new Error("--part terminal needs --sandbox ID");
  summary.sandboxId = sid;
  await page.click(`#sandboxes [data-sandbox-id='${sid}'] button.open`);
  await page.waitForSelector(`#detail[data-sandbox-id='${sid}']`, { timeout: T });
  summary.terminal_state_before = await page.getAttribute("#terminal", "data-state");
  await page.click("#term-open");
  await page.waitForSelector("#terminal[data-state='open']", { timeout: T });
  summary.pid = Number(await page.getAttribute("#terminal", "data-pid"));
  await waitScreen(page, (rows) => rows.some((r) => /[$#] ?$/.test(r)), "a prompt");
  summary.xterm_rows_styled = await page.$eval("#terminal .xterm-rows > div", (r) => r.getBoundingClientRect().height);
  await page.click("#terminal");
  step("terminal open");

  await typeLine(page, "echo $((6*7))");
  await waitScreen(page, (rows) => rows.includes("42"), "42");
  summary.echo_rows = (await screenRows(page)).filter((r) => r.includes("6*7") || r === "42");
  step("typed");

  // a full-screen program: vim's ~ lines and its last line, then :q!
  if (args.vim) {
    await typeLine(page, `clear; ${args.vim}`);
    summary.vim_screen = await waitScreen(page, (rows) => {
      const tildes = rows.filter((r) => r === "~").length;
      return tildes >= 5 && rows.some((r) => r.includes("hello.txt")) ? rows : null;
    }, "vim's screen");
    summary.vim_first_row = summary.vim_screen[0];
    summary.vim_tildes = summary.vim_screen.filter((r) => r === "~").length;
    summary.vim_last_row = summary.vim_screen.filter((r) => r !== "").pop();
    await page.keyboard.type(":q!", { delay: 20 });
    await page.keyboard.press("Enter");
    await waitScreen(page, (rows) => rows.filter((r) => r === "~").length === 0, "vim gone");
    await typeLine(page, "echo vim-exit=$?");
    await waitScreen(page, (rows) => rows.includes("vim-exit=0"), "vim's exit code");
    step("vim drawn and quit");
  }

  // the PTY's size is the box's: stty size answers what the page sent
  const sttySize = async (tag) => {
    await typeLine(page, `clear; echo ${tag}=$(stty size)`);
    const row = await waitScreen(page, (rows) => rows.find((r) => r.startsWith(`${tag}=`) && /=\d+ \d+$/.test(r)), `stty size (${tag})`);
    const [rows, cols] = row.split("=")[1].split(" ").map(Number);
    return { rows, cols };
  };
  const shown = async () => ({
    rows: Number(await page.getAttribute("#terminal", "data-rows")),
    cols: Number(await page.getAttribute("#terminal", "data-cols")),
  });
  summary.sizes = {};
  for (const [width, height] of [[1440, 900], [375, 700], [900, 500]]) {
    const before = await page.getAttribute("#terminal", "data-cols") + "x" + await page.getAttribute("#terminal", "data-rows");
    await page.setViewportSize({ width, height });
    // the fit addon refits; the new size is sent to the PTY (data-cols/rows once answered)
    await page.waitForFunction((b) => {
      const t = document.querySelector("#terminal");
      return t.dataset.cols + "x" + t.dataset.rows !== b;
    }, before, { timeout: T });
    await page.waitForTimeout(300);
    const s = { page: await shown(), stty: await sttySize(`size${width}`) };
    s.box = await page.$eval("#terminal", (t) => ({ width: t.clientWidth, height: t.clientHeight }));
    if (width === 1440 || width === 375) {
      await page.waitForTimeout(200);
      s.layout = await page.evaluate(measureLayout);
      if (SHOTS) await page.screenshot({ path: `${SHOTS}/terminal-${width}.png`, fullPage: true });
    }
    summary.sizes[width] = s;
  }
  step("resized");

  // the shell's exit code shows, marked when not 0
  await typeLine(page, "exit 3");
  await page.waitForSelector("#terminal[data-state='exited']", { timeout: T });
  summary.exit_code = (await page.textContent("#term-exit")).trim();
  summary.exit_bad = await page.$eval("#term-exit", (e) => e.classList.contains("bad"));
  summary.open_enabled_after_exit = await page.$eval("#term-open", (b) => !b.disabled);
  step("exited");

  // Typed ahead: keys pressed before the session started (its exec is held
  // back until they are typed, so the terminal is still "connecting") wait
  // in the page and reach the shell once it has a pid
  let release;
  const typed = new Promise((r) => { release = r; });
  await page.route("**/sandbox/*/exec", async (route) => {
    await typed;
    await route.continue();
  });
  await page.click("#term-open");
  await page.waitForSelector("#terminal .xterm-helper-textarea", { state: "attached", timeout: T });
  await page.click("#terminal");
  await typeLine(page, "echo typed-$((40+2))");
  summary.typed_ahead_state = await page.getAttribute("#terminal", "data-state");
  release(); // (later execs pass at once)
  await waitScreen(page, (rows) => rows.includes("typed-42"), "the typed-ahead line's answer");
  await typeLine(page, "exit 0");
  await page.waitForSelector("#terminal[data-state='exited']", { timeout: T });
  step("typed ahead");

  // Hang up: a second session, something running in it, the stream dropped
  await page.click("#term-open");
  await page.waitForSelector("#terminal[data-state='open']", { timeout: T });
  await waitScreen(page, (rows) => rows.some((r) => /[$#] ?$/.test(r)), "a prompt again");
  await page.click("#terminal");
  await typeLine(page, "sleep 4242");
  const running = async () => (await api("POST", `/sandbox/${sid}/exec`, { command: "ps -eo args | grep -c '^sleep 424[2]' || true" })).json().stdout.trim();
  const t0 = Date.now();
  while ((summary.sleeps_before_hangup = await running()) !== "1" && Date.now() - t0 < T) await page.waitForTimeout(200);
  await page.click("#term-close");
  summary.state_after_hangup = await page.getAttribute("#terminal", "data-state");
  const t1 = Date.now();
  while ((summary.sleeps_after_hangup = await running()) !== "0" && Date.now() - t1 < T) await page.waitForTimeout(200);
  step("hung up");
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

  summary.page_errors_layout = [];
  if (PART === "code") {
    await codeScenario(page);
  } else if (PART === "manage") {
    await manageScenario(page);
  } else if (PART === "templates") {
    await templatesScenario(page);
  } else if (PART === "snapshot") {
    await snapshotScenario(page);
  } else if (PART === "layout") {
    await layoutScenario(browser);
  } else if (PART === "terminal") {
    await terminalScenario(page);
  } else if (PART === "screen") {
    await screenScenario(page);
  } else if (PART === "volumes") {
    await volumesScenario(page);
  } else {
    // create
    const before = new Set(await page.$$eval("#sandboxes [data-sandbox-id]", (els) => els.map((e) => e.dataset.sandboxId)));
    await page.fill("#create-ttl", "300");
    await page.fill("#create-metadata", "owner=www-console");
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
    summary.created_metadata = info.metadata;
    summary.sandboxIds.push(sid);
    // the form is back to its defaults for the next one
    await page.waitForFunction(() => document.querySelector("#create-ttl").value === "", null, { timeout: T });
    summary.form_after_create = {
      ttl: await page.inputValue("#create-ttl"), metadata: await page.inputValue("#create-metadata"),
    };
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
    const exitLook = () => page.$eval("#exit-code", (e) => ({
      bad: e.classList.contains("bad"), color: getComputedStyle(e).color, background: getComputedStyle(e).backgroundColor,
    }));
    summary.exit_look_failed = await exitLook();
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

    // a command that writes a file: the files panel shows it without a click on List
    await page.fill("#path", "/workspace");
    await page.click("#list");
    await page.waitForFunction(() => /\/workspace/.test(document.querySelector("#files-note").textContent), null, { timeout: T });
    summary.listed_before_cmd = await page.$$eval("#files tr", (els) => els.map((e) => e.dataset.name));
    await page.fill("#cmd", "printf made > /workspace/made-by-cmd.txt");
    await page.click("#run");
    await page.waitForFunction(() => document.querySelector("#exit-code").textContent.trim() !== "", null, { timeout: T });
    summary.exit_code_ok = (await page.textContent("#exit-code")).trim();
    summary.exit_look_ok = await exitLook();
    await page.waitForSelector("#files [data-name='made-by-cmd.txt']", { timeout: 10000 });
    step("files refreshed after a command");

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

    // destroy: asked first; "no" keeps it
    let dialog = nextDialog(page, false);
    await page.click("#destroy");
    summary.destroy_dialog = await dialog;
    await page.waitForTimeout(500);
    summary.status_after_no = (await api("GET", `/sandbox/${sid}`)).status;
    summary.open_after_no = await page.getAttribute("#detail", "data-sandbox-id");
    dialog = nextDialog(page, true);
    await page.click("#destroy");
    await dialog;
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
