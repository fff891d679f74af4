// The viewer page: a hash router over the JSON API of selfplay_gen/viewer/app.py.
// Every text from a game (model or human) is put in the page with textContent, never as markup;
// the only HTML inserted is the server's rendering of a report's markdown, which escapes raw HTML.
"use strict";

const main = () => document.getElementById("main");

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function link(route, params, ...children) {
  return el("a", { href: "#/" + route + "?" + new URLSearchParams(params).toString() }, ...children);
}

function alertBox(message) {
  const box = document.getElementById("alert");
  box.textContent = message || "";
  box.hidden = !message;
}

// the token of this page: the server answers a request that changes something only with it
const TOKEN = (document.querySelector('meta[name="selfplay-token"]') || {}).content || "";

async function api(path, options) {
  const response = await fetch(path, options);
  let body;
  try {
    body = await response.json();
  } catch (err) {
    throw new Error(`${path}: HTTP ${response.status}`);
  }
  if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
  return body;
}

const fmt = (x, digits = 3) => (typeof x === "number" ? x.toFixed(digits) : "–");
const seatName = (s) => `seat ${s}`;
const size = (n) => (n < 1e6 ? `${(n / 1e3).toFixed(1)} kB` : `${(n / 1e6).toFixed(1)} MB`);

// ---------------------------------------------------------------- library (runs and files)

function groupOf(path) {
  const slash = path.indexOf("/");
  return slash < 0 ? "." : path.slice(0, slash);
}

async function showLibrary() {
  const lib = await api("/api/library");
  const page = [el("h1", {}, lib.root)];
  if (lib.summary) {
    const summary = el("section", { class: "card markdown", id: "run-summary" });
    summary.innerHTML = lib.summary; // rendered by the server with raw HTML escaped
    page.push(el("h2", {}, "Run summary"), summary);
  }
  if (lib.reports.length) {
    page.push(
      el("h2", {}, "Reports"),
      el("ul", { class: "reports" }, lib.reports.map((dir) => el("li", {}, link("report", { dir }, dir)))),
    );
  }
  page.push(el("h2", {}, "Games"));
  if (!lib.games_files.length) page.push(el("p", { class: "muted" }, "No games files here yet."));
  else {
    page.push(
      el(
        "table",
        { class: "list", id: "files" },
        el("tr", {}, el("th", {}, "stage"), el("th", {}, "file"), el("th", {}, "size")),
        lib.games_files.map((f, i) => {
          const group = groupOf(f.file);
          const first = i === 0 || groupOf(lib.games_files[i - 1].file) !== group;
          return el(
            "tr",
            { class: first ? "group-start" : "" },
            el("td", { class: "stage" }, first ? (group === "." ? "(top level)" : group) : ""),
            el("td", {}, link("games", { file: f.file }, f.file)),
            el("td", { class: "num" }, size(f.bytes)),
          );
        }),
      ),
    );
  }
  main().replaceChildren(...page);
}

// ---------------------------------------------------------------- a games file

async function showGames(params) {
  const file = params.get("file");
  const data = await api("/api/games?" + new URLSearchParams({ file }));
  const page = [el("p", {}, link("", {}, "← all files")), el("h1", {}, data.file)];
  if (data.games.length) {
    const n = data.games.length;
    const agreed = data.games.filter((g) => g.agreed).length;
    const mean = [0, 1].map((s) => data.games.reduce((sum, g) => sum + g.rewards[s], 0) / n);
    const failed = data.games.filter((g) => g.failed).length;
    page.push(
      el("p", { class: "muted", id: "file-summary" }, `${n} games · agreed ${((100 * agreed) / n).toFixed(1)}% · mean reward seat 0 ${fmt(mean[0])}, seat 1 ${fmt(mean[1])}` + (failed ? ` · ${failed} failed` : "")),
    );
  }
  if (data.errors.length) {
    page.push(
      el(
        "div",
        { class: "errors", id: "file-errors" },
        el("strong", {}, `${data.errors.length} line(s) are not game records and are left out:`),
        el("ul", {}, data.errors.map((e) => el("li", {}, e.error))),
      ),
    );
  }
  const head = ["line", "game", "instance", "seats", "rewards", "agreed", "end", "moves", "invalid"];
  page.push(
    el(
      "table",
      { class: "list", id: "games" },
      el("tr", {}, head.map((h) => el("th", {}, h))),
      data.games.map((g) =>
        el(
          "tr",
          { class: g.failed ? "failed" : "" },
          el("td", { class: "num" }, g.line),
          el("td", {}, link("game", { file: data.file, line: g.line }, g.game_id)),
          el("td", {}, g.instance_id),
          el("td", {}, g.seats.join(" · ")),
          el("td", { class: "num" }, g.rewards.map((r) => (Number.isInteger(r) ? String(r) : fmt(r))).join(" / ")),
          el("td", {}, g.agreed ? "yes" : "no"),
          el("td", {}, g.termination),
          el("td", { class: "num" }, g.moves),
          el("td", { class: "num" }, g.invalid),
        ),
      ),
    ),
  );
  main().replaceChildren(...page);
}

