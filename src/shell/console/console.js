/* world-celld queue console.
 *
 * Plain browser script, no dependencies, no build step. It runs under
 * `script-src 'self'`: no inline handlers, no eval, and every string that
 * comes from the server is written with textContent / setAttribute, never
 * as markup.
 */
(function () {
  "use strict";

  var SECRET_KEY = "celld-console-secret";
  var REFRESH_MS = 2000;
  var DL_PAGE = 50;
  var DL_STALE_MS = 15000; // re-read dead letters at least this often
  var CHART_MINUTES = 15;
  var MAX_PAGES_PER_ACTION = 1000; // guard for redrive-all / purge loops
  var SVG_NS = "http://www.w3.org/2000/svg";

  // ---------------------------------------------------------------- state

  var epoch = 0; // bumped on logout; stale answers are dropped
  var refreshedCount = 0;
  var timer = null;
  var loop = null; // running refresh loop (promise) or null
  var wanted = false;
  var wantedForce = false;
  var waiters = [];
  var cards = new Map(); // shard -> card record
  var deadLetters = new Map(); // shard -> dead letter state
  var busy = new Set(); // shards with an action running

  var $ = function (id) {
    return document.getElementById(id);
  };

  // -------------------------------------------------------------- secret

  function getSecret() {
    try {
      return window.sessionStorage.getItem(SECRET_KEY) || "";
    } catch (e) {
      return "";
    }
  }

  function setSecret(value) {
    try {
      window.sessionStorage.setItem(SECRET_KEY, value);
    } catch (e) {
      /* storage unavailable: the page cannot remember the secret */
    }
  }

  function clearSecret() {
    try {
      window.sessionStorage.removeItem(SECRET_KEY);
    } catch (e) {
      /* ignore */
    }
  }

  // ----------------------------------------------------------------- api

  function AuthError(message) {
    this.name = "AuthError";
    this.message = message;
  }
  AuthError.prototype = Object.create(Error.prototype);

  function api(method, path) {
    var secret = getSecret();
    var myEpoch = epoch;
    if (!secret) {
      return Promise.reject(new AuthError("no secret"));
    }
    return fetch(path, {
      method: method,
      headers: { authorization: "Bearer " + secret, accept: "application/json" },
      credentials: "omit",
      cache: "no-store",
      redirect: "error",
    }).then(
      function (res) {
        if (res.status === 401) {
          if (myEpoch === epoch) logout("secret refused");
          throw new AuthError("secret refused");
        }
        return res.text().then(function (text) {
          var body = null;
          if (text) {
            try {
              body = JSON.parse(text);
            } catch (e) {
              body = null;
            }
          }
          if (!res.ok) {
            var msg =
              body && body.error && typeof body.error.message === "string" && body.error.message
                ? body.error.message
                : "HTTP " + res.status + (res.statusText ? " " + res.statusText : "");
            var err = new Error(msg);
            err.status = res.status;
            throw err;
          }
          if (body === null) throw new Error("answer is not JSON (HTTP " + res.status + ")");
          return body;
        });
      },
      function (e) {
        throw new Error("network error: " + (e && e.message ? e.message : String(e)));
      }
    );
  }

  function shardPath(shard) {
    return "/v1/admin/queues/" + encodeURIComponent(shard);
  }

  // ------------------------------------------------------------- format

  function isNum(v) {
    return typeof v === "number" && isFinite(v);
  }

  function fmtInt(n) {
    if (!isNum(n)) return "–";
    return Math.round(n).toLocaleString("en-US");
  }

  function fmtCount(n, capped) {
    if (!isNum(n)) return "–";
    return (capped ? "≥ " : "") + fmtInt(n);
  }

  function trim1(x) {
    var s = x.toFixed(1);
    return s.slice(-2) === ".0" ? s.slice(0, -2) : s;
  }

  // Human duration: "850 ms", "1.2 s", "3 min", "1.5 h", "2 d".
  function fmtDuration(ms) {
    if (!isNum(ms)) return "–";
    var a = Math.abs(ms);
    if (a < 1000) return Math.round(a) + " ms";
    if (a < 60000) return trim1(a / 1000) + " s";
    if (a < 3600000) return Math.round(a / 60000) + " min";
    if (a < 86400000) return trim1(a / 3600000) + " h";
    return trim1(a / 86400000) + " d";
  }

  function fmtTime(ms) {
    if (!isNum(ms)) return "–";
    return new Date(ms).toLocaleTimeString();
  }

  function fmtDateTime(ms) {
    if (!isNum(ms)) return "–";
    return new Date(ms).toLocaleString();
  }

  function pad2(n) {
    return (n < 10 ? "0" : "") + n;
  }

  function fmtHourMinute(ms) {
    var d = new Date(ms);
    return pad2(d.getHours()) + ":" + pad2(d.getMinutes());
  }

  function shardOrder(a, b) {
    return String(a).localeCompare(String(b), "en", { numeric: true });
  }

  // ---------------------------------------------------------------- dom

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    applyAttrs(node, attrs);
    appendAll(node, children);
    return node;
  }

  function svg(tag, attrs, children) {
    var node = document.createElementNS(SVG_NS, tag);
    applyAttrs(node, attrs);
    appendAll(node, children);
    return node;
  }

  function applyAttrs(node, attrs) {
    if (!attrs) return;
    Object.keys(attrs).forEach(function (k) {
      var v = attrs[k];
      if (v === null || v === undefined || v === false) return;
      if (k === "text") node.textContent = String(v);
      else if (k === "className") node.setAttribute("class", v);
      else node.setAttribute(k, v === true ? "" : String(v));
    });
  }

  function appendAll(node, children) {
    if (children === null || children === undefined) return;
    if (!Array.isArray(children)) children = [children];
    children.forEach(function (c) {
      if (c === null || c === undefined || c === false) return;
      node.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    });
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  function setText(node, text) {
    var s = String(text);
    if (node.textContent !== s) node.textContent = s;
  }

  // ------------------------------------------------------------- status

  var statusKind = ""; // "", "info", "ok", "error", "refresh-error"

  function setStatus(text, kind) {
    var node = $("status");
    statusKind = text ? kind || "info" : "";
    node.textContent = text || "";
    node.className = "status" + (statusKind ? " status-" + statusKind : "");
  }

  // ------------------------------------------------------------- login

  function showLogin(message) {
    $("console").hidden = true;
    $("login").hidden = false;
    $("refresh").disabled = true;
    $("forget").disabled = true;
    var err = $("login-error");
    err.textContent = message || "";
    err.hidden = !message;
    var input = $("secret");
    input.value = "";
    var submit = $("login-submit");
    submit.disabled = false;
    input.focus();
  }

  function showConsole() {
    $("login").hidden = true;
    $("login-error").hidden = true;
    $("console").hidden = false;
    $("refresh").disabled = false;
    $("forget").disabled = false;
  }

  function resetView() {
    stopTimer();
    cards.forEach(function (card) {
      if (card.root.parentNode) card.root.parentNode.removeChild(card.root);
    });
    cards.clear();
    deadLetters.clear();
    busy.clear();
    setStatus("");
    $("summary").textContent = "";
    $("no-shards").hidden = true;
    $("last-refresh").textContent = "not refreshed yet";
  }

  function logout(message) {
    epoch++;
    clearSecret();
    resetView();
    showLogin(message);
  }

  function login(secret) {
    epoch++;
    setSecret(secret);
    resetView();
    showConsole();
    refresh(true);
  }

  // ------------------------------------------------------- refresh loop

  function stopTimer() {
    if (timer !== null) {
      clearTimeout(timer);
      timer = null;
    }
  }

  function schedule() {
    stopTimer();
    if (!getSecret() || !$("autorefresh").checked) return;
    timer = setTimeout(function () {
      timer = null;
      if (document.visibilityState === "hidden") return; // resumed on visibilitychange
      refresh(false);
    }, REFRESH_MS);
  }

  // Ask for a refresh. The promise resolves once a refresh that started
  // after this call has finished (requests made while one is running are
  // coalesced into the next run).
  function refresh(force) {
    wanted = true;
    if (force) wantedForce = true;
    var p = new Promise(function (resolve) {
      waiters.push(resolve);
    });
    if (!loop) loop = runLoop();
    return p;
  }

  function runLoop() {
    stopTimer();
    function step() {
      if (!wanted) return Promise.resolve();
      var force = wantedForce;
      wanted = false;
      wantedForce = false;
      var mine = waiters;
      waiters = [];
      return doRefresh(force).then(function () {
        mine.forEach(function (r) {
          r();
        });
        return step();
      });
    }
    return step().then(function () {
      loop = null;
      refreshedCount++;
      document.body.dataset.refreshed = String(refreshedCount);
      schedule();
    });
  }

  function doRefresh(force) {
    var myEpoch = epoch;
    if (!getSecret()) return Promise.resolve();
    var btn = $("refresh");
    btn.classList.add("spinning");
    return api("GET", "/v1/admin/queues")
      .then(function (health) {
        if (myEpoch !== epoch) return;
        var shards = Array.isArray(health && health.shards) ? health.shards.slice() : [];
        shards.sort(function (a, b) {
          return shardOrder(a.shard, b.shard);
        });
        var now = isNum(health.at) ? health.at : Date.now();
        renderShards(shards, now);
        return refreshDeadLetters(shards, force, myEpoch).then(function () {
          if (myEpoch !== epoch) return;
          $("last-refresh").textContent = "updated " + fmtTime(Date.now());
          $("last-refresh").classList.remove("stale");
          if (statusKind === "refresh-error") setStatus("");
        });
      })
      .catch(function (e) {
        if (e instanceof AuthError || myEpoch !== epoch) return;
        setStatus("refresh failed: " + e.message, "refresh-error");
        $("last-refresh").classList.add("stale");
      })
      .then(function () {
        btn.classList.remove("spinning");
      });
  }

  // ------------------------------------------------------- dead letters

  function dlState(shard) {
    var st = deadLetters.get(shard);
    if (!st) {
      st = { rows: [], cursor: null, hasMore: false, pages: 1, fetchedAt: 0, seenCount: null, error: null, loaded: false };
      deadLetters.set(shard, st);
    }
    return st;
  }

  function refreshDeadLetters(shards, force, myEpoch) {
    var now = Date.now();
    var jobs = shards.map(function (s) {
      var shard = s.shard;
      var st = dlState(shard);
      var m = s.messages || {};
      var key = String(m.deadLetters) + (m.capped ? "+" : "");
      var count = isNum(m.deadLetters) ? m.deadLetters : null;
      var need = force || !st.loaded || st.error !== null || st.seenCount !== key || now - st.fetchedAt > DL_STALE_MS;
      if (!need) return Promise.resolve();
      if (count === 0 && !m.capped && !st.hasMore && st.rows.length === 0 && st.loaded && !force) {
        st.seenCount = key;
        st.fetchedAt = now;
        return Promise.resolve();
      }
      return loadDeadLetters(shard, st.pages, myEpoch).then(
        function (res) {
          if (myEpoch !== epoch) return;
          st.rows = res.rows;
          st.cursor = res.cursor;
          st.hasMore = res.hasMore;
          st.pages = Math.max(1, res.pages);
          st.fetchedAt = Date.now();
          st.seenCount = key;
          st.error = null;
          st.loaded = true;
          renderDeadLetters(shard);
        },
        function (e) {
          if (e instanceof AuthError) throw e;
          if (myEpoch !== epoch) return;
          st.error = e.message;
          st.loaded = true;
          renderDeadLetters(shard);
        }
      );
    });
    return Promise.all(jobs);
  }

  // Read `pages` pages from the start, following the cursor.
  function loadDeadLetters(shard, pages, myEpoch) {
    var rows = [];
    var loaded = 0;
    function next(cursor) {
      var q = "?limit=" + DL_PAGE + (cursor ? "&cursor=" + encodeURIComponent(cursor) : "");
      return api("GET", shardPath(shard) + "/dead-letters" + q).then(function (page) {
        var data = Array.isArray(page && page.data) ? page.data : [];
        rows = rows.concat(data);
        loaded++;
        var more = !!(page && page.hasMore) && !!(page && page.cursor);
        var c = page && typeof page.cursor === "string" ? page.cursor : null;
        if (more && loaded < pages && myEpoch === epoch) return next(c);
        return { rows: rows, cursor: c, hasMore: more, pages: loaded };
      });
    }
    return next(null);
  }

  // ------------------------------------------------------------ render

  function renderShards(shards, now) {
    var container = $("shards");
    var seen = new Set();
    shards.forEach(function (s, i) {
      if (!s || typeof s.shard !== "string") return;
      seen.add(s.shard);
      var card = cards.get(s.shard);
      if (!card) {
        card = buildCard(s.shard);
        cards.set(s.shard, card);
      }
      // keep DOM order equal to the sorted order
      var at = container.children[i];
      if (at !== card.root) container.insertBefore(card.root, at || null);
      updateCard(card, s, now);
    });
    cards.forEach(function (card, shard) {
      if (!seen.has(shard)) {
        if (card.root.parentNode) card.root.parentNode.removeChild(card.root);
        cards.delete(shard);
        deadLetters.delete(shard);
      }
    });
    $("no-shards").hidden = cards.size !== 0;
    renderSummary(shards);
  }

  function renderSummary(shards) {
    var t = { pending: 0, due: 0, inflight: 0, dead: 0, capped: false };
    shards.forEach(function (s) {
      var m = s.messages || {};
      t.pending += isNum(m.pending) ? m.pending : 0;
      t.due += isNum(m.due) ? m.due : 0;
      t.inflight += isNum(m.inflight) ? m.inflight : 0;
      t.dead += isNum(m.deadLetters) ? m.deadLetters : 0;
      t.capped = t.capped || !!m.capped;
    });
    $("summary").textContent =
      shards.length +
      (shards.length === 1 ? " shard" : " shards") +
      " · " +
      fmtCount(t.pending, t.capped) +
      " pending · " +
      fmtCount(t.due, t.capped) +
      " due · " +
      fmtCount(t.inflight, t.capped) +
      " in flight · " +
      fmtCount(t.dead, t.capped) +
      " dead letters";
  }

  function metricTile(label, field, extraClass) {
    var value = el("span", { className: "metric-value", "data-field": field, text: "–" });
    var tile = el("div", { className: "metric" + (extraClass ? " " + extraClass : "") }, [
      el("span", { className: "metric-label", text: label }),
      value,
    ]);
    return { tile: tile, value: value };
  }

  function fact(label, field) {
    var dd = el("dd", { "data-field": field, text: "–" });
    return { nodes: [el("dt", { text: label }), dd], dd: dd };
  }

  function actionButton(action, label, cls, shard) {
    var b = el("button", { type: "button", className: "btn " + cls, "data-action": action, text: label });
    b.addEventListener("click", function () {
      onShardAction(shard, action);
    });
    return b;
  }

  function buildCard(shard) {
    var c = { shard: shard };
    var titleId = "shard-title-" + shard.replace(/[^A-Za-z0-9_-]/g, "_");

    c.badge = el("span", { className: "badge", text: "" });
    c.since = el("span", { className: "since", "data-field": "since", text: "" });
    c.buttons = [
      actionButton("rearm", "Rearm", "btn-quiet", shard),
      actionButton("redrive-all", "Redrive all", "btn-primary", shard),
      actionButton("purge", "Purge dead letters", "btn-danger", shard),
    ];

    var head = el("header", { className: "shard-head" }, [
      el("div", { className: "shard-title" }, [
        el("h2", { id: titleId, text: shard }),
        c.badge,
      ]),
      el("div", { className: "actions" }, c.buttons),
      c.since,
    ]);

    c.m = {
      pending: metricTile("Pending", "pending"),
      due: metricTile("Due", "due"),
      inflight: metricTile("In flight", "inflight"),
      deadLetters: metricTile("Dead letters", "deadLetters", "metric-dead"),
    };
    var metrics = el("div", { className: "metrics" }, [
      c.m.pending.tile,
      c.m.due.tile,
      c.m.inflight.tile,
      c.m.deadLetters.tile,
    ]);

    c.f = {
      oldestDue: fact("Oldest due", "oldestDue"),
      alarmAt: fact("Next alarm", "alarmAt"),
      pace: fact("Pace now / floor / ceiling", "pace"),
      couriers: fact("Couriers awake", "couriers"),
      partitions: fact("Partitions", "partitions"),
      refused: fact("Refused", "refused"),
      deadLettered: fact("Dead-lettered", "deadLettered"),
      failures: fact("Failures by status", "failures"),
    };
    var facts = el("dl", { className: "facts" });
    ["oldestDue", "alarmAt", "pace", "couriers", "partitions", "refused", "deadLettered", "failures"].forEach(function (k) {
      appendAll(facts, el("div", { className: "fact fact-" + k }, c.f[k].nodes));
    });

    c.chartBox = el("div", { className: "chart-wrap" });
    var chart = el("div", { className: "panel panel-chart" }, [
      el("h3", { text: "Deliveries per minute" }),
      c.chartBox,
      el("ul", { className: "legend", "aria-hidden": "true" }, [
        el("li", { className: "lg-delivered", text: "delivered" }),
        el("li", { className: "lg-failed", text: "failed" }),
        el("li", { className: "lg-refused", text: "refused" }),
      ]),
    ]);

    c.kindsBody = el("tbody");
    c.kindsEmpty = el("p", { className: "empty small", text: "No deliveries yet." });
    c.kindsTable = el("table", { className: "kinds" }, [
      el("thead", null, el("tr", null, [
        el("th", { scope: "col", text: "Kind" }),
        el("th", { scope: "col", className: "num", text: "Count" }),
        el("th", { scope: "col", className: "num", text: "p50" }),
        el("th", { scope: "col", className: "num", text: "p95" }),
      ])),
      c.kindsBody,
    ]);
    var kinds = el("div", { className: "panel panel-kinds" }, [
      el("h3", { text: "Latency by kind" }),
      el("div", { className: "table-scroll" }, c.kindsTable),
      c.kindsEmpty,
    ]);

    c.dlCaption = el("span", { className: "dl-count", text: "" });
    c.dlError = el("p", { className: "dl-error", role: "alert", hidden: true });
    c.dlEmpty = el("p", { className: "empty small", text: "No dead letters.", hidden: true });
    c.dlBody = el("tbody");
    c.dlTable = el("table", { className: "dead-letters", hidden: true }, [
      el("thead", null, el("tr", null, [
        el("th", { scope: "col", text: "Message id" }),
        el("th", { scope: "col", text: "Queue" }),
        el("th", { scope: "col", text: "Run id" }),
        el("th", { scope: "col", className: "num", text: "Attempts" }),
        el("th", { scope: "col", text: "Last error" }),
        el("th", { scope: "col", text: "Last answer" }),
        el("th", { scope: "col", text: "Failed at" }),
        el("th", { scope: "col", className: "visually-hidden", text: "Action" }),
      ])),
      c.dlBody,
    ]);
    c.more = el("button", { type: "button", className: "btn btn-quiet btn-small", "data-action": "more", text: "Load more", hidden: true });
    c.more.addEventListener("click", function () {
      onMore(shard);
    });
    var dead = el("div", { className: "panel panel-dead" }, [
      el("h3", null, ["Dead letters ", c.dlCaption]),
      c.dlError,
      el("div", { className: "table-scroll" }, c.dlTable),
      c.dlEmpty,
      el("div", { className: "more-row" }, c.more),
    ]);

    c.root = el("section", { className: "shard card", "data-shard": shard, "aria-labelledby": titleId }, [
      head,
      metrics,
      facts,
      el("div", { className: "panels" }, [chart, kinds]),
      dead,
    ]);
    return c;
  }

  function updateCard(c, s, now) {
    var m = s.messages || {};
    var capped = !!m.capped;
    setText(c.m.pending.value, fmtCount(m.pending, capped));
    setText(c.m.due.value, fmtCount(m.due, capped));
    setText(c.m.inflight.value, fmtCount(m.inflight, capped));
    setText(c.m.deadLetters.value, fmtCount(m.deadLetters, capped));
    c.m.deadLetters.tile.classList.toggle("alert", isNum(m.deadLetters) && m.deadLetters > 0);
    c.root.classList.toggle("capped", capped);
    [c.m.pending, c.m.due, c.m.inflight, c.m.deadLetters].forEach(function (t) {
      if (capped) t.value.setAttribute("title", "count stopped at a read limit");
      else t.value.removeAttribute("title");
    });

    // health badge
    var badge = "healthy";
    var badgeClass = "ok";
    var age = s.oldestDueAgeMs;
    if (typeof s.error === "string") {
      // The shard could not be asked (the health answer carries why).
      badge = "unreachable: " + s.error.slice(0, 120);
      badgeClass = "bad";
    } else if (isNum(m.deadLetters) && m.deadLetters > 0) {
      badge = "dead letters";
      badgeClass = "bad";
    } else if (isNum(s.unreachable) && s.unreachable > 0) {
      // Some of the shard's partitions could not be asked: the counts are the others'.
      badge = "partly unreachable";
      badgeClass = "warn";
    } else if (isNum(age) && age > 30000) {
      badge = "lagging";
      badgeClass = "warn";
    } else if (!(m.pending > 0) && !(m.inflight > 0)) {
      badge = "idle";
      badgeClass = "idle";
    }
    setText(c.badge, badge);
    c.badge.className = "badge badge-" + badgeClass;

    setText(
      c.since,
      isNum(s.since) ? "counters since " + fmtTime(s.since) + " (" + fmtDuration(now - s.since) + ")" : ""
    );

    setText(c.f.oldestDue.dd, isNum(age) ? fmtDuration(age) : "none due");
    c.f.oldestDue.dd.classList.toggle("warn", isNum(age) && age > 30000);

    if (isNum(s.alarmAt)) {
      var delta = s.alarmAt - now;
      var rel = delta >= 0 ? "in " + fmtDuration(delta) : fmtDuration(-delta) + " overdue";
      setText(c.f.alarmAt.dd, fmtTime(s.alarmAt) + " (" + rel + ")");
      c.f.alarmAt.dd.classList.toggle("warn", delta < -5000);
    } else {
      setText(c.f.alarmAt.dd, "not armed");
      c.f.alarmAt.dd.classList.remove("warn");
    }

    var p = s.pace || {};
    setText(c.f.pace.dd, fmtInt(p.now) + " / " + fmtInt(p.floor) + " / " + fmtInt(p.ceiling));
    setText(c.f.couriers.dd, fmtInt(s.couriersAwake));
    // A partitioned shard (QUEUE_PARTITIONS): how many objects serve it, and any not answering.
    var parts = Array.isArray(s.partitions) ? s.partitions : null;
    setText(
      c.f.partitions.dd,
      parts ? fmtInt(parts.length) + (isNum(s.unreachable) && s.unreachable > 0 ? " (" + fmtInt(s.unreachable) + " unreachable)" : "") : "1"
    );

    var d = s.deliveries || {};
    setText(c.f.refused.dd, fmtInt(d.refused));
    setText(c.f.deadLettered.dd, fmtInt(d.deadLettered));
    renderFailures(c.f.failures.dd, d.failuresByStatus);
    renderChart(c, Array.isArray(d.minutes) ? d.minutes : [], now);
    renderKinds(c, Array.isArray(d.kinds) ? d.kinds : []);
    setButtonsBusy(c, busy.has(c.shard));
  }

  function renderFailures(dd, map) {
    clear(dd);
    var keys = map && typeof map === "object" ? Object.keys(map) : [];
    keys = keys.filter(function (k) {
      return isNum(map[k]) && map[k] > 0;
    });
    if (keys.length === 0) {
      dd.textContent = "none";
      return;
    }
    keys.sort(function (a, b) {
      return map[b] - map[a] || shardOrder(a, b);
    });
    keys.forEach(function (k) {
      dd.appendChild(
        el("span", { className: "chip" + (/^5|transport/.test(k) ? " chip-bad" : "") }, [
          el("span", { className: "chip-key", text: k }),
          el("span", { className: "chip-val", text: "× " + fmtInt(map[k]) }),
        ])
      );
    });
  }

  function renderKinds(c, kinds) {
    clear(c.kindsBody);
    var list = kinds.slice().sort(function (a, b) {
      return (b.count || 0) - (a.count || 0) || String(a.kind).localeCompare(String(b.kind));
    });
    list.forEach(function (k) {
      c.kindsBody.appendChild(
        el("tr", null, [
          el("td", { className: "kind mono", title: String(k.kind), text: String(k.kind) }),
          el("td", { className: "num", text: fmtInt(k.count) }),
          el("td", { className: "num", text: fmtDuration(k.p50Ms) }),
          el("td", { className: "num", text: fmtDuration(k.p95Ms) }),
        ])
      );
    });
    c.kindsTable.hidden = list.length === 0;
    c.kindsEmpty.hidden = list.length !== 0;
  }

  // Stacked bars (delivered, failed, refused) for the last 15 minutes,
  // placed by each bucket's minute so quiet minutes show as gaps.
  function renderChart(c, minutes, now) {
    var W = 360;
    var H = 132;
    var padL = 30;
    var padR = 6;
    var padT = 8;
    var padB = 20;
    var plotW = W - padL - padR;
    var plotH = H - padT - padB;
    var slot = plotW / CHART_MINUTES;
    var barW = Math.max(2, slot * 0.68);

    var nowMinute = Math.floor(now / 60000);
    var slots = [];
    for (var i = 0; i < CHART_MINUTES; i++) slots.push(null);
    minutes.forEach(function (b) {
      if (!b || !isNum(b.at)) return;
      var idx = CHART_MINUTES - 1 - (nowMinute - Math.floor(b.at / 60000));
      if (idx < 0 || idx >= CHART_MINUTES) return;
      slots[idx] = b;
    });
    var max = 0;
    var totals = { delivered: 0, failed: 0, refused: 0, deadLettered: 0 };
    slots.forEach(function (b) {
      if (!b) return;
      var sum = (b.delivered || 0) + (b.failed || 0) + (b.refused || 0);
      if (sum > max) max = sum;
      totals.delivered += b.delivered || 0;
      totals.failed += b.failed || 0;
      totals.refused += b.refused || 0;
      totals.deadLettered += b.deadLettered || 0;
    });
    var scaleMax = niceCeil(max);

    var label =
      "Deliveries per minute on " +
      c.shard +
      ", last " +
      CHART_MINUTES +
      " minutes: " +
      fmtInt(totals.delivered) +
      " delivered, " +
      fmtInt(totals.failed) +
      " failed, " +
      fmtInt(totals.refused) +
      " refused, " +
      fmtInt(totals.deadLettered) +
      " dead-lettered.";

    var root = svg("svg", {
      className: "chart",
      viewBox: "0 0 " + W + " " + H,
      role: "img",
      "aria-label": label,
      focusable: "false",
    });
    var title = svg("title");
    title.textContent = label;
    root.appendChild(title);

    // grid lines and y labels (0, half, max)
    [0, 0.5, 1].forEach(function (f) {
      var y = padT + plotH - f * plotH;
      root.appendChild(svg("line", { className: "grid", x1: padL, x2: W - padR, y1: y, y2: y }));
      var t = svg("text", { className: "axis", x: padL - 4, y: y + 3, "text-anchor": "end" });
      t.textContent = scaleMax === 0 ? (f === 0 ? "0" : "") : compact(scaleMax * f);
      root.appendChild(t);
    });

    slots.forEach(function (b, idx) {
      var x = padL + idx * slot + (slot - barW) / 2;
      var g = svg("g", { className: "bar" });
      var minuteStart = (nowMinute - (CHART_MINUTES - 1 - idx)) * 60000;
      var tip = svg("title");
      if (b) {
        tip.textContent =
          fmtHourMinute(b.at) +
          ": " +
          fmtInt(b.delivered || 0) +
          " delivered, " +
          fmtInt(b.failed || 0) +
          " failed, " +
          fmtInt(b.refused || 0) +
          " refused, " +
          fmtInt(b.deadLettered || 0) +
          " dead-lettered";
      } else {
        tip.textContent = fmtHourMinute(minuteStart) + ": no deliveries";
      }
      g.appendChild(tip);
      // hover target covering the whole slot
      g.appendChild(svg("rect", { className: "hit", x: padL + idx * slot, y: padT, width: slot, height: plotH }));
      var base = padT + plotH;
      if (b && scaleMax > 0) {
        [
          ["delivered", b.delivered],
          ["failed", b.failed],
          ["refused", b.refused],
        ].forEach(function (part) {
          var v = isNum(part[1]) ? part[1] : 0;
          if (v <= 0) return;
          var h = Math.max(1, (v / scaleMax) * plotH);
          base -= h;
          g.appendChild(
            svg("rect", { className: "seg seg-" + part[0], x: round2(x), y: round2(base), width: round2(barW), height: round2(h) })
          );
        });
        if ((b.deadLettered || 0) > 0) {
          g.appendChild(svg("circle", { className: "dl-dot", cx: round2(x + barW / 2), cy: round2(base - 4), r: 2.5 }));
        }
      } else {
        g.appendChild(svg("rect", { className: "seg seg-empty", x: round2(x), y: padT + plotH - 1, width: round2(barW), height: 1 }));
      }
      root.appendChild(g);
    });

    var x0 = svg("text", { className: "axis", x: padL, y: H - 5, "text-anchor": "start" });
    x0.textContent = "−" + CHART_MINUTES + " min";
    var x1 = svg("text", { className: "axis", x: W - padR, y: H - 5, "text-anchor": "end" });
    x1.textContent = "now";
    root.appendChild(x0);
    root.appendChild(x1);

    clear(c.chartBox);
    c.chartBox.appendChild(root);
  }

  function round2(v) {
    return Math.round(v * 100) / 100;
  }

  function niceCeil(v) {
    if (!(v > 0)) return 0;
    var p = Math.pow(10, Math.floor(Math.log10(v)));
    var steps = [1, 2, 2.5, 5, 10];
    for (var i = 0; i < steps.length; i++) {
      if (v <= steps[i] * p) return steps[i] * p;
    }
    return 10 * p;
  }

  function compact(n) {
    if (n >= 1e6) return trim1(n / 1e6) + "M";
    if (n >= 1e3) return trim1(n / 1e3) + "k";
    return n % 1 === 0 ? String(n) : trim1(n);
  }

  function renderDeadLetters(shard) {
    var c = cards.get(shard);
    var st = deadLetters.get(shard);
    if (!c || !st) return;
    clear(c.dlBody);
    st.rows.forEach(function (d) {
      c.dlBody.appendChild(deadLetterRow(shard, d));
    });
    var n = st.rows.length;
    c.dlTable.hidden = n === 0;
    c.dlEmpty.hidden = n !== 0 || st.error !== null;
    c.more.hidden = !st.hasMore;
    c.dlCaption.textContent = n === 0 ? "" : "(" + fmtInt(n) + (st.hasMore ? " shown, more available)" : ")");
    c.dlError.hidden = st.error === null;
    c.dlError.textContent = st.error === null ? "" : "could not read dead letters: " + st.error;
    setButtonsBusy(c, busy.has(shard));
  }

  function textCell(field, value, cls) {
    var s = value === null || value === undefined || value === "" ? "–" : String(value);
    var td = el("td", { "data-field": field, className: cls || null, text: s });
    if (s !== "–") td.setAttribute("title", s);
    else td.classList.add("muted");
    return td;
  }

  function deadLetterRow(shard, d) {
    var id = String(d.messageId);
    var btn = el("button", { type: "button", className: "btn btn-small", "data-action": "redrive", text: "Redrive" });
    btn.setAttribute("aria-label", "Redrive " + id);
    btn.addEventListener("click", function () {
      onRedriveOne(shard, id, btn);
    });
    var failed = el("td", { "data-field": "failedAt", className: "nowrap", text: fmtDateTime(d.failedAt) });
    if (!isNum(d.failedAt)) failed.classList.add("muted");
    return el("tr", { className: "dead-letter", "data-message-id": id }, [
      textCell("messageId", id, "mono ellipsis"),
      textCell("queueName", d.queueName, "mono ellipsis"),
      textCell("runId", d.runId, "mono ellipsis"),
      el("td", { "data-field": "attempts", className: "num", text: fmtInt(d.attempts) }),
      textCell("lastError", d.lastError, "ellipsis err-text"),
      textCell("lastAnswer", d.lastAnswer, "mono ellipsis excerpt"),
      failed,
      el("td", { className: "row-action" }, btn),
    ]);
  }

  // ------------------------------------------------------------ actions

  function setButtonsBusy(c, isBusy) {
    c.buttons.forEach(function (b) {
      b.disabled = isBusy;
    });
    c.root.classList.toggle("busy", isBusy);
    c.more.disabled = isBusy;
    var rowButtons = c.dlBody.querySelectorAll('button[data-action="redrive"]');
    for (var i = 0; i < rowButtons.length; i++) rowButtons[i].disabled = isBusy;
  }

  function beginAction(shard) {
    if (busy.has(shard)) return false;
    busy.add(shard);
    var c = cards.get(shard);
    if (c) setButtonsBusy(c, true);
    return true;
  }

  function endAction(shard) {
    busy.delete(shard);
    var c = cards.get(shard);
    if (c) setButtonsBusy(c, false);
  }

  // Run a shard action; refresh (dead letters included) and then report.
  function runAction(shard, pending, work) {
    if (!beginAction(shard)) return;
    var myEpoch = epoch;
    setStatus(pending, "info");
    work()
      .then(
        function (message) {
          return { ok: true, message: message };
        },
        function (e) {
          return { ok: false, message: e.message, auth: e instanceof AuthError };
        }
      )
      .then(function (r) {
        if (myEpoch !== epoch || r.auth) return;
        endAction(shard);
        return refresh(true).then(function () {
          if (myEpoch !== epoch) return;
          if (r.ok && r.message && typeof r.message === "object") setStatus(r.message.text, r.message.kind);
          else setStatus(String(r.message), r.ok ? "ok" : "error");
        });
      });
  }

  function onShardAction(shard, action) {
    if (action === "rearm") {
      runAction(shard, "rearming " + shard + "…", function () {
        return api("POST", shardPath(shard) + "/rearm").then(function (r) {
          return isNum(r && r.alarmAt) ? "rearmed " + shard + ", alarm at " + fmtTime(r.alarmAt) : "rearmed " + shard;
        });
      });
    } else if (action === "redrive-all") {
      runAction(shard, "redriving dead letters of " + shard + "…", function () {
        var redriven = 0;
        var failed = 0;
        var calls = 0;
        function again() {
          calls++;
          return api("POST", shardPath(shard) + "/redrive-all").then(function (r) {
            redriven += isNum(r && r.redriven) ? r.redriven : 0;
            failed += isNum(r && r.failed) ? r.failed : 0;
            setStatus("redriving dead letters of " + shard + "… " + fmtInt(redriven) + " so far", "info");
            if (r && r.hasMore && calls < MAX_PAGES_PER_ACTION) return again();
            var text = "redriven " + fmtInt(redriven) + " dead letter" + (redriven === 1 ? "" : "s") + " of " + shard;
            if (failed > 0) return { text: text + ", " + fmtInt(failed) + " failed", kind: "error" };
            return { text: text, kind: "ok" };
          });
        }
        return again();
      });
    } else if (action === "purge") {
      var c = cards.get(shard);
      var n = c ? c.m.deadLetters.value.textContent : "all";
      if (!window.confirm("Purge " + n + " dead letters of " + shard + "? This cannot be undone.")) return;
      runAction(shard, "purging dead letters of " + shard + "…", function () {
        var purged = 0;
        var calls = 0;
        function again() {
          calls++;
          return api("POST", shardPath(shard) + "/purge").then(function (r) {
            purged += isNum(r && r.purged) ? r.purged : 0;
            setStatus("purging dead letters of " + shard + "… " + fmtInt(purged) + " so far", "info");
            if (r && r.hasMore && calls < MAX_PAGES_PER_ACTION) return again();
            return "purged " + fmtInt(purged) + " dead letter" + (purged === 1 ? "" : "s") + " of " + shard;
          });
        }
        return again();
      });
    }
  }

  function onRedriveOne(shard, id, btn) {
    btn.classList.add("working");
    runAction(shard, "redriving " + id + "…", function () {
      var path = shardPath(shard) + "/dead-letters/" + encodeURIComponent(id) + "/redrive";
      return api("POST", path).then(function (r) {
        if (r && r.ok === true) return "redriven " + id;
        return { text: "could not redrive " + id + " (it may be gone already)", kind: "error" };
      });
    });
  }

  function onMore(shard) {
    var st = dlState(shard);
    var c = cards.get(shard);
    if (!st.hasMore || !st.cursor || busy.has(shard)) return;
    var myEpoch = epoch;
    if (c) c.more.disabled = true;
    var q = "?limit=" + DL_PAGE + "&cursor=" + encodeURIComponent(st.cursor);
    api("GET", shardPath(shard) + "/dead-letters" + q).then(
      function (page) {
        if (myEpoch !== epoch) return;
        var data = Array.isArray(page && page.data) ? page.data : [];
        var have = new Set(
          st.rows.map(function (r) {
            return String(r.messageId);
          })
        );
        st.rows = st.rows.concat(
          data.filter(function (r) {
            return !have.has(String(r.messageId));
          })
        );
        st.hasMore = !!(page && page.hasMore) && !!(page && page.cursor);
        st.cursor = page && typeof page.cursor === "string" ? page.cursor : null;
        st.pages += 1;
        st.fetchedAt = Date.now();
        st.error = null;
        renderDeadLetters(shard);
      },
      function (e) {
        if (e instanceof AuthError || myEpoch !== epoch) return;
        st.error = e.message;
        renderDeadLetters(shard);
        if (c) c.more.disabled = false;
      }
    );
  }

  // --------------------------------------------------------------- boot

  function boot() {
    $("login").addEventListener("submit", function (ev) {
      ev.preventDefault();
      var value = $("secret").value.trim();
      if (!value) {
        var err = $("login-error");
        err.textContent = "enter the admin secret";
        err.hidden = false;
        return;
      }
      $("secret").value = "";
      login(value);
    });

    $("refresh").addEventListener("click", function () {
      refresh(true);
    });

    $("autorefresh").addEventListener("change", function () {
      if ($("autorefresh").checked) {
        if (getSecret()) refresh(false);
      } else {
        stopTimer();
      }
    });

    $("forget").addEventListener("click", function () {
      logout("");
      setStatus("");
    });

    document.addEventListener("visibilitychange", function () {
      if (document.visibilityState === "visible" && getSecret() && $("autorefresh").checked && !loop && timer === null) {
        refresh(false);
      }
    });

    if (getSecret()) {
      showConsole();
      refresh(true);
    } else {
      showLogin("");
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", boot);
  else boot();
})();
