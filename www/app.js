/* nanobox web console (docs/WEB.md).
 *
 * A static page that calls the nanobox HTTP API (docs/API.md) on its own
 * origin. No framework, no build step, nothing loaded from elsewhere.
 * The API key is typed by the user, kept in this browser's localStorage and
 * sent as "Authorization: Bearer <key>".
 *
 * Everything that comes from the API reaches the page through textContent,
 * attribute setters or DOM nodes, never through innerHTML.
 */
"use strict";

(function () {
  var KEY_STORAGE = "nanobox.apiKey";
  var POLL_MS = 5000;

  var $ = function (id) { return document.getElementById(id); };

  var state = {
    key: "",
    openId: "",          /* the sandbox in the detail panel */
    openedAt: 0,         /* when it was opened (a list older than that may miss it) */
    listSeq: 0,          /* newest list request sent */
    listShown: 0,        /* newest list answer shown */
    execCtl: null,       /* AbortController of the running exec */
    codeCtl: null,       /* AbortController of the running code cell */
    term: null,          /* the terminal session (openTerminal) */
    screen: null,        /* the screen being shown (startScreen) */
    cwd: "/workspace",   /* the directory the file table shows */
    sandboxes: [],       /* the last list shown, newest first */
    logCtl: null,        /* AbortController of the build log being followed */
    logName: "",         /* the template whose build log is shown */
    errorFromPoll: false /* the error shown came from the periodic refresh */
  };

  /* ---------------------------------------------------------------- errors */

  function ApiError(status, code, message) {
    this.status = status;
    this.code = code;
    this.message = message;
  }

  function describe(err) {
    if (err instanceof ApiError) {
      var head = err.status ? String(err.status) : "";
      if (err.code) head += (head ? " " : "") + err.code;
      return (head ? head + ": " : "") + err.message;
    }
    if (err && err.name === "AbortError") return "stopped";
    return "network error: " + (err && err.message ? err.message : String(err));
  }

  function showError(err, fromPoll) {
    var text = typeof err === "string" ? err : describe(err);
    if (err instanceof ApiError && err.code === "unauthorized")
      text += "  (type the API key above: api_key in /etc/nanobox/nanobox.conf)";
    $("error").textContent = text;
    $("error-box").hidden = false;
    state.errorFromPoll = !!fromPoll;
  }

  function clearError() {
    $("error").textContent = "";
    $("error-box").hidden = true;
    state.errorFromPoll = false;
  }

  /* ------------------------------------------------------------------- api */

  function authHeaders(extra) {
    var h = {};
    if (state.key) h["Authorization"] = "Bearer " + state.key;
    if (extra) for (var k in extra) if (Object.prototype.hasOwnProperty.call(extra, k)) h[k] = extra[k];
    return h;
  }

  /* The {error, code} of a failed answer, as an ApiError. */
  function errorOf(res) {
    return res.text().then(function (text) {
      var code = "", msg = "";
      try {
        var j = JSON.parse(text);
        if (j && typeof j === "object") {
          if (typeof j.error === "string") msg = j.error;
          else if (j.error && typeof j.error.message === "string") msg = j.error.message;
          if (typeof j.code === "string") code = j.code;
        }
      } catch (e) { /* not JSON: show the start of the text */ }
      if (!msg) msg = text.trim().slice(0, 300) || res.statusText || "request failed";
      return new ApiError(res.status, code, msg);
    }, function () {
      return new ApiError(res.status, "", res.statusText || "request failed");
    });
  }

  /* fetch with the key; resolves to the Response when it is 2xx, rejects
   * with an ApiError otherwise. */
  function call(method, path, opts) {
    opts = opts || {};
    var init = { method: method, headers: authHeaders(opts.headers), cache: "no-store" };
    if (opts.json !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(opts.json);
    } else if (opts.body !== undefined) {
      init.body = opts.body;
    }
    if (opts.signal) init.signal = opts.signal;
    return fetch(path, init).then(function (res) {
      if (res.ok) return res;
      return errorOf(res).then(function (e) { throw e; });
    });
  }

  function callJSON(method, path, opts) {
    return call(method, path, opts).then(function (res) {
      if (res.status === 204) return null;
      return res.json();
    });
  }

  function sbPath(id, rest) {
    return "/sandbox/" + encodeURIComponent(id) + (rest || "");
  }

  /* --------------------------------------------------------------- helpers */

  function el(tag, props, children) {
    var e = document.createElement(tag);
    if (props) {
      for (var k in props) {
        if (!Object.prototype.hasOwnProperty.call(props, k)) continue;
        var v = props[k];
        if (v === undefined || v === null) continue;
        if (k === "text") e.textContent = v;
        else if (k === "className") e.className = v;
        else if (k === "dataset") for (var d in v) e.dataset[d] = v[d];
        else if (k === "onclick") e.addEventListener("click", v);
        else e.setAttribute(k, v);
      }
    }
    if (children) children.forEach(function (c) { if (c) e.appendChild(typeof c === "string" ? document.createTextNode(c) : c); });
    return e;
  }

  function fmtDuration(s) {
    if (typeof s !== "number" || !isFinite(s)) return "";
    s = Math.max(0, Math.round(s));
    var d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60), sec = s % 60;
    if (d) return d + "d " + h + "h";
    if (h) return h + "h " + m + "m";
    if (m) return m + "m " + sec + "s";
    return sec + "s";
  }

  function fmtBytes(n) {
    if (typeof n !== "number" || !isFinite(n)) return "";
    if (n < 1024) return n + " B";
    var units = ["KiB", "MiB", "GiB", "TiB"], i = -1;
    do { n /= 1024; i++; } while (n >= 1024 && i < units.length - 1);
    return (n >= 10 ? n.toFixed(0) : n.toFixed(1)) + " " + units[i];
  }

  function fmtTime(unix) {
    if (typeof unix !== "number" || !isFinite(unix)) return "";
    var d = new Date(unix * 1000);
    var pad = function (x) { return (x < 10 ? "0" : "") + x; };
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
      pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
  }

  function fmtMetadata(md) {
    if (!md || typeof md !== "object") return "";
    return Object.keys(md).map(function (k) { return k + "=" + md[k]; }).join(", ");
  }

  function shortId(id) { return String(id).slice(0, 8); }

  function joinPath(dir, name) {
    if (!dir) return name;
    return dir.replace(/\/+$/, "") + "/" + name;
  }

  function parentPath(p) {
    var s = String(p || "").replace(/\/+$/, "");
    if (s === "") return "/";
    var i = s.lastIndexOf("/");
    if (i < 0) return "/workspace";   /* relative paths are under the workspace */
    return i === 0 ? "/" : s.slice(0, i);
  }

  function baseName(p) {
    var s = String(p).replace(/\/+$/, "");
    return s.slice(s.lastIndexOf("/") + 1) || s;
  }

  /* A URL safe to put in an href: http(s) only. */
  function safeUrl(u) {
    try {
      var parsed = new URL(u, location.href);
      return parsed.protocol === "http:" || parsed.protocol === "https:" ? u : "";
    } catch (e) { return ""; }
  }

  /* Disable a button while its promise runs. */
  function busy(button, promise) {
    if (button) button.disabled = true;
    return promise.then(function (v) {
      if (button) button.disabled = false;
      return v;
    }, function (e) {
      if (button) button.disabled = false;
      throw e;
    });
  }

  /* A user action: clear the last error, run, show a failure. */
  function action(button, fn) {
    clearError();
    var p;
    try { p = Promise.resolve(fn()); } catch (e) { p = Promise.reject(e); }
    return busy(button, p).catch(function (e) { showError(e); });
  }

  /* ---------------------------------------------------------------- health */

  function refreshHealth() {
    var h = $("health");
    return fetch("/healthz", { cache: "no-store" }).then(function (res) {
      if (!res.ok) return errorOf(res).then(function (e) { throw e; });
      return res.json();
    }).then(function (j) {
      var parts = [String(j.status)];
      if (j.docker === false) parts.push("docker down");
      if (typeof j.sandboxes === "number") parts.push(j.sandboxes + "/" + j.capacity + " sandboxes");
      if (typeof j.warm === "number") parts.push(j.warm + " warm");
      h.textContent = parts.join(" · ");
      h.title = j.docker === false ? "Docker: " + (j.docker_error || "unreachable") : "GET /healthz";
      h.className = "health " + (j.status === "ok" && j.docker !== false ? "good" : "warn");
    }).catch(function (e) {
      h.textContent = "unreachable";
      h.title = describe(e);
      h.className = "health bad";
    });
  }

  /* ---------------------------------------------------------- sandbox list */

  function refreshList(fromPoll) {
    var seq = ++state.listSeq;
    var started = Date.now();
    return callJSON("GET", "/sandbox").then(function (j) {
      if (seq < state.listShown) return;   /* a newer answer is already shown */
      state.listShown = seq;
      renderList(Array.isArray(j && j.sandboxes) ? j.sandboxes : [], started);
      if (state.errorFromPoll) clearError();
    }, function (e) {
      if (fromPoll) {
        /* a poll never hides an error the user has not seen yet */
        if ($("error").textContent === "" || state.errorFromPoll) showError(e, true);
      } else {
        throw e;
      }
    });
  }

  function sbState(sb) { return String((sb && (sb.state || sb.status)) || ""); }

  /* Newest first (created_at), then by id so that the order is stable. */
  function sortNewestFirst(list) {
    return list.slice().sort(function (a, b) {
      var ca = typeof a.created_at === "number" ? a.created_at : 0;
      var cb = typeof b.created_at === "number" ? b.created_at : 0;
      if (ca !== cb) return cb - ca;
      return String(a.sandboxId) < String(b.sandboxId) ? -1 : 1;
    });
  }

  /* The filter: every word must be in the id or in the metadata (as
   * key=value), case-insensitive. */
  function matchesFilter(sb, words) {
    if (words.length === 0) return true;
    var hay = (String(sb.sandboxId) + " " + fmtMetadata(sb.metadata)).toLowerCase();
    return words.every(function (w) { return hay.indexOf(w) >= 0; });
  }

  function applyFilter() {
    var words = $("filter").value.toLowerCase().split(/[\s,]+/).filter(function (w) { return w !== ""; });
    var byId = {};
    state.sandboxes.forEach(function (sb) { byId[String(sb.sandboxId)] = sb; });
    var shown = 0, total = 0;
    Array.prototype.forEach.call($("sandboxes").children, function (li) {
      var sb = byId[li.dataset.sandboxId];
      var ok = !sb || matchesFilter(sb, words);
      li.hidden = !ok;
      total++;
      if (ok) shown++;
    });
    $("sandboxes-count").textContent = words.length ? shown + " of " + total : total ? String(total) : "";
    var empty = $("sandboxes-empty");
    empty.hidden = shown > 0;
    empty.textContent = total > 0 ? "No sandbox matches the filter." : "No sandboxes.";
  }

  function renderList(list, startedAt) {
    list = sortNewestFirst(list);
    state.sandboxes = list;
    var ul = $("sandboxes");
    var existing = {};
    Array.prototype.forEach.call(ul.children, function (li) { existing[li.dataset.sandboxId] = li; });
    var seen = {};
    list.forEach(function (sb, i) {
      var id = String(sb.sandboxId);
      seen[id] = true;
      var li = existing[id] || buildListItem(id);
      fillListItem(li, sb);
      li.classList.toggle("selected", id === state.openId);
      if (ul.children[i] !== li) ul.insertBefore(li, ul.children[i] || null);
    });
    Object.keys(existing).forEach(function (id) {
      if (!seen[id]) existing[id].remove();
    });
    applyFilter();

    /* the open sandbox is gone (destroyed elsewhere, expired) */
    if (state.openId && !seen[state.openId] && startedAt > state.openedAt) {
      var gone = state.openId;
      closeDetail();
      showError("sandbox " + gone + " is gone (destroyed or expired)");
    } else if (state.openId && seen[state.openId]) {
      var sb = list.filter(function (s) { return s.sandboxId === state.openId; })[0];
      renderInfo(sb);
    }
  }

  function buildListItem(id) {
    var li = el("li", { className: "sandbox", dataset: { sandboxId: id } });
    var top = el("div", { className: "sb-top" }, [
      el("code", { className: "sb-id", title: id, text: shortId(id) }),
      el("span", { className: "badge sb-status" }),
      el("span", { className: "sb-ttl", title: "time left" })
    ]);
    var meta = el("div", { className: "sb-meta" }, [
      el("span", { className: "sb-network" }),
      el("span", { className: "sb-node", hidden: true }),
      el("span", { className: "sb-metadata" })
    ]);
    var open = el("button", { type: "button", className: "open small", text: "Open" });
    var destroy = el("button", { type: "button", className: "destroy small danger", text: "Destroy" });
    open.addEventListener("click", function () { openSandbox(id); });
    destroy.addEventListener("click", function () {
      if (!confirmDestroy(id)) return;
      action(destroy, function () { return destroySandbox(id); });
    });
    li.appendChild(top);
    li.appendChild(meta);
    li.appendChild(el("div", { className: "sb-actions" }, [open, destroy]));
    return li;
  }

  function fillListItem(li, sb) {
    var st = sbState(sb);
    var badge = li.querySelector(".sb-status");
    badge.textContent = st;
    badge.className = "badge sb-status state-" + st;
    li.classList.toggle("paused", st === "paused");
    li.dataset.state = st;
    li.querySelector(".sb-ttl").textContent = fmtDuration(sb.ttl_remaining) + " left" + (st === "paused" ? " (stopped)" : "");
    li.querySelector(".sb-network").textContent = "network " + String(sb.network || "");
    // a cluster's sandboxes say which node runs them, and whether it is up
    var node = li.querySelector(".sb-node");
    node.hidden = typeof sb.node !== "string";
    node.textContent = node.hidden ? "" : "node " + sb.node + (sb.node_up === false ? " (down)" : "");
    li.classList.toggle("node-down", sb.node_up === false);
    var md = fmtMetadata(sb.metadata);
    li.querySelector(".sb-metadata").textContent = md;
    li.querySelector(".sb-metadata").title = md;
  }

  function createSandbox() {
    var body = {};
    var ttl = $("create-ttl").value.trim();
    var mem = $("create-memory").value.trim();
    var cpus = $("create-cpus").value.trim();
    var net = $("create-network").value;
    var image = $("create-image").value.trim();
    var template = $("create-template").value.trim();
    var md = $("create-metadata").value.trim();
    var vols = $("create-volumes").value.trim();
    if (image !== "") body.image = image;
    if (template !== "") body.template = template;
    if (ttl !== "") body.ttl = Number(ttl);
    if (mem !== "") body.memory = /^\d+$/.test(mem) ? Number(mem) : mem;
    if (cpus !== "") body.cpus = Number(cpus);
    if (net && net !== "none") body.network = net;   /* "none" is the default */
    if (md !== "") {
      body.metadata = {};
      md.split(",").forEach(function (pair) {
        pair = pair.trim();
        if (!pair) return;
        var eq = pair.indexOf("=");
        if (eq <= 0) throw new ApiError(0, "", "metadata: write key=value pairs separated by commas");
        body.metadata[pair.slice(0, eq).trim()] = pair.slice(eq + 1).trim();
      });
    }
    if (vols !== "") {
      /* "name:/path, ...": the key's persistent volumes (GET /volumes) */
      body.volumes = vols.split(",").map(function (pair) {
        pair = pair.trim();
        var colon = pair.indexOf(":");
        if (colon <= 0 || pair.charAt(colon + 1) !== "/")
          throw new ApiError(0, "", "volumes: write name:/path pairs separated by commas");
        return { name: pair.slice(0, colon), path: pair.slice(colon + 1) };
      });
    }
    return callJSON("POST", "/sandbox", { json: body }).then(function (sb) {
      $("create-form").reset();   /* the next create starts from the defaults again */
      return refreshList().then(function () {
        if (sb && sb.sandboxId) openSandbox(sb.sandboxId, sb);
      });
    });
  }

  /* Destroying cannot be undone: ask first. */
  function confirmDestroy(id) {
    return window.confirm("Destroy sandbox " + id + "?\n\nIts processes and files are gone for good.");
  }

  function createFromTemplate(name) {
    return callJSON("POST", "/sandbox", { json: { template: name } }).then(function (sb) {
      showView("sandboxes");
      return refreshList().then(function () {
        if (sb && sb.sandboxId) return openSandbox(sb.sandboxId, sb);
      });
    });
  }

  function destroySandbox(id) {
    if (id === state.openId) { stopExec(); stopCode(); stopTerminal(true); stopScreen(); }
    return call("DELETE", sbPath(id)).then(function () {
      if (id === state.openId) closeDetail();
      var li = findListItem(id);
      if (li) li.remove();
      return Promise.all([refreshList(), refreshHealth()]);
    });
  }

  function findListItem(id) {
    var items = $("sandboxes").children;
    for (var i = 0; i < items.length; i++) if (items[i].dataset.sandboxId === id) return items[i];
    return null;
  }

  /* ------------------------------------------------------------ the detail */

  function openSandbox(id, known) {
    if (state.openId && state.openId !== id) { stopExec(); stopCode(); stopTerminal(true); stopScreen(); }
    var switching = state.openId !== id;
    state.openId = id;
    state.openedAt = Date.now();
    var detail = $("detail");
    detail.setAttribute("data-sandbox-id", id);
    $("detail-empty").hidden = true;
    $("detail-body").hidden = false;
    $("detail-id").textContent = id;
    Array.prototype.forEach.call($("sandboxes").children, function (li) {
      li.classList.toggle("selected", li.dataset.sandboxId === id);
    });
    if (switching) {
      $("output").textContent = "";
      $("exit-code").textContent = "";
      $("exec-state").textContent = "";
      $("files").textContent = "";
      $("files-note").textContent = "";
      $("ports").textContent = "";
      $("cells").textContent = "";
      $("code-context").value = "python";
      $("path").value = "/workspace";
      state.cwd = "/workspace";
      $("detail-info").textContent = "";
      $("detail-state").textContent = "";
      $("exit-code").classList.remove("bad");
      clearSnapshot();
    }
    if (known) renderInfo(known);
    clearError();
    return Promise.all([
      callJSON("GET", sbPath(id)).then(function (sb) { if (state.openId === id) renderInfo(sb); }),
      listFiles("/workspace", id),
      refreshPorts(id),
      refreshContexts(id)
    ]).catch(function (e) { if (state.openId === id) showError(e); });
  }

  function closeDetail() {
    stopExec();
    stopCode();
    stopTerminal(true);
    stopScreen();
    state.openId = "";
    $("detail").removeAttribute("data-sandbox-id");
    $("detail-body").hidden = true;
    $("detail-empty").hidden = false;
    $("detail-id").textContent = "";
    $("detail-state").textContent = "";
    delete $("detail").dataset.state;
    $("detail-info").textContent = "";
    clearSnapshot();
    $("files").textContent = "";
    $("ports").textContent = "";
    Array.prototype.forEach.call($("sandboxes").children, function (li) { li.classList.remove("selected"); });
  }

  function renderInfo(sb) {
    if (!sb || sb.sandboxId !== state.openId) return;
    var dl = $("detail-info");
    dl.textContent = "";
    var st = sbState(sb);
    var paused = st === "paused";
    $("detail-state").textContent = st;
    $("detail-state").className = "badge state-" + st;
    $("detail").dataset.state = st;
    $("paused-note").hidden = !paused;
    $("pause").hidden = paused;
    $("resume").hidden = !paused;
    var rows = [
      ["image", sb.image],
      ["expires", fmtTime(sb.expires_at) + (typeof sb.ttl_remaining === "number" ? " (" + fmtDuration(sb.ttl_remaining) + " left)" : "")],
      ["created", fmtTime(sb.created_at)],
      ["paused at", paused ? fmtTime(sb.paused_at) : ""],
      ["destroyed if still paused at", paused ? fmtTime(sb.pause_expires_at) : ""],
      ["auto resume", sb.auto_resume ? "yes" : ""],
      ["at its TTL's end", sb.on_timeout === "pause" ? "paused, not destroyed" : ""],
      ["memory", fmtBytes(sb.memory)],
      ["cpus", sb.cpus],
      ["pids", sb.pids],
      ["network", sb.network],
      ["node", typeof sb.node === "string" ? sb.node + (sb.node_up === false ? " (down: its sandboxes answer 503 until it is back)" : "") : ""],
      ["metadata", fmtMetadata(sb.metadata) || "—"]
    ];
    rows.forEach(function (r) {
      if (r[1] === undefined || r[1] === null || r[1] === "") return;
      dl.appendChild(el("dt", { text: r[0] }));
      dl.appendChild(el("dd", { text: String(r[1]) }));
    });
  }

  /* Pause (freeze) or resume (thaw) the open sandbox. */
  function pauseResume(which) {
    var id = state.openId;
    if (!id) return;
    return callJSON("POST", sbPath(id, "/" + which)).then(function (sb) {
      if (state.openId === id) renderInfo(sb);
      return refreshList();
    });
  }

  /* Snapshot: the open sandbox's /workspace and /tmp become a new template
   * (POST /sandbox/{id}/snapshot), under a name asked for (empty: the
   * server's snap-<id>-<ms>). The answer comes once it is ready: shown
   * here with a button to start a sandbox of it, and on the Templates page
   * and in the create form's list of templates from now on. */
  function snapshotSandbox() {
    var id = state.openId;
    if (!id) return;
    var name = window.prompt("Save the files of sandbox " + id + " (/workspace and /tmp) as a new template; " +
                             "it keeps running.\n\nName of the template (empty: a generated one):", "");
    if (name === null) return;
    name = name.trim();
    var box = $("snapshot-result");
    box.hidden = false;
    box.dataset.status = "saving";
    box.textContent = "Saving a snapshot…";
    return callJSON("POST", sbPath(id, "/snapshot"), { json: name === "" ? {} : { name: name } }).then(function (t) {
      if (state.openId === id) showSnapshot(t);
      return refreshTemplates();
    }, function (e) {
      if (state.openId === id) { box.hidden = true; delete box.dataset.status; }
      throw e;
    });
  }

  function showSnapshot(t) {
    var box = $("snapshot-result");
    var name = String(t && t.name || "");
    var facts = [String(t.status || "")];
    if (t.size) facts.push(fmtBytes(t.size));
    var create = el("button", { type: "button", className: "create-from small primary", text: "New sandbox from it",
                                title: "create a sandbox of this template and open it" });
    create.addEventListener("click", function () {
      action(create, function () { return createFromTemplate(name); });
    });
    box.textContent = "";
    box.dataset.status = String(t.status || "");
    box.dataset.template = name;
    box.appendChild(el("span", { className: "snap-text" }, [
      document.createTextNode("Snapshot "),
      el("strong", { className: "snap-name mono", text: name }),
      document.createTextNode(" saved as a template (" + facts.join(" · ") + "). "),
      el("a", { href: "#templates", className: "snap-link", text: "Templates" })
    ]));
    box.appendChild(create);
    box.hidden = false;
  }

  function clearSnapshot() {
    var box = $("snapshot-result");
    box.hidden = true;
    box.textContent = "";
    delete box.dataset.status;
    delete box.dataset.template;
  }

  function extendTtl() {
    var id = state.openId;
    var v = $("extend-ttl").value.trim();
    if (!id) return;
    if (v === "") throw new ApiError(0, "", "type the new TTL in seconds (from now)");
    return callJSON("POST", sbPath(id, "/timeout"), { json: { ttl: Number(v) } }).then(function () {
      return Promise.all([refreshList(), callJSON("GET", sbPath(id)).then(renderInfo)]);
    });
  }

  /* ---------------------------------------------------------------- ndjson */

  /* Read a streamed answer (application/x-ndjson) as it arrives: each line
   * that is JSON goes to onEvent (which returns false to stop reading), any
   * other line to onBadLine. Resolves when the stream ends. */
  function readNdjson(res, onEvent, onBadLine) {
    var reader = res.body.getReader();
    var decoder = new TextDecoder("utf-8");
    var buf = "";
    var stopped = false;
    var feed = function (text) {
      buf += text;
      var nl;
      while (!stopped && (nl = buf.indexOf("\n")) >= 0) {
        var line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (line === "") continue;
        var ev;
        try { ev = JSON.parse(line); } catch (e) {
          onBadLine(line);
          continue;
        }
        if (onEvent(ev) === false) stopped = true;
      }
    };
    var pump = function () {
      if (stopped) {
        reader.cancel().catch(function () { /* gone already */ });
        return Promise.resolve();
      }
      return reader.read().then(function (r) {
        if (r.done) {
          feed(decoder.decode() + "\n");
          return;
        }
        feed(decoder.decode(r.value, { stream: true }));
        return pump();
      });
    };
    return pump();
  }

  /* ------------------------------------------------------------------ exec */

  function appendOutput(text, cls) {
    var out = $("output");
    var atBottom = out.scrollHeight - out.scrollTop - out.clientHeight < 24;
    if (cls) {
      out.appendChild(el("span", { className: cls, text: text }));
    } else {
      var last = out.lastChild;
      if (last && last.nodeType === 3) last.appendData(text);
      else out.appendChild(document.createTextNode(text));
    }
    if (atBottom) out.scrollTop = out.scrollHeight;
  }

  function handleEvent(ev, id) {
    if (!ev || typeof ev !== "object") return;
    if (ev.type === "stdout" && typeof ev.data === "string") {
      appendOutput(ev.data);
    } else if (ev.type === "stderr" && typeof ev.data === "string") {
      appendOutput(ev.data, "stderr");
    } else if (ev.type === "exit") {
      $("exit-code").textContent = String(ev.exit_code);
      /* a failure stands out: any code but 0, and a command that was killed */
      $("exit-code").classList.toggle("bad", ev.exit_code !== 0 || !!ev.timed_out || !!ev.oom_killed);
      var notes = [];
      if (ev.timed_out) notes.push("timed out");
      if (ev.oom_killed) notes.push("out of memory");
      if (ev.truncated) notes.push("output truncated");
      if (typeof ev.duration_ms === "number") notes.push(ev.duration_ms + " ms");
      $("exec-state").textContent = notes.join(" · ");
      $("exec-state").classList.toggle("warn", !!(ev.timed_out || ev.oom_killed || ev.truncated));
    } else if (ev.type === "error") {
      var err = new ApiError(0, String(ev.code || ""), String(ev.error || "the command could not run"));
      appendOutput(describe(err) + "\n", "event-error");
      $("exec-state").textContent = "failed";
      if (state.openId === id) showError(err);
    } else {
      /* an event this console does not know: shown as it came */
      appendOutput(JSON.stringify(ev) + "\n", "event-other");
    }
  }

  function runExec() {
    var id = state.openId;
    var command = $("cmd").value;
    if (!id) return;
    if (command.trim() === "") throw new ApiError(0, "", "type a command first");
    stopExec();
    var ctl = new AbortController();
    state.execCtl = ctl;
    var body = { command: command, stream: true };
    var t = $("exec-timeout").value.trim();
    if (t !== "") body.timeout = Number(t);
    $("output").textContent = "";
    $("exit-code").textContent = "";
    $("exit-code").classList.remove("bad");
    $("exec-state").textContent = "running…";
    $("exec-state").classList.remove("warn");
    $("run").disabled = true;
    $("stop").disabled = false;
    var sawEnd = false;

    var done = function () {
      if (state.execCtl === ctl) state.execCtl = null;
      if (state.openId === id && !state.execCtl) {
        $("run").disabled = false;
        $("stop").disabled = true;
      }
      /* what the command wrote shows in the files panel */
      if (state.openId === id) listFiles(state.cwd || "/workspace", id).catch(function () { /* shown on List */ });
    };

    return call("POST", sbPath(id, "/exec"), {
      json: body,
      headers: { Accept: "application/x-ndjson" },
      signal: ctl.signal
    }).then(function (res) {
      var ctype = res.headers.get("Content-Type") || "";
      if (ctype.indexOf("ndjson") < 0 || !res.body) {
        /* an answer that is not a stream: one JSON object */
        return res.json().then(function (j) {
          if (j && typeof j.stdout === "string") appendOutput(j.stdout);
          if (j && typeof j.stderr === "string" && j.stderr) appendOutput(j.stderr, "stderr");
          handleEvent({ type: "exit", exit_code: j.exit_code, timed_out: j.timed_out,
                        oom_killed: j.oom_killed, truncated: j.truncated, duration_ms: j.duration_ms }, id);
          sawEnd = true;
        });
      }
      return readNdjson(res, function (ev) {
        if (state.execCtl !== ctl) return false;   /* stopped, or another command started */
        if (ev && (ev.type === "exit" || ev.type === "error")) sawEnd = true;
        handleEvent(ev, id);
      }, function (line) {
        appendOutput(line + "\n", "event-other");
      });
    }).then(function () {
      if (!sawEnd && state.execCtl === ctl) $("exec-state").textContent = "the stream ended without an exit event";
      done();
    }, function (e) {
      done();
      if (e && e.name === "AbortError") {
        if (state.openId === id) $("exec-state").textContent = "stopped (the command was killed)";
        return;
      }
      if (state.openId === id) $("exec-state").textContent = "failed";
      throw e;
    });
  }

  function stopExec() {
    var ctl = state.execCtl;
    if (!ctl) return;
    state.execCtl = null;
    ctl.abort();
    $("run").disabled = false;
    $("stop").disabled = true;
    $("exec-state").textContent = "stopped (the command was killed)";
  }

  /* -------------------------------------------------------------- terminal */

  /* A PTY session (docs/API.md, "Terminals"): POST /sandbox/{id}/exec with
   * "pty": {cols, rows} streams the terminal's output as NDJSON; what is
   * typed goes to POST …/pty/{pid}/input, a new size to …/pty/{pid}/resize.
   * Dropping the stream hangs the terminal up. xterm.js (www/vendor/) draws
   * it; it is loaded the first time a terminal is opened. */

  var TERM_SHELL = "if command -v bash >/dev/null; then exec bash -l; fi; exec sh -l";
  var xtermLoading = null;

  /* xterm.js writes its computed styles (cell size, theme colors) into
   * <style> elements and style="" attributes, which the page's CSP
   * (style-src 'self', no 'unsafe-inline') refuses. The CSSOM is not under
   * the CSP: a <style> asked of the document becomes an inert <template>
   * whose text goes into a constructed stylesheet adopted by the document,
   * and setAttribute("style", …) sets style.cssText. The console itself
   * makes neither, so this only changes what xterm.js does. */
  function installStyleShim() {
    if (!document.adoptedStyleSheets || typeof CSSStyleSheet !== "function") return;
    var create = Document.prototype.createElement;
    Document.prototype.createElement = function (tag, opts) {
      if (typeof tag !== "string" || tag.toLowerCase() !== "style") return create.call(this, tag, opts);
      var doc = this, stand = create.call(this, "template"), sheet = new CSSStyleSheet(), text = "";
      doc.adoptedStyleSheets = doc.adoptedStyleSheets.concat([sheet]);
      Object.defineProperty(stand, "textContent", {
        configurable: true,
        get: function () { return text; },
        set: function (v) { text = v === null || v === undefined ? "" : String(v); sheet.replaceSync(text); }
      });
      Object.defineProperty(stand, "sheet", { configurable: true, get: function () { return sheet; } });
      var remove = stand.remove;
      stand.remove = function () {
        doc.adoptedStyleSheets = doc.adoptedStyleSheets.filter(function (s) { return s !== sheet; });
        remove.call(stand);
      };
      return stand;
    };
    var setAttr = Element.prototype.setAttribute;
    Element.prototype.setAttribute = function (name, value) {
      if (typeof name === "string" && name.toLowerCase() === "style" && this.style) {
        this.style.cssText = String(value);
        return;
      }
      return setAttr.call(this, name, value);
    };
  }

  function loadScript(src) {
    return new Promise(function (resolve, reject) {
      var s = document.createElement("script");
      s.src = src;
      s.onload = resolve;
      s.onerror = function () { reject(new ApiError(0, "", "could not load " + src)); };
      document.head.appendChild(s);
    });
  }

  function loadXterm() {
    if (window.Terminal && window.FitAddon) return Promise.resolve();
    if (!xtermLoading) {
      installStyleShim();
      xtermLoading = loadScript("/console/vendor/xterm/xterm.js").then(function () {
        return loadScript("/console/vendor/addon-fit/addon-fit.js");
      });
      xtermLoading.catch(function () { xtermLoading = null; });
    }
    return xtermLoading;
  }

  function termStatus(sess, st, text) {
    if (state.term !== sess) return;
    $("terminal").dataset.state = st;
    $("term-state").textContent = text;
    var live = st === "connecting" || st === "open";
    $("term-open").disabled = live;
    $("term-close").disabled = !live;
  }

  /* What is typed goes out in order, one call at a time; keys pressed while
   * a call is on its way are sent together with the next one. */
  function termInput(sess, data) {
    sess.pending += data;
    if (!sess.pid || sess.sending || sess.ended || sess.pending === "") return;
    var chunk = sess.pending;
    sess.pending = "";
    sess.sending = true;
    /* a lone UTF-16 surrogate has no UTF-8: it goes as U+FFFD */
    if (typeof chunk.toWellFormed === "function") chunk = chunk.toWellFormed();
    call("POST", sbPath(sess.id, "/pty/" + sess.pid + "/input"), { json: { data: chunk } }).then(function () {
      sess.sending = false;
      termInput(sess, "");
    }, function (e) {
      sess.sending = false;
      if (!sess.ended && state.term === sess) showError(e);
    });
  }

  /* The newest size goes to the PTY once the one before is answered. */
  function termResize(sess) {
    if (!sess.pid || sess.resizing || sess.ended) return;
    var want = sess.xterm.cols + "x" + sess.xterm.rows;
    if (want === sess.sizeSent) return;
    sess.resizing = true;
    var cols = sess.xterm.cols, rows = sess.xterm.rows;
    call("POST", sbPath(sess.id, "/pty/" + sess.pid + "/resize"), { json: { cols: cols, rows: rows } }).then(function () {
      sess.resizing = false;
      sess.sizeSent = cols + "x" + rows;
      termShowSize(sess);
      termResize(sess);
    }, function (e) {
      sess.resizing = false;
      if (!sess.ended && state.term === sess) showError(e);
    });
  }

  function termShowSize(sess) {
    if (state.term !== sess) return;
    var p = sess.sizeSent.split("x");
    $("terminal").dataset.cols = p[0];
    $("terminal").dataset.rows = p[1];
    $("term-size").textContent = p[0] + " × " + p[1] + (sess.pid ? " · pid " + sess.pid : "");
  }

  function openTerminal() {
    var id = state.openId;
    if (!id) return;
    stopTerminal(true);
    var sess = { id: id, ctl: new AbortController(), xterm: null, fit: null, ro: null, pid: 0,
                 pending: "", sending: false, resizing: false, sizeSent: "", ended: false, exited: false };
    state.term = sess;
    var box = $("terminal");
    $("term-exit").textContent = "";
    $("term-exit").classList.remove("bad");
    $("term-size").textContent = "";
    delete box.dataset.pid;
    delete box.dataset.cols;
    delete box.dataset.rows;
    termStatus(sess, "connecting", "connecting…");
    var command = $("term-cmd").value.trim() || TERM_SHELL;

    return loadXterm().then(function () {
      if (state.term !== sess) return;
      box.hidden = false;
      box.textContent = "";
      var t = new window.Terminal({
        cursorBlink: true, fontFamily: getComputedStyle(document.documentElement).getPropertyValue("--mono").trim() || "monospace",
        fontSize: 13, scrollback: 5000, theme: { background: "#000000" }
      });
      var fit = new window.FitAddon.FitAddon();
      t.loadAddon(fit);
      t.open(box);
      fit.fit();
      sess.xterm = t;
      sess.fit = fit;
      t.onData(function (d) { termInput(sess, d); });
      t.onBinary(function (d) {
        /* bytes 0-255 (mouse reports) as they are */
        if (sess.pid && !sess.ended)
          call("POST", sbPath(id, "/pty/" + sess.pid + "/input"), { json: { data: btoa(d), encoding: "base64" } }).catch(function () { /* gone */ });
      });
      t.onResize(function () { termResize(sess); });
      /* the box follows the window (and the card's width): refit */
      if (typeof ResizeObserver === "function") {
        sess.ro = new ResizeObserver(function () {
          if (state.term === sess && !box.hidden && box.clientWidth > 0) fit.fit();
        });
        sess.ro.observe(box);
      }
      t.focus();
      var size = { cols: t.cols, rows: t.rows };
      return call("POST", sbPath(id, "/exec"), {
        json: { command: command, pty: size },
        headers: { Accept: "application/x-ndjson" },
        signal: sess.ctl.signal
      }).then(function (res) {
        return readNdjson(res, function (ev) {
          if (state.term !== sess) return false;
          if (!ev || typeof ev !== "object") return;
          if (ev.type === "start") {
            sess.pid = ev.pid;
            box.dataset.pid = String(ev.pid);
            sess.sizeSent = size.cols + "x" + size.rows;
            termShowSize(sess);
            termStatus(sess, "open", "connected");
            termInput(sess, "");
            termResize(sess);   /* the box changed while it started */
          } else if (ev.type === "stdout" || ev.type === "stderr") {
            if (typeof ev.data === "string") t.write(ev.data);
          } else if (ev.type === "exit") {
            sess.ended = sess.exited = true;
            $("term-exit").textContent = String(ev.exit_code);
            $("term-exit").classList.toggle("bad", ev.exit_code !== 0 || !!ev.timed_out || !!ev.oom_killed);
            termStatus(sess, "exited", ev.timed_out ? "ended (timed out)" : "ended");
          } else if (ev.type === "error") {
            sess.ended = true;
            termStatus(sess, "closed", "failed");
            showError(new ApiError(0, String(ev.code || ""), String(ev.error || "the terminal could not start")));
          }
        }, function () { /* not JSON: nothing for the screen */ });
      });
    }).then(function () {
      sess.ended = true;
      if (state.term === sess && !sess.exited && $("terminal").dataset.state !== "closed")
        termStatus(sess, "closed", "the stream ended without an exit event");
      termDetach(sess);
    }, function (e) {
      sess.ended = true;
      termDetach(sess);
      if (e && e.name === "AbortError") return;
      termStatus(sess, "closed", "failed");
      throw e;
    });
  }

  function termDetach(sess) {
    if (sess.ro) sess.ro.disconnect();
    sess.ro = null;
  }

  /* Hang up (the stream is dropped: nanobox kills what runs on it); with
   * dispose, the screen goes too (another sandbox, or a new session). */
  function stopTerminal(dispose) {
    var sess = state.term;
    if (!sess) return;
    if (!sess.ended) {
      termStatus(sess, "closed", "hung up");
      sess.ended = true;
      sess.ctl.abort();
    }
    termDetach(sess);
    if (dispose) {
      if (sess.xterm) sess.xterm.dispose();
      state.term = null;
      var box = $("terminal");
      box.textContent = "";
      box.hidden = true;
      box.dataset.state = "";
      delete box.dataset.pid;
      delete box.dataset.cols;
      delete box.dataset.rows;
      $("term-state").textContent = "";
      $("term-exit").textContent = "";
      $("term-exit").classList.remove("bad");
      $("term-size").textContent = "";
      $("term-open").disabled = false;
      $("term-close").disabled = true;
    }
  }

  /* ------------------------------------------------------------------ code */

  /* The code interpreter (POST /sandbox/{id}/code): one cell per run, the
   * NDJSON events rendered as they come. Output of the sandbox never goes
   * into this page as HTML: text as text, images as <img> of a data: URL,
   * HTML inside an <iframe sandbox=""> (no scripts, an origin of its own). */

  var DEFAULT_SESSIONS = ["python", "javascript", "typescript", "bash"];

  /* The selected session as the API takes it: a language's own, or a context's id. */
  function codeTarget() {
    var v = $("code-context").value || "python";
    return DEFAULT_SESSIONS.indexOf(v) >= 0 ? { language: v, context: v } : { context: v };
  }

  /* The session list: the languages' own, then the contexts the sandbox has. */
  function refreshContexts(id) {
    id = id || state.openId;
    if (!id) return Promise.resolve();
    return callJSON("GET", sbPath(id, "/contexts")).then(function (j) {
      if (state.openId !== id) return;
      var sel = $("code-context");
      var keep = sel.value;
      var list = Array.isArray(j && j.contexts) ? j.contexts : [];
      Array.prototype.slice.call(sel.options).forEach(function (o) {
        if (DEFAULT_SESSIONS.indexOf(o.value) < 0) o.remove();
      });
      list.forEach(function (c) {
        var cid = String(c.id || "");
        if (!cid || DEFAULT_SESSIONS.indexOf(cid) >= 0) return;
        sel.appendChild(el("option", { value: cid, text: cid + " (" + String(c.language || "") + ")" }));
      });
      sel.value = keep;
      if (sel.value !== keep) sel.value = "python";
    }, function () { /* no code interpreter here (yet): the languages' own sessions remain */ });
  }

  function newCell(code) {
    var cells = $("cells");
    var cell = el("div", { className: "cell", dataset: { status: "" } }, [
      el("pre", { className: "cell-code", text: code }),
      el("div", { className: "cell-out" }),
      el("div", { className: "cell-status muted", text: "running…" })
    ]);
    cells.appendChild(cell);
    cell.scrollIntoView({ block: "nearest" });
    return cell;
  }

  /* stdout/stderr: text appended to the cell's last stream block */
  function cellText(cell, text, stderr) {
    var out = cell.querySelector(".cell-out");
    var last = out.lastChild;
    if (!last || !last.classList.contains("cell-stream")) {
      last = el("pre", { className: "cell-stream" });
      out.appendChild(last);
    }
    if (stderr) {
      last.appendChild(el("span", { className: "stderr", text: text }));
    } else if (last.lastChild && last.lastChild.nodeType === 3) {
      last.lastChild.appendData(text);
    } else {
      last.appendChild(document.createTextNode(text));
    }
  }

  /* base64 as the kernel sent it (some put line breaks in it) */
  function b64(v) { return String(v).replace(/\s+/g, ""); }

  /* A rough height for HTML in a frame that cannot tell its own (no scripts run in it). */
  function frameHeight(html) {
    var rows = (html.match(/<tr[\s>]/gi) || []).length;
    var lines = (html.match(/<(br|p|div|li|h\d)[\s>/]/gi) || []).length;
    return Math.max(60, Math.min(480, 32 + 26 * rows + 22 * lines));
  }

  /* A chart's data as lines of text (tab-separated), at most `room` of them. */
  var CHART_ROWS = 200;
  function chartLines(chart, lines, indent) {
    var els = Array.isArray(chart.elements) ? chart.elements : [];
    var put = function (cols) {
      if (lines.length < CHART_ROWS) lines.push(indent + cols.map(function (c) {
        return Array.isArray(c) ? "[" + c.join(", ") + "]" : String(c);
      }).join("\t"));
      else lines.more++;
    };
    if (chart.type === "superchart") {
      els.forEach(function (sub, i) {
        put(["#" + (i + 1) + " " + String(sub.type) + (sub.title ? " \u201c" + sub.title + "\u201d" : "")]);
        chartLines(sub, lines, indent + "  ");
      });
    } else if (chart.type === "line" || chart.type === "scatter") {
      if (chart.x_label || chart.y_label) put([chart.x_label || "x", chart.y_label || "y"]);
      els.forEach(function (e) {
        var pts = Array.isArray(e.points) ? e.points : [];
        put([String(e.label) + " (" + pts.length + " points)"]);
        pts.forEach(function (p) { put(Array.isArray(p) ? p : [p]); });
      });
    } else if (chart.type === "bar") {
      put(["group", chart.x_label || "label", chart.y_label || "value"]);
      els.forEach(function (e) { put([e.group, e.label, e.value]); });
    } else if (chart.type === "pie") {
      put(["label", "angle", "share"]);
      els.forEach(function (e) { put([e.label, e.angle + "\u00b0", (e.angle / 3.6).toFixed(1) + "%"]); });
    } else if (chart.type === "box_and_whisker") {
      put(["label", "min", "q1", "median", "q3", "max", "outliers"]);
      els.forEach(function (e) {
        put([e.label, e.min, e.first_quartile, e.median, e.third_quartile, e.max, e.outliers || []]);
      });
    }
    return lines;
  }

  /* A figure's chart (what it plots, from the kernel): its data under the picture, or alone when the picture was cut. */
  function renderChart(box, chart, hasPicture) {
    var lines = [];
    lines.more = 0;
    chartLines(chart, lines, "");
    var n = Array.isArray(chart.elements) ? chart.elements.length : 0;
    var what = String(chart.type).replace(/_/g, " ") + " chart" +
      (chart.title ? " \u201c" + chart.title + "\u201d" : "") + " \u00b7 " + n +
      (chart.type === "superchart" ? " chart" : " element") + (n === 1 ? "" : "s");
    var details = el("details", { className: "result-chart" });
    details.open = !hasPicture;
    details.appendChild(el("summary", { text: what }));
    if (lines.more) lines.push("\u2026 " + lines.more + " more lines");
    details.appendChild(el("pre", { className: "result-text chart-data", text: lines.join("\n") }));
    box.appendChild(details);
  }

  /* One result, by its best MIME type. */
  function renderResult(cell, ev) {
    var data = ev && ev.data && typeof ev.data === "object" ? ev.data : {};
    var out = cell.querySelector(".cell-out");
    var box = el("div", { className: "result" + (ev.is_main_result ? " main" : "") });
    var node;
    if (typeof data["image/png"] === "string" || typeof data["image/jpeg"] === "string") {
      var mime = typeof data["image/png"] === "string" ? "image/png" : "image/jpeg";
      node = el("img", { className: "result-image", alt: typeof data["text/plain"] === "string" ? data["text/plain"] : mime });
      node.src = "data:" + mime + ";base64," + b64(data[mime]);
    } else if (typeof data["image/svg+xml"] === "string") {
      node = el("img", { className: "result-image", alt: "SVG image" });
      node.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(data["image/svg+xml"]);
    } else if (typeof data["text/html"] === "string") {
      /* sandbox="": no scripts, no same origin, no forms, no top navigation */
      node = el("iframe", { className: "result-html", sandbox: "", referrerpolicy: "no-referrer",
                            title: "HTML result (sandboxed)" });
      node.setAttribute("srcdoc", '<!doctype html><meta charset="utf-8">' + data["text/html"]);
      node.style.height = frameHeight(data["text/html"]) + "px";
    } else if (typeof data["text/plain"] === "string") {
      node = el("pre", { className: "result-text", text: data["text/plain"] });
    } else {
      var kinds = Object.keys(data);
      var text = kinds.indexOf("application/json") >= 0 ? JSON.stringify(data["application/json"], null, 2) :
        kinds.indexOf("text/markdown") >= 0 ? String(data["text/markdown"]) :
        kinds.indexOf("text/latex") >= 0 ? String(data["text/latex"]) : "[" + kinds.join(", ") + "]";
      node = el("pre", { className: "result-text", text: text });
    }
    box.appendChild(node);
    if (ev.chart && typeof ev.chart === "object") {
      renderChart(box, ev.chart, node.tagName === "IMG");
    }
    out.appendChild(box);
  }

  function renderCodeEvent(cell, ev) {
    if (!ev || typeof ev !== "object") return;
    if ((ev.type === "stdout" || ev.type === "stderr") && typeof ev.text === "string") {
      cellText(cell, ev.text, ev.type === "stderr");
    } else if (ev.type === "result") {
      renderResult(cell, ev);
    } else if (ev.type === "error" && typeof ev.error === "string") {
      /* nanobox's own failure mid-way, not the code's */
      var err = new ApiError(0, String(ev.code || ""), ev.error);
      cell.querySelector(".cell-out").appendChild(el("pre", { className: "cell-error", text: describe(err) }));
      cell.dataset.status = "failed";
      cell.querySelector(".cell-status").textContent = "failed";
    } else if (ev.type === "error") {
      var tb = typeof ev.traceback === "string" && ev.traceback ? ev.traceback :
        String(ev.name || "Error") + ": " + String(ev.value || "");
      cell.querySelector(".cell-out").appendChild(el("pre", { className: "cell-error", text: tb }));
    } else if (ev.type === "end") {
      var notes = [];
      if (typeof ev.execution_count === "number") notes.push("[" + ev.execution_count + "]");
      notes.push(String(ev.status || "done"));
      if (ev.context) notes.push(String(ev.context));
      if (ev.truncated) notes.push("output truncated");
      if (ev.kernel_restarted) notes.push("the kernel had died and was restarted: earlier state is gone");
      if (typeof ev.duration_ms === "number") notes.push(ev.duration_ms + " ms");
      var st = cell.querySelector(".cell-status");
      st.textContent = notes.join(" · ");
      st.classList.toggle("warn", ev.status !== "ok");
      cell.dataset.status = String(ev.status || "done");
    }
    /* execution_count, and what later versions add: nothing to show */
  }

  function runCode() {
    var id = state.openId;
    var code = $("code").value;
    if (!id) return;
    if (code.trim() === "") throw new ApiError(0, "", "type some code first");
    if (state.codeCtl) throw new ApiError(0, "", "a cell is still running: wait, or Interrupt it");
    var ctl = new AbortController();
    state.codeCtl = ctl;
    var target = codeTarget();
    var body = { code: code, stream: true };
    if (target.language) body.language = target.language;
    else body.context = target.context;
    var t = $("code-timeout").value.trim();
    if (t !== "") body.timeout = Number(t);
    var cell = newCell(code);
    $("code-run").disabled = true;
    $("code-interrupt").disabled = false;

    var done = function () {
      if (state.codeCtl === ctl) state.codeCtl = null;
      if (state.openId === id) {
        $("code-run").disabled = false;
        $("code-interrupt").disabled = true;
        if (cell.dataset.status === "") {
          cell.dataset.status = "failed";
          cell.querySelector(".cell-status").textContent = "the answer ended without an end event";
        }
        refreshContexts(id);
      }
    };

    return call("POST", sbPath(id, "/code"), {
      json: body,
      headers: { Accept: "application/x-ndjson" },
      signal: ctl.signal
    }).then(function (res) {
      var ctype = res.headers.get("Content-Type") || "";
      if (ctype.indexOf("ndjson") < 0 || !res.body) {
        /* the collected answer: shown as its events would have been */
        return res.json().then(function (j) {
          j = j || {};
          if (j.stdout) renderCodeEvent(cell, { type: "stdout", text: j.stdout });
          if (j.stderr) renderCodeEvent(cell, { type: "stderr", text: j.stderr });
          (Array.isArray(j.results) ? j.results : []).forEach(function (r) {
            renderCodeEvent(cell, { type: "result", is_main_result: r.is_main_result, data: r.data,
                                    chart: r.chart });
          });
          if (j.error) renderCodeEvent(cell, { type: "error", name: j.error.name, value: j.error.value,
                                               traceback: j.error.traceback });
          renderCodeEvent(cell, { type: "end", status: j.status, context: j.context,
                                  execution_count: j.execution_count, truncated: j.truncated,
                                  kernel_restarted: j.kernel_restarted, duration_ms: j.duration_ms });
        });
      }
      return readNdjson(res, function (ev) {
        if (state.codeCtl !== ctl) return false;
        renderCodeEvent(cell, ev);
      }, function (line) {
        cellText(cell, line + "\n", true);
      });
    }).then(done, function (e) {
      var stopped = e && e.name === "AbortError";
      cell.dataset.status = stopped ? "stopped" : "failed";
      cell.querySelector(".cell-status").textContent = stopped ? "stopped" : describe(e);
      done();
      if (!stopped && state.openId === id) throw e;
    });
  }

  /* Interrupt: ask the session to stop (KeyboardInterrupt in python); the
   * cell's stream then ends as the session says. */
  function interruptCode() {
    var id = state.openId;
    if (!id || !state.codeCtl) return;
    return callJSON("POST", sbPath(id, "/code/interrupt"), { json: { context: codeTarget().context } });
  }

  /* Leaving the sandbox drops a running cell's connection, which interrupts it. */
  function stopCode() {
    var ctl = state.codeCtl;
    if (!ctl) return;
    state.codeCtl = null;
    ctl.abort();
    $("code-run").disabled = false;
    $("code-interrupt").disabled = true;
  }

  /* ----------------------------------------------------------------- files */

  function filesUrl(id, path, extra) {
    return sbPath(id, "/files?path=" + encodeURIComponent(path) + (extra || ""));
  }

  function listFiles(path, id) {
    id = id || state.openId;
    if (!id) return Promise.resolve();
    path = String(path || "").trim() || "/workspace";
    return call("GET", filesUrl(id, path)).then(function (res) {
      if (state.openId !== id) return;
      var ctype = res.headers.get("Content-Type") || "";
      if (ctype.indexOf("application/json") >= 0) {
        return res.json().then(function (j) {
          if (state.openId !== id) return;
          var dir = typeof j.path === "string" ? j.path : path;
          state.cwd = dir;
          $("path").value = dir;
          renderFiles(id, dir, Array.isArray(j.entries) ? j.entries : [], !!j.truncated);
        });
      }
      /* a file: show it alone, with its download button */
      return res.blob().then(function (blob) {
        if (state.openId !== id) return;
        var dir = parentPath(path);
        state.cwd = dir;
        renderFiles(id, dir, [{ name: baseName(path), type: "file", size: blob.size }], false);
        $("files-note").textContent = path + " is a file; its directory is " + dir;
      });
    });
  }

  function renderFiles(id, dir, entries, truncated) {
    var tbody = $("files");
    tbody.textContent = "";
    entries.slice().sort(function (a, b) {
      var ad = a.type === "dir" ? 0 : 1, bd = b.type === "dir" ? 0 : 1;
      if (ad !== bd) return ad - bd;
      return String(a.name) < String(b.name) ? -1 : String(a.name) > String(b.name) ? 1 : 0;
    }).forEach(function (f) {
      var name = String(f.name);
      var type = String(f.type || "");
      var full = joinPath(dir, name);
      var nameCell;
      var enterDir = function () { action(null, function () { return listFiles(full, id); }); };
      if (type === "dir") {
        var enter = el("button", { type: "button", className: "link enter", text: name + "/", title: "open " + full });
        enter.addEventListener("click", function (e) { e.stopPropagation(); enterDir(); });
        nameCell = el("td", { className: "name" }, [enter]);
      } else {
        nameCell = el("td", { className: "name", text: name, title: full });
      }
      var actions = el("td", { className: "r row-actions" });
      if (type === "file") {
        var dl = el("button", { type: "button", className: "download small", text: "Download" });
        dl.addEventListener("click", function (e) {
          e.stopPropagation();
          action(dl, function () { return download(id, full, name); });
        });
        actions.appendChild(dl);
      }
      var del = el("button", { type: "button", className: "delete small danger", text: "Delete" });
      del.addEventListener("click", function (e) {
        e.stopPropagation();
        if (!window.confirm("Delete " + full + (type === "dir" ? " and everything in it?" : "?"))) return;
        action(del, function () {
          return call("DELETE", filesUrl(id, full, type === "dir" ? "&recursive=1" : "")).then(function () {
            return listFiles(dir, id);
          });
        });
      });
      actions.appendChild(del);
      /* data-type: the API's own word ("file", "dir", "symlink", ...) */
      var tr = el("tr", { dataset: { name: name, type: type } }, [
        nameCell,
        el("td", { className: "type c-type", text: type }),
        el("td", { className: "r", text: type === "dir" ? "" : fmtBytes(f.size) }),
        el("td", { className: "mono c-mode", text: f.mode === undefined ? "" : String(f.mode) }),
        el("td", { className: "c-mtime", text: fmtTime(f.mtime) }),
        actions
      ]);
      if (type === "dir") {
        tr.className = "dir";
        tr.title = "open " + full;
        tr.addEventListener("click", enterDir);
      }
      tbody.appendChild(tr);
    });
    $("files-note").textContent = entries.length === 0 ? dir + " is empty" :
      dir + ": " + entries.length + (entries.length === 1 ? " entry" : " entries") +
      (truncated ? " (truncated: the API lists at most 10 000)" : "");
  }

  /* A plain <a href> cannot send the key: fetch, then save a blob URL. */
  function download(id, path, name) {
    return call("GET", filesUrl(id, path)).then(function (res) { return res.blob(); }).then(function (blob) {
      var url = URL.createObjectURL(blob);
      var a = el("a", { href: url, download: name, className: "visually-hidden" });
      document.body.appendChild(a);
      a.click();
      setTimeout(function () { URL.revokeObjectURL(url); a.remove(); }, 60000);
    });
  }

  function upload(files) {
    var id = state.openId;
    if (!id || !files || files.length === 0) return Promise.resolve();
    var dir = state.cwd || $("path").value.trim() || "/workspace";
    var list = Array.prototype.slice.call(files);
    var next = function (i) {
      if (i >= list.length) return Promise.resolve();
      var f = list[i];
      $("files-note").textContent = "uploading " + f.name + " (" + fmtBytes(f.size) + ")…";
      return call("PUT", filesUrl(id, joinPath(dir, f.name)), {
        body: f, headers: { "Content-Type": "application/octet-stream" }
      }).then(function () { return next(i + 1); });
    };
    return next(0).then(function () {
      return listFiles(dir, id);
    }, function (e) {
      return listFiles(dir, id).then(function () { throw e; }, function () { throw e; });
    });
  }

  /* ---------------------------------------------------------------- screen */

  /* A desktop sandbox's screen (display :0, which E2B's desktop SDK or any
   * Xvfb started): screenshots taken by exec (scrot) and read through the
   * files API, one after the other, into an <img> (a data: URL: the
   * console's CSP allows no other origin, so noVNC's page on the port host
   * cannot be framed here). Interactive: a click on the picture is the
   * pointer there (xdotool mousemove + click), keys typed on it are
   * xdotool type/key. Nothing is opened: no port, no VNC server. */
  var SCREEN_FILE = "/tmp/.nanobox-console-screen.png";
  var SCREEN_GAP_MS = 300;
  var SCREEN_KEYS = {
    Enter: "Return", Backspace: "BackSpace", Tab: "Tab", Escape: "Escape", Delete: "Delete",
    Home: "Home", End: "End", PageUp: "Prior", PageDown: "Next", Insert: "Insert",
    ArrowLeft: "Left", ArrowRight: "Right", ArrowUp: "Up", ArrowDown: "Down", " ": "space",
    F1: "F1", F2: "F2", F3: "F3", F4: "F4", F5: "F5", F6: "F6", F7: "F7", F8: "F8",
    F9: "F9", F10: "F10", F11: "F11", F12: "F12"
  };

  function shellQuote(t) {
    return "'" + String(t).replace(/'/g, "'\\''") + "'";
  }

  function screenExec(id, command) {
    return callJSON("POST", sbPath(id, "/exec"), { json: { command: "DISPLAY=:0 " + command, timeout: 10 } });
  }

  function screenState(text) { $("screen-state").textContent = text; }

  function startScreen() {
    var id = state.openId;
    if (!id) return;
    stopScreen();
    var sess = { id: id, stopped: false, shots: 0, input: Promise.resolve() };
    state.screen = sess;
    $("screen-show").disabled = true;
    $("screen-stop").disabled = false;
    screenState("starting…");
    var img = $("screen");
    var next = function () {
      if (sess.stopped) return;
      screenExec(id, "scrot --pointer --overwrite " + SCREEN_FILE).then(function (r) {
        if (sess.stopped) return null;
        if (!r || r.exit_code !== 0) {
          throw new ApiError(0, "no_display", "no screen on display :0 in this sandbox: a desktop sandbox " +
            "(template desktop) has one once E2B's desktop SDK or nanobox-desktop-start started it" +
            (r && r.stderr ? " (" + String(r.stderr).trim().slice(0, 200) + ")" : ""));
        }
        return call("GET", filesUrl(id, SCREEN_FILE)).then(function (res) { return res.arrayBuffer(); });
      }).then(function (buf) {
        if (sess.stopped || !buf) return;
        var bytes = new Uint8Array(buf), bin = "";
        for (var i = 0; i < bytes.length; i += 0x8000)
          bin += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
        img.src = "data:image/png;base64," + btoa(bin);
        img.hidden = false;
        sess.shots++;
        img.dataset.shots = String(sess.shots);
        screenState("live");
        sess.timer = setTimeout(next, SCREEN_GAP_MS);
      }).catch(function (e) {
        if (sess.stopped) return;
        stopScreen();
        screenState("stopped");
        showError(e);
      });
    };
    next();
  }

  function stopScreen() {
    var sess = state.screen;
    if (sess) {
      sess.stopped = true;
      clearTimeout(sess.timer);
    }
    state.screen = null;
    $("screen-show").disabled = false;
    $("screen-stop").disabled = true;
    screenState("");
  }

  function screenInteractive() { return state.screen !== null && $("screen-interactive").checked; }

  /* clicks and keys go one after the other, in the order they came: each
   * is an exec of its own, and two under way at once could swap */
  function screenInput(command) {
    var sess = state.screen;
    sess.input = sess.input.then(function () {
      if (sess.stopped) return null;
      return screenExec(sess.id, command);
    }).catch(function (err) { showError(err); });
  }

  /* a pointer event on the picture: the screen's pixel under it */
  function screenPoint(e) {
    var img = $("screen"), r = img.getBoundingClientRect();
    var sx = img.naturalWidth / (r.width || 1), sy = img.naturalHeight / (r.height || 1);
    return [Math.max(0, Math.round((e.clientX - r.left) * sx)), Math.max(0, Math.round((e.clientY - r.top) * sy))];
  }

  function screenClick(e, button) {
    if (!screenInteractive()) return;
    e.preventDefault();
    $("screen").focus();
    var p = screenPoint(e);
    screenInput("xdotool mousemove --sync " + p[0] + " " + p[1] + " click " + button);
  }

  function screenKey(e) {
    if (!screenInteractive()) return;
    var cmd;
    var mods = (e.ctrlKey ? "ctrl+" : "") + (e.altKey ? "alt+" : "") + (e.metaKey ? "super+" : "");
    if (SCREEN_KEYS[e.key]) cmd = "xdotool key " + mods + (e.shiftKey && mods ? "shift+" : "") + SCREEN_KEYS[e.key];
    else if (e.key.length === 1 && mods) cmd = "xdotool key " + mods + shellQuote(e.key.toLowerCase());
    else if (e.key.length === 1) cmd = "xdotool type -- " + shellQuote(e.key);
    else return; /* a modifier alone */
    e.preventDefault();
    screenInput(cmd);
  }

  /* ----------------------------------------------------------------- ports */

  function refreshPorts(id) {
    id = id || state.openId;
    if (!id) return Promise.resolve();
    return callJSON("GET", sbPath(id, "/ports")).then(function (j) {
      if (state.openId !== id) return;
      renderPorts(id, Array.isArray(j && j.ports) ? j.ports : []);
    });
  }

  function renderPorts(id, ports) {
    var ul = $("ports");
    ul.textContent = "";
    if (ports.length === 0) {
      ul.appendChild(el("li", { className: "muted empty", text: "No open ports." }));
      return;
    }
    ports.forEach(function (p) {
      var url = String(p.url || "");
      var link;
      var href = safeUrl(url);
      if (href) {
        link = el("a", { className: "port-url", target: "_blank", rel: "noopener noreferrer", text: url });
        link.setAttribute("href", href);
      } else {
        link = el("span", { className: "port-url", text: url });
      }
      var close = el("button", { type: "button", className: "close small", text: "Close" });
      close.addEventListener("click", function () {
        action(close, function () {
          return call("DELETE", sbPath(id, "/ports/" + encodeURIComponent(String(p.sandboxport)))).then(function () {
            return refreshPorts(id);
          });
        });
      });
      var left = typeof p.expires_at === "number" ? fmtDuration(p.expires_at - Date.now() / 1000) + " left" : "";
      ul.appendChild(el("li", { className: "port", dataset: { port: String(p.sandboxport) } }, [
        el("div", { className: "port-main" }, [
          el("strong", { className: "port-num", text: String(p.sandboxport) }),
          el("span", { className: "arrow", text: "→" }),
          link
        ]),
        el("div", { className: "port-side" }, [
          el("code", { className: "hostport", title: "host:hostport (direct, not through nginx)", text: String(p.host) + ":" + String(p.hostport) }),
          el("span", { className: "muted", text: left }),
          close
        ])
      ]));
    });
  }

  function openPort() {
    var id = state.openId;
    if (!id) return;
    var port = $("port").value.trim(), dur = $("duration").value.trim();
    var body = {};
    if (port !== "") body.sandboxport = Number(port);
    if (dur !== "") body.duration = Number(dur);
    /* the API says what is missing or out of range */
    return callJSON("POST", sbPath(id, "/ephemeralport"), { json: body }).then(function () {
      return refreshPorts(id);
    });
  }

  /* ------------------------------------------------------------- templates */

  /* The Templates page (GET/POST/DELETE /templates): the list, a build
   * form, and the build log followed as it is written (?follow=1). */

  function refreshTemplates() {
    return Promise.all([callJSON("GET", "/templates").then(function (j) {
      renderTemplates(Array.isArray(j && j.templates) ? j.templates : []);
    }), refreshVolumes()]);
  }

  /* The key's persistent volumes (GET /volumes): listed, named in the create form's list. */
  function refreshVolumes() {
    return callJSON("GET", "/volumes").then(function (j) {
      var list = Array.isArray(j && j.volumes) ? j.volumes : [];
      var ul = $("volumes");
      var names = $("volume-names");
      ul.textContent = "";
      names.textContent = "";
      if (list.length === 0) ul.appendChild(el("li", { className: "muted empty", text: "No volumes." }));
      list.forEach(function (v) {
        var name = String(v.name || "");
        names.appendChild(el("option", { value: name + ":/data" }));
        ul.appendChild(el("li", { className: "template volume", dataset: { volume: name } }, [
          el("div", { className: "tpl-top" }, [el("strong", { className: "tpl-name mono", text: name })]),
          el("div", { className: "tpl-meta" }, [
            el("span", { className: "tpl-facts", text: fmtBytes(v.size || 0) + (v.created_at ? " · " + fmtTime(v.created_at) : "") }),
            el("code", { className: "tpl-image", title: "its volumeID", text: String(v.volumeID || "") })
          ])
        ]));
      });
    });
  }

  function renderTemplates(list) {
    var ul = $("templates");
    ul.textContent = "";
    var names = $("template-names");
    names.textContent = "";
    if (list.length === 0) ul.appendChild(el("li", { className: "muted empty", text: "No templates." }));
    list.forEach(function (t) {
      var name = String(t.name || "");
      var status = String(t.status || "");
      var kind = String(t.kind || "");
      if (status === "ready") names.appendChild(el("option", { value: name }));
      var create = el("button", { type: "button", className: "create-from small primary", text: "New sandbox",
                                  title: "create a sandbox of this template and open it" });
      create.disabled = status !== "ready";
      create.addEventListener("click", function () {
        action(create, function () { return createFromTemplate(name); });
      });
      var actions = [create];
      if (kind === "build") {
        var log = el("button", { type: "button", className: "log small", text: "Log" });
        log.addEventListener("click", function () { clearError(); showLog(name); });
        actions.push(log);
      }
      if (kind === "build" || kind === "snapshot") {
        var del = el("button", { type: "button", className: "delete small danger", text: "Delete" });
        del.addEventListener("click", function () {
          if (!window.confirm("Delete template " + name + "?\n\nIts image is removed; a sandbox can no longer start from it.")) return;
          action(del, function () { return deleteTemplate(name); });
        });
        actions.push(del);
      }
      var facts = [kind === "image" ? "operator's image"
        : kind === "snapshot" ? "snapshot of " + (t.parent ? String(t.parent).slice(0, 8) : "a sandbox") +
          (t.parent_template ? " (" + t.parent_template + ")" : "")
        : "built"];
      if (t.size) facts.push(fmtBytes(t.size));
      if (t.created_at) facts.push(fmtTime(t.created_at));
      var li = el("li", { className: "template", dataset: { template: name, status: status, kind: kind } }, [
        el("div", { className: "tpl-top" }, [
          el("strong", { className: "tpl-name mono", text: name }),
          el("span", { className: "badge tpl-status state-" + status, text: status })
        ]),
        el("div", { className: "tpl-meta" }, [
          el("span", { className: "tpl-facts", text: facts.join(" · ") }),
          el("code", { className: "tpl-image", title: "the Docker image its sandboxes run", text: String(t.image || "") })
        ]),
        t.error ? el("div", { className: "tpl-error", text: String(t.error) }) : null,
        el("div", { className: "tpl-actions" }, actions)
      ]);
      ul.appendChild(li);
    });
  }

  function buildTemplate() {
    var name = $("tpl-name").value.trim();
    var dockerfile = $("tpl-dockerfile").value;
    if (name === "") throw new ApiError(0, "", "type a name for the template");
    if (dockerfile.trim() === "") throw new ApiError(0, "", "type a Dockerfile (FROM nanobox:latest, then RUN …)");
    return callJSON("POST", "/templates", { json: { name: name, dockerfile: dockerfile } }).then(function () {
      $("tpl-name").value = "";
      showLog(name);
      return refreshTemplates();
    });
  }

  function deleteTemplate(name) {
    var path = "/templates/" + encodeURIComponent(name);
    return call("DELETE", path).catch(function (e) {
      if (!(e instanceof ApiError && e.code === "in_use")) throw e;
      if (!window.confirm("Sandboxes of " + name + " are running. Delete the template anyway? They keep running until they end."))
        throw e;
      return call("DELETE", path + "?force=1");
    }).then(function () {
      if (state.logName === name) stopLog();
      return refreshTemplates();
    });
  }

  function stopLog() {
    var ctl = state.logCtl;
    state.logCtl = null;
    if (ctl) ctl.abort();
  }

  /* Follow a template's build log: Docker's builder output as it comes, its
   * errors in red, and the last line's status (ready or failed). */
  function showLog(name) {
    stopLog();
    var ctl = new AbortController();
    state.logCtl = ctl;
    state.logName = name;
    var out = $("template-log");
    var st = $("template-log-status");
    out.textContent = "";
    out.dataset.template = name;
    $("template-log-name").textContent = name;
    st.textContent = "building…";
    st.dataset.status = "";
    st.className = "badge state-building";
    var ended = false;
    var append = function (text, cls) {
      var atBottom = out.scrollHeight - out.scrollTop - out.clientHeight < 24;
      out.appendChild(cls ? el("span", { className: cls, text: text }) : document.createTextNode(text));
      if (atBottom) out.scrollTop = out.scrollHeight;
    };
    var finish = function (status, text) {
      st.textContent = text;
      st.dataset.status = status;
      st.className = "badge state-" + status;
    };
    return call("GET", "/templates/" + encodeURIComponent(name) + "/logs?follow=1", {
      headers: { Accept: "application/x-ndjson" },
      signal: ctl.signal
    }).then(function (res) {
      return readNdjson(res, function (ev) {
        if (state.logCtl !== ctl) return false;
        if (!ev || typeof ev !== "object") return;
        if (typeof ev.stream === "string") append(ev.stream);
        if (typeof ev.error === "string" && typeof ev.status !== "string") append(ev.error + "\n", "stderr");
        if (typeof ev.status === "string") {
          ended = true;
          if (ev.status === "failed") append((ev.error ? String(ev.error) : "the build failed") + "\n", "stderr");
          finish(ev.status, ev.status);
        }
      }, function (line) { append(line + "\n", "event-other"); });
    }).then(function () {
      if (state.logCtl !== ctl) return;
      state.logCtl = null;
      if (!ended) {
        if (out.textContent === "") finish("none", "no build log");   /* an operator's image */
        else finish("unknown", "log ended");
      }
      return refreshTemplates();
    }, function (e) {
      if (state.logCtl === ctl) state.logCtl = null;
      if (e && e.name === "AbortError") return;
      finish("unknown", "log unavailable");
      showError(e);
    });
  }

  /* ----------------------------------------------------------------- views */

  function viewFromHash() { return location.hash === "#templates" ? "templates" : "sandboxes"; }

  function showView(name) {
    var tpl = name === "templates";
    $("view-sandboxes").hidden = tpl;
    $("view-templates").hidden = !tpl;
    if (tpl) $("nav-templates").setAttribute("aria-current", "page");
    else $("nav-templates").removeAttribute("aria-current");
    if (tpl) $("nav-sandboxes").removeAttribute("aria-current");
    else $("nav-sandboxes").setAttribute("aria-current", "page");
    document.body.dataset.view = name;
    var hash = tpl ? "#templates" : "#sandboxes";
    if (location.hash !== hash && !(location.hash === "" && !tpl)) history.replaceState(null, "", hash);
    if (tpl) refreshTemplates().catch(function (e) { showError(e); });
  }

  /* ------------------------------------------------------------------ init */

  function saveKey() {
    state.key = $("key").value.trim();
    try {
      if (state.key) localStorage.setItem(KEY_STORAGE, state.key);
      else localStorage.removeItem(KEY_STORAGE);
    } catch (e) { /* storage refused (private mode): the key lasts for this page */ }
    $("save-key").textContent = "Saved";
    setTimeout(function () { $("save-key").textContent = "Save"; }, 1200);
    var p = [refreshList()];
    if (state.openId) p.push(openSandbox(state.openId));
    if (document.body.dataset.view === "templates") p.push(refreshTemplates());
    return Promise.all(p);
  }

  function poll() {
    refreshHealth();
    if (!document.hidden) {
      if (document.body.dataset.view === "templates") refreshTemplates().catch(function () { /* shown on Refresh */ });
      refreshList(true);
      if (state.openId) refreshPorts(state.openId).catch(function () { /* the list reports it */ });
    }
  }

  function init() {
    try { state.key = localStorage.getItem(KEY_STORAGE) || ""; } catch (e) { state.key = ""; }
    $("key").value = state.key;

    $("key-form").addEventListener("submit", function (e) {
      e.preventDefault();
      action($("save-key"), saveKey);
    });
    $("error-dismiss").addEventListener("click", clearError);
    $("refresh").addEventListener("click", function () {
      action($("refresh"), function () { return Promise.all([refreshList(), refreshHealth()]); });
    });
    $("create-form").addEventListener("submit", function (e) {
      e.preventDefault();
      action($("create"), createSandbox);
    });
    $("close-detail").addEventListener("click", closeDetail);
    $("extend-form").addEventListener("submit", function (e) {
      e.preventDefault();
      action($("extend"), extendTtl);
    });
    $("destroy").addEventListener("click", function () {
      var id = state.openId;
      if (id && confirmDestroy(id)) action($("destroy"), function () { return destroySandbox(id); });
    });
    $("snapshot").addEventListener("click", function () {
      action($("snapshot"), snapshotSandbox);
    });
    $("pause").addEventListener("click", function () {
      action($("pause"), function () { return pauseResume("pause"); });
    });
    $("resume").addEventListener("click", function () {
      action($("resume"), function () { return pauseResume("resume"); });
    });
    $("filter").addEventListener("input", applyFilter);
    $("template-form").addEventListener("submit", function (e) {
      e.preventDefault();
      action($("tpl-build"), buildTemplate);
    });
    $("tpl-refresh").addEventListener("click", function () {
      action($("tpl-refresh"), refreshTemplates);
    });
    window.addEventListener("hashchange", function () { showView(viewFromHash()); });
    $("exec-form").addEventListener("submit", function (e) {
      e.preventDefault();
      clearError();
      var p;
      try { p = runExec(); } catch (err) { showError(err); return; }
      if (p) p.catch(function (err) { showError(err); });
    });
    $("stop").addEventListener("click", stopExec);
    $("term-form").addEventListener("submit", function (e) {
      e.preventDefault();
      clearError();
      var p;
      try { p = openTerminal(); } catch (err) { showError(err); return; }
      if (p) p.catch(function (err) { showError(err); });
    });
    $("term-close").addEventListener("click", function () { stopTerminal(false); });
    $("screen-form").addEventListener("submit", function (e) {
      e.preventDefault();
      clearError();
      startScreen();
    });
    $("screen-stop").addEventListener("click", stopScreen);
    $("screen-interactive").addEventListener("change", function () {
      $("screen").dataset.interactive = $("screen-interactive").checked ? "1" : "0";
    });
    $("screen").addEventListener("click", function (e) { screenClick(e, 1); });
    $("screen").addEventListener("auxclick", function (e) { if (e.button === 1) screenClick(e, 2); });
    $("screen").addEventListener("contextmenu", function (e) { screenClick(e, 3); });
    $("screen").addEventListener("keydown", screenKey);
    $("code-form").addEventListener("submit", function (e) {
      e.preventDefault();
      clearError();
      var p;
      try { p = runCode(); } catch (err) { showError(err); return; }
      if (p) p.catch(function (err) { showError(err); });
    });
    $("code").addEventListener("keydown", function (e) {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        $("code-form").requestSubmit();
      }
    });
    $("code-interrupt").addEventListener("click", function () {
      action($("code-interrupt"), interruptCode).then(function () {
        $("code-interrupt").disabled = !state.codeCtl;
      });
    });
    $("clear-cells").addEventListener("click", function () { $("cells").textContent = ""; });
    $("clear-output").addEventListener("click", function () { $("output").textContent = ""; });
    $("files-form").addEventListener("submit", function (e) {
      e.preventDefault();
      action($("list"), function () { return listFiles($("path").value); });
    });
    $("up").addEventListener("click", function () {
      action($("up"), function () { return listFiles(parentPath(state.cwd || $("path").value)); });
    });
    $("upload").addEventListener("change", function () {
      var input = $("upload");
      var files = Array.prototype.slice.call(input.files || []);
      action(null, function () { return upload(files); }).then(function () { input.value = ""; });
    });
    $("port-form").addEventListener("submit", function (e) {
      e.preventDefault();
      action($("open-port"), openPort);
    });
    document.addEventListener("visibilitychange", function () { if (!document.hidden) poll(); });

    refreshHealth();
    refreshList(true);
    showView(viewFromHash());
    setInterval(poll, POLL_MS);
    document.body.dataset.ready = "1";
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