// ---------------------------------------------------------------- one game

function hiddenGrid(detail, values, marks) {
  // values[r][p]: a number, or null for a hidden cell; marks(r, p) -> extra class names
  return el(
    "table",
    { class: "grid" },
    el("tr", {}, el("th", {}, ""), detail.papers.map((p) => el("th", { class: "paper" }, p))),
    detail.reviewers.map((name, r) =>
      el(
        "tr",
        {},
        el("th", { class: "reviewer" }, name),
        detail.papers.map((_, p) => {
          const v = values[r][p];
          const cls = [v === null ? "hidden" : "", marks ? marks(r, p) : ""].join(" ").trim();
          return el("td", { class: cls, title: v === null ? "hidden from this seat" : null }, v === null ? "" : v);
        }),
      ),
    ),
  );
}

function planList(detail, plan) {
  const byPaper = new Map(plan.pairs.map(([r, p]) => [p, r]));
  return el(
    "ul",
    { class: "plan" },
    detail.papers.map((paper, p) => el("li", {}, `${paper}: ${detail.reviewers[byPaper.get(p)]} (${detail.table[byPaper.get(p)][p]})`)),
  );
}

function privateViews(view) {
  const d = view.detail;
  if (!d) return null;
  // what a game's detail holds decides what is drawn (`Game.record_view`): each seat's view of a
  // table with hidden cells, or each seat's values of the items in a pool
  if (d.views) {
    return el(
      "div",
      { class: "two" },
      [0, 1].map((s) =>
        el(
          "section",
          { class: "card view", "data-seat": s },
          el("h3", {}, `${seatName(s)} sees (scale ×${fmt(d.scales[s], 2)}; blank = hidden)`),
          hiddenGrid(d, d.views[s]),
        ),
      ),
    );
  }
  if (d.items) {
    return el(
      "section",
      { class: "card view" },
      el("h3", {}, "The pool and each seat's private values (points per item)"),
      el(
        "table",
        { class: "list" },
        el("tr", {}, el("th", {}, "item"), el("th", {}, "count"), el("th", {}, "seat 0 values"), el("th", {}, "seat 1 values")),
        d.items.map((item, i) =>
          el("tr", {}, el("td", {}, item), el("td", { class: "num" }, d.counts[i]), el("td", { class: "num" }, d.values[0][i]), el("td", { class: "num" }, d.values[1][i])),
        ),
      ),
    );
  }
  return null;
}

function shareText(d, share) {
  return d.items.map((item, i) => `${share[i]} ${share[i] === 1 ? item : d.plurals[i]}`).join(", ");
}

function turnNode(view, turn, number) {
  const d = view.detail;
  const body = [el("div", { class: "text" }, turn.text)];
  if (turn.error) body.push(el("div", { class: "error" }, "invalid: " + turn.error));
  if (turn.plan && d) {
    body.push(
      el("details", { class: "plan-box" }, el("summary", {}, `proposal worth ${turn.plan.raw} of ${d.best_reward} (${fmt(turn.plan.normalized)})`), planList(d, turn.plan)),
    );
  }
  if (turn.share && d) {
    body.push(
      el("div", { class: "share" }, `takes ${shareText(d, turn.share.share)}; leaves ${shareText(d, turn.share.rest)} — points: seat 0 ${turn.share.points[0]}, seat 1 ${turn.share.points[1]}`),
    );
  }
  return el(
    "li",
    { class: `turn seat${turn.seat} ${turn.kind}` },
    el("span", { class: "who" }, `${number}. ${seatName(turn.seat)} (${view.seats[turn.seat].kind}) · ${turn.kind}`),
    body,
  );
}

function invalidText(outcome, bySeat, you) {
  // who made the invalid moves, and whose ended the game
  const name = (s) => (s === you ? `you (${seatName(s)})` : seatName(s));
  const counts = bySeat.map((n, s) => `${name(s)}: ${n}`).join(" · ");
  const ender = outcome && outcome.termination === "max_invalid" && outcome.invalid_seat !== undefined ? outcome.invalid_seat : null;
  return ender === null ? counts : `${counts} — ${name(ender)} made too many invalid moves in a row, which ended the game`;
}

function outcomeNode(view) {
  const o = view.outcome;
  const d = view.detail;
  const rows = [
    ["ended", `${o.termination}${o.truncated ? " (truncated)" : ""}`],
    ["agreed", o.agreed ? "yes" : "no"],
    ["rewards", o.rewards.map((r) => fmt(r)).join(" / ")],
  ];
  if (view.invalid_by_seat) rows.push(["invalid moves", invalidText({ ...o, invalid_seat: view.invalid_seat }, view.invalid_by_seat)]);
  if (d && d.outcome_rows) rows.push(...d.outcome_rows); // the game's own lines, as its view words them
  if (view.failure) rows.push(["failure", `${view.failure.reason}: ${view.failure.detail || ""}`]);
  return el(
    "section",
    { class: "card outcome", id: "outcome" },
    el("h3", {}, "Outcome"),
    el("table", { class: "kv" }, rows.map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, v)))),
  );
}

function bestPlanNode(view) {
  const d = view.detail;
  if (!d || !d.best_plan) return null;
  const best = new Set(d.best_plan.pairs.map(([r, p]) => `${r},${p}`));
  const agreed = new Set((d.agreed_plan ? d.agreed_plan.pairs : []).map(([r, p]) => `${r},${p}`));
  const marks = (r, p) => [best.has(`${r},${p}`) ? "best" : "", agreed.has(`${r},${p}`) ? "agreed" : ""].join(" ");
  return el(
    "details",
    { class: "card", id: "best-plan" },
    el("summary", {}, `What the best plan would have been: ${d.best_reward}` + (d.agreed_plan ? `, agreed ${d.agreed_plan.raw}` : ", nothing agreed")),
    el("p", { class: "muted" }, "The whole table, unscaled. Filled cells: the best assignment; outlined cells: the agreed one."),
    hiddenGrid(d, d.table, marks),
  );
}

function chatsNode(view) {
  return el(
    "div",
    { class: "two" },
    view.seats.map((seat, s) =>
      el(
        "details",
        { class: "card chat" },
        el("summary", { title: seat.model_path || null }, `${seatName(s)} (${seat.kind}${seat.model ? ", " + seat.model : ""}): everything it was given and said`),
        seat.messages.map((m) => el("div", { class: `msg ${m.role}` }, el("span", { class: "role" }, m.role), el("pre", {}, m.content))),
      ),
    ),
  );
}

function seatsLine(view) {
  return view.seats.map((seat, s) => `${seatName(s)}: ${seat.kind}${seat.backend && seat.backend !== seat.kind ? " / " + seat.backend : ""}${seat.model ? " " + seat.model : ""}`).join(" · ");
}

async function showGame(params) {
  const file = params.get("file");
  const line = params.get("line");
  const view = await api("/api/game?" + new URLSearchParams({ file, line }));
  let shown = 0;
  const turns = el("ol", { class: "turns", id: "turns" });
  const counter = el("span", { id: "turn-counter" });
  const end = el("div", { id: "end" });
  const prev = el("button", { id: "prev", onclick: () => step(-1) }, "◀ previous");
  const next = el("button", { id: "next", onclick: () => step(1) }, "next turn ▶");
  const last = el("button", { id: "to-end", onclick: () => step(view.turns.length) }, "to the end ▶▶");
  function step(delta) {
    shown = Math.max(0, Math.min(view.turns.length, shown + delta));
    turns.replaceChildren(...view.turns.slice(0, shown).map((t, i) => turnNode(view, t, i + 1)));
    counter.textContent = `turn ${shown} of ${view.turns.length}`;
    prev.disabled = shown === 0;
    next.disabled = last.disabled = shown === view.turns.length;
    end.replaceChildren(...(shown === view.turns.length ? [outcomeNode(view), bestPlanNode(view)] : []));
  }
  const others = el("section", { class: "card", id: "same-instance" }, el("h3", {}, "This instance in other games (side by side)"), el("p", { class: "muted" }, "Looking through the other games files…"));
  api("/api/same?" + new URLSearchParams({ file, line }))
    .then((same) =>
      others.replaceChildren(
        others.firstChild,
        same.length
          ? el("ul", {}, same.map((g) => el("li", {}, link("compare", { a: file, al: line, b: g.file, bl: g.line }, `${g.file} · ${g.game_id}`), ` — rewards ${g.rewards.map((r) => fmt(r)).join(" / ")}`)))
          : el("p", { class: "muted" }, "No other game of this instance under this directory."),
      ),
    )
    .catch((err) => others.replaceChildren(others.firstChild, el("p", { class: "error" }, err.message)));
  main().replaceChildren(
    el("p", {}, link("games", { file }, "← " + file)),
    el("h1", {}, `${view.game} · ${view.game_id}`),
    el("p", { class: "muted" }, `instance ${view.instance_id} · ${seatsLine(view)} · line ${line} of ${file}`),
    privateViews(view),
    el("div", { class: "controls" }, prev, next, last, counter, el("span", { class: "muted" }, "(← → keys step)")),
    turns,
    end,
    chatsNode(view),
    others,
  );
  step(0);
  document.addEventListener("keydown", function keys(event) {
    if (!document.body.contains(turns)) return document.removeEventListener("keydown", keys);
    if (event.target.tagName === "TEXTAREA" || event.target.tagName === "INPUT") return;
    if (event.key === "ArrowRight") step(1);
    if (event.key === "ArrowLeft") step(-1);
  });
}

async function showCompare(params) {
  const sides = await Promise.all(
    ["a", "b"].map((k) => api("/api/game?" + new URLSearchParams({ file: params.get(k), line: params.get(k + "l") }))),
  );
  main().replaceChildren(
    el("h1", {}, `Side by side: instance ${sides[0].instance_id}`),
    privateViews(sides[0]),
    el(
      "div",
      { class: "two", id: "compare" },
      sides.map((view) =>
        el(
          "section",
          { class: "side" },
          el("h2", {}, link("game", { file: view.file, line: view.line }, view.file)),
          el("p", { class: "muted" }, `${view.game_id} · ${seatsLine(view)}`),
          outcomeNode(view),
          el("ol", { class: "turns" }, view.turns.map((t, i) => turnNode(view, t, i + 1))),
        ),
      ),
    ),
  );
}

// ---------------------------------------------------------------- a report

async function showReport(params) {
  const data = await api("/api/report?" + new URLSearchParams({ dir: params.get("dir") }));
  const body = el("section", { class: "card markdown", id: "report" });
  body.innerHTML = data.html; // rendered by the server with raw HTML escaped
  const page = [el("p", {}, link("", {}, "← all files")), el("h1", {}, `Report ${data.dir}`)];
  if (data.rows.length) {
    page.push(
      el("h2", {}, "Games behind each row"),
      el(
        "table",
        { class: "list", id: "report-rows" },
        el("tr", {}, el("th", {}, "iteration"), el("th", {}, "label"), el("th", {}, "games")),
        data.rows.map((row) =>
          el(
            "tr",
            {},
            el("td", { class: "num" }, row.iteration),
            el("td", {}, row.label),
            el("td", {}, row.games_files.length ? row.games_files.map((f) => link("games", { file: f }, f)) : el("span", { class: "muted" }, row.source ? "no games files" : "not under this directory")),
          ),
        ),
      ),
    );
  }
  if (data.games_files.length) {
    page.push(el("h2", {}, "Games of this report"), el("ul", {}, data.games_files.map((f) => el("li", {}, link("games", { file: f }, f)))));
  }
  page.push(body);
  main().replaceChildren(...page);
}

// ---------------------------------------------------------------- play

async function showPlaySetup() {
  const setup = await api("/api/play/setup");
  const game = el("select", { id: "play-game", name: "game" }, setup.games.map((g) => el("option", { value: g }, g)));
  const seat = el("select", { id: "play-seat", name: "seat" }, el("option", { value: "0" }, "seat 0 (moves first)"), el("option", { value: "1" }, "seat 1"));
  const partner = el(
    "select",
    { id: "play-partner", name: "partner" },
    el("option", { value: "scripted" }, "a scripted player"),
    el("option", { value: "model" }, `the model (${setup.model})`),
  );
  const seed = el("input", { id: "play-seed", name: "seed", type: "number", min: "0", placeholder: "random" });
  const extras = el("span", {});
  function options() {
    extras.replaceChildren(
      ...Object.entries(setup.options[game.value] || {}).map(([name, choices]) =>
        el("label", {}, name.replace("_", " ") + " ", el("select", { "data-option": name }, choices.map((c) => el("option", { value: c }, c)))),
      ),
    );
  }
  game.addEventListener("change", options);
  options();
  const start = el("button", { id: "play-start", type: "submit" }, "Start a game");
  const form = el(
    "form",
    { class: "card setup" },
    el("label", {}, "Game ", game),
    el("label", {}, "Your seat ", seat),
    el("label", {}, "Partner ", partner),
    el("label", {}, "Instance seed ", seed),
    extras,
    start,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    start.disabled = true;
    start.textContent = "Starting… (the partner may move first)";
    const chosen = {};
    for (const select of extras.querySelectorAll("select")) chosen[select.dataset.option] = select.value;
    try {
      const state = await api("/api/play", {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-Selfplay-Token": TOKEN },
        body: JSON.stringify({ game: game.value, seat: Number(seat.value), partner: partner.value, seed: seed.value, options: chosen }),
      });
      location.hash = "#/play?" + new URLSearchParams({ id: state.id });
    } catch (err) {
      alertBox(err.message);
      start.disabled = false;
      start.textContent = "Start a game";
    }
  });
  main().replaceChildren(
    el("h1", {}, "Play a seat"),
    el("p", {}, "You see exactly what a model in your seat is given: its system prompt (rules and your private view) and what the game tells it after each move. Type moves in the game's own grammar; an invalid move is explained and you move again. Every game is recorded like a model's, with your seat marked human."),
    form,
  );
}

function seatPrivate(d) {
  // this seat's private information, drawn as the replay draws it
  if (!d) return null;
  if (d.view) {
    return el("section", { class: "card view", id: "play-private" }, el("h3", {}, `Your table (scale ×${fmt(d.scale, 2)}; blank = hidden from you)`), hiddenGrid(d, d.view));
  }
  if (d.items) {
    return el(
      "section",
      { class: "card view", id: "play-private" },
      el("h3", {}, "The pool and your values (points per item)"),
      el(
        "table",
        { class: "list" },
        el("tr", {}, el("th", {}, "item"), el("th", {}, "count"), el("th", {}, "your value")),
        d.items.map((item, i) => el("tr", {}, el("td", {}, item), el("td", { class: "num" }, d.counts[i]), el("td", { class: "num" }, d.values[i]))),
      ),
    );
  }
  return null;
}

function renderPlay(state) {
  const system = state.messages.length && state.messages[0].role === "system" ? state.messages[0].content : "";
  const chat = el(
    "div",
    { class: "chat live", id: "play-chat" },
    state.messages
      .filter((m) => m.role !== "system")
      .map((m) => el("div", { class: `msg ${m.role}` }, el("span", { class: "role" }, m.role === "assistant" ? "you" : "told"), el("pre", {}, m.content))),
    state.inbox.length ? el("div", { class: "msg user" }, el("span", { class: "role" }, "told (next turn)"), el("pre", {}, state.inbox.join("\n"))) : null,
  );
  const side = el("section", { class: "conversation" }, el("h3", {}, "The conversation, as your seat is told it"), chat);
  const page = [
    el("h1", {}, `${state.game}: you are ${seatName(state.seat)}, against a ${state.partner === "model" ? "model" : "scripted player"}`),
    el("p", { class: "muted" }, "Left: the system prompt of your seat (rules and your private view). Right: what the game told your seat and what you answered. A model in your seat gets exactly these texts."),
    el(
      "div",
      { class: "play" },
      el("div", {}, seatPrivate(state.private), el("section", { class: "card system" }, el("h3", {}, "Your system prompt"), el("pre", { id: "play-system" }, system))),
      side,
    ),
  ];
  if (state.done) {
    const o = state.outcome;
    side.append(
      el(
        "section",
        { class: "card outcome", id: "play-outcome" },
        el("h3", {}, "Game over"),
        o ? el("p", {}, `ended: ${o.termination}; agreed: ${o.agreed ? "yes" : "no"}; rewards ${o.rewards.map((r) => fmt(r)).join(" / ")}`) : null,
        o ? el("p", { id: "play-invalid" }, "Invalid moves: " + invalidText({ ...o, invalid_seat: state.invalid_seat }, state.invalid_by_seat, state.seat)) : null,
        state.error ? el("p", { class: "error" }, state.error) : null,
        state.game_id ? el("p", { id: "play-recorded" }, `Recorded as ${state.game_id} in `, state.out_path ? link("games", { file: state.out_path }, state.out_path) : `${state.out} (--play-out)`) : null,
        el("p", {}, el("a", { href: "#/play" }, "Play another game")),
      ),
    );
  } else if (state.your_turn) {
    const box = el("textarea", { id: "move", rows: "5", placeholder: "Your move (Ctrl+Enter sends)" });
    const send = el("button", { id: "send", type: "submit" }, "Send move");
    const warning =
      state.invalid_left === 1
        ? el("div", { class: "error", id: "invalid-warning" }, "Careful: one more invalid move in a row ends the game, with no agreement.")
        : null;
    const form = el("form", { class: "card move" }, el("div", { class: "muted" }, "Grammar: " + (state.grammar || "see the system prompt")), warning, box, send);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      send.disabled = true;
      send.textContent = "Waiting for your partner…";
      try {
        const headers = { "Content-Type": "application/json", "X-Selfplay-Token": TOKEN };
        const next = await api(`/api/play/${state.id}/move`, { method: "POST", headers, body: JSON.stringify({ text: box.value }) });
        alertBox("");
        renderPlay(next);
      } catch (err) {
        alertBox(err.message);
        send.disabled = false;
        send.textContent = "Send move";
      }
    });
    box.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) form.requestSubmit();
    });
    side.append(form);
    setTimeout(() => box.focus({ preventScroll: true }), 0);
  } else {
    side.append(el("p", { class: "muted", id: "waiting" }, "Your partner is thinking…"));
    setTimeout(() => pollPlay(state.id), 0);
  }
  main().replaceChildren(...page);
  chat.scrollTop = chat.scrollHeight;
}

async function pollPlay(id) {
  if (location.hash.indexOf(id) < 0) return;
  try {
    renderPlay(await api(`/api/play/${id}?wait=20`));
  } catch (err) {
    alertBox(err.message);
  }
}

async function showPlay(params) {
  if (!params.get("id")) return showPlaySetup();
  return renderPlay(await api(`/api/play/${params.get("id")}`));
}

// ---------------------------------------------------------------- router

const ROUTES = { "": showLibrary, games: showGames, game: showGame, compare: showCompare, report: showReport, play: showPlay };

async function route() {
  const hash = location.hash.replace(/^#\/?/, "");
  const [name, query] = hash.split("?");
  const show = ROUTES[name] || showLibrary;
  alertBox("");
  try {
    await show(new URLSearchParams(query || ""));
  } catch (err) {
    alertBox(err.message);
    main().replaceChildren(el("p", {}, link("", {}, "← back to all files")));
  }
  window.scrollTo(0, 0);
}

window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", () => {
  route();
  api("/api/library")
    .then((lib) => (document.getElementById("root").textContent = lib.root))
    .catch(() => {});
});
