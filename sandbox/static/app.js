// The sandbox page: a small Slack. State comes from the server, changes are pushed over a
// WebSocket (/ui/live); what people do is posted to /ui/* and reaches the bot as Slack would.
"use strict";

const $ = (id) => document.getElementById(id);
let state = null;
let me = localStorage.getItem("sandbox-person") || "UALICE";
let current = "C0GENERAL";
let threadTs = null;
let drawing = 0; // bumped when names may have changed (a fresh state): every node is drawn again
const usedPrompts = new Set(); // prompt lists ("channel:thread_ts") used since the DM was opened

function channel(id) { return state.channels.find((c) => c.id === id); }
function dmOf(user) { return "D" + user.replace(/^U/, ""); }
function currentId() { return current === "DM" ? dmOf(me) : current; }

async function post(path, body) {
  const r = await fetch(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  return r.ok ? r.json() : { ok: false, error: await r.text() };
}

function visible(m) { return !m.visible_to || m.visible_to === me; }

function time(ts) {
  const d = new Date(Number(ts) * 1000);
  return d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

// A message as an item to keep (keep.js): drawn again only when the message or anything its
// node shows changed (viewer, names). Its reply count is set in place: a message's first
// reply arrives right as people reach for "Reply in thread", and a node drawn again between
// the press and the release of a click loses the click.
function messageItem(m, where, inThread) {
  const replies = inThread || m.visible_to ? 0 : threadOf(where, m.ts).length;
  return {
    key: `${where}:${m.ts}`,
    sig: JSON.stringify([m, inThread, me, state.bot.id, drawing]),
    draw: () => article(m, where, inThread),
    update: (node) => showReplies(node, replies),
  };
}

function showReplies(node, replies) {
  const count = node.querySelector(":scope > .thread-actions > button.replies");
  if (!count) return;
  count.hidden = replies === 0;
  count.textContent = replies ? `${replies} ${replies === 1 ? "reply" : "replies"}` : "";
}

function article(m, where, inThread) {
  const a = document.createElement("article");
  a.dataset.ts = m.ts;
  a.setAttribute("aria-label", `${m.author}: message`);
  if (m.visible_to) a.classList.add("ephemeral");
  const meta = document.createElement("div");
  meta.className = "meta";
  meta.innerHTML = `<span class="author"></span>${m.user === state.bot.id ? '<span class="app">APP</span>' : ""}<span class="time">${time(m.ts)}</span>`;
  meta.querySelector(".author").textContent = m.author;
  a.append(meta);
  if (m.visible_to) {
    const only = document.createElement("div");
    only.className = "only-you";
    only.textContent = "Only visible to you";
    a.append(only);
  }
  const body = document.createElement("div");
  body.className = "body";
  const ctx = { channel: where, ts: m.ts };
  if (m.tasks && m.tasks.length) {
    const ul = document.createElement("ul");
    ul.className = "tasks";
    for (const t of m.tasks) {
      const li = document.createElement("li");
      li.className = t.status;
      li.textContent = `${t.title}${t.details ? ` — ${t.details}` : ""}`;
      ul.append(li);
    }
    body.append(ul);
  }
  if (m.blocks && m.blocks.length && !(m.streaming && m.text)) {
    const hasText = m.blocks.some((b) => ["section", "rich_text", "header", "markdown"].includes(b.type));
    if (!hasText && m.text) { const t = document.createElement("div"); t.innerHTML = Render.mrkdwn(m.text); body.append(t); }
    body.append(Render.blocks(m.blocks, ctx));
  } else {
    const t = document.createElement("div");
    t.innerHTML = Render.mrkdwn(m.text);
    if (m.streaming) t.classList.add("streaming");
    body.append(t);
  }
  if (m.files && m.files.length) body.append(Files.shown(m.files));
  a.append(body);
  if (!inThread && !m.visible_to) {
    const acts = document.createElement("div");
    acts.className = "thread-actions";
    // "Reply in thread" first: the count appearing after it never moves it.
    const reply = document.createElement("button");
    reply.type = "button"; reply.className = "link";
    reply.textContent = "Reply in thread";
    reply.addEventListener("click", () => openThread(m.ts));
    const open = document.createElement("button");
    open.type = "button"; open.className = "link replies"; open.hidden = true;
    open.addEventListener("click", () => openThread(m.ts));
    acts.append(reply, open);
    a.append(acts);
  }
  return a;
}

function threadOf(where, ts) {
  const c = channel(where);
  return c ? c.messages.filter((m) => m.thread_ts === ts && m.ts !== ts && visible(m)) : [];
}

// Suggested prompts (assistant.threads.setSuggestedPrompts): the title above, one button each;
// a click sends the prompt's message as the person's own, and the list goes, as in Slack.
function promptsOf(where, thread) {
  const key = `${where}:${thread || ""}`;
  const set = (state.prompts || {})[key];
  if (!set || !set.prompts.length || usedPrompts.has(key)) return [];
  return [{ key: `prompts:${key}`, sig: JSON.stringify([set, me]), draw: () => promptsBox(set, key, where, thread) }];
}

function promptsBox(set, key, where, thread) {
  const box = document.createElement("div");
  box.className = "prompts";
  box.setAttribute("role", "group");
  box.setAttribute("aria-label", set.title || "Suggested prompts");
  if (set.title) {
    const title = document.createElement("div");
    title.className = "prompts-title"; title.textContent = set.title;
    box.append(title);
  }
  for (const p of set.prompts) {
    const b = document.createElement("button");
    b.type = "button"; b.className = "prompt";
    b.textContent = p.title; b.title = p.message;
    b.addEventListener("click", async () => {
      usedPrompts.add(key); render();
      const answer = await post("/ui/message", { user: me, channel: where, text: p.message, thread_ts: thread || null, prompt: true });
      if (!answer.ok) { usedPrompts.delete(key); render(); }
    });
    box.append(b);
  }
  return box;
}

// Opening the DM is Slack's Messages tab: `app_home_opened` with `tab: "messages"`.
function openDm() { usedPrompts.clear(); if (state) render(); post("/ui/home", { user: me, tab: "messages" }); }

// `items` ({key, sig, draw}) become the box's nodes; unchanged ones are kept (keep.js).
function fill(box, items) {
  const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 60;
  Keep.fill(box, items);
  if (atBottom) box.scrollTop = box.scrollHeight;
}

function render() {
  if (!state) return;
  $("bot-status").textContent = `Countersign: ${state.bot.connected ? "connected" : state.bot.started ? "starting…" : "not connected"}`;
  $("bot-status").classList.toggle("connected", state.bot.connected);
  document.querySelectorAll(".sidebar a").forEach((a) => a.classList.toggle("active", a.dataset.channel === current));
  const where = currentId();
  if (current === "HOME") {
    $("channel-title").textContent = "Countersign — Home";
    const home = state.homes[me];
    const waiting = () => { const p = document.createElement("p"); p.textContent = "Opening the App Home…"; return p; };
    fill($("messages"), [home
      ? { key: `home:${me}`, sig: JSON.stringify([home.blocks, drawing]), draw: () => Render.blocks(home.blocks, { home: true }) }
      : { key: "home-waiting", sig: "", draw: waiting }]);
    $("composer").hidden = true; $("not-member").hidden = true;
  } else {
    const c = channel(where);
    $("channel-title").textContent = c.is_im ? "Assistant (direct message with Countersign)" : `#${c.name}${c.private ? " (private)" : ""}`;
    const member = c.members.includes(me);
    $("not-member").hidden = member;
    $("not-member").textContent = member ? "" : `You are not a member of #${c.name}: its messages are hidden from you.`;
    $("composer").hidden = !member;
    const top = member ? c.messages.filter((m) => (!m.thread_ts || m.thread_ts === m.ts) && visible(m)) : [];
    const prompts = member && c.is_im ? promptsOf(where, null) : [];
    fill($("messages"), [...top.map((m) => messageItem(m, where, false)), ...prompts]);
  }
  renderThread();
}

function renderThread() {
  const where = currentId();
  const c = channel(where);
  const parent = c && threadTs ? c.messages.find((m) => m.ts === threadTs) : null;
  $("thread").hidden = !parent;
  if (!parent) { fill($("thread-messages"), []); return; }
  const status = state.statuses[`${where}:${threadTs}`];
  const items = [parent, ...threadOf(where, threadTs)].map((m) => messageItem(m, where, true));
  const line = () => { const s = document.createElement("div"); s.className = "status"; s.textContent = `Countersign ${status}`; return s; };
  if (status) items.push({ key: "status", sig: status, draw: line });
  if (c.is_im) items.push(...promptsOf(where, threadTs));
  fill($("thread-messages"), items);
}

function openThread(ts) { threadTs = ts; renderThread(); $("reply").focus(); }

function renderModals() { Modals.show($("modals"), state.views[me] || [], me, post); }

Render.setOnAction((ctx, action) => {
  const values = ctx.view_id ? Render.values($("modals")) : undefined;
  post("/ui/action", { user: me, ...ctx, ...action, values });
});

function apply(change) {
  if (change.type === "state") { state = change.state; setup(); render(); renderModals(); return; }
  if (change.type === "message") {
    const c = channel(change.channel);
    const i = c.messages.findIndex((m) => m.ts === change.message.ts);
    if (i >= 0) c.messages[i] = change.message; else c.messages.push(change.message);
  } else if (change.type === "removed") {
    const c = channel(change.channel);
    c.messages = c.messages.filter((m) => m.ts !== change.ts);
  } else if (change.type === "views") {
    state.views[change.user] = change.views;
    if (change.user === me) renderModals();
    return;
  } else if (change.type === "home") {
    state.homes[change.user] = change.view;
  } else if (change.type === "bot") {
    state.bot.connected = change.connected;
  } else if (change.type === "status") {
    state.statuses[change.key] = change.status;
  } else if (change.type === "prompts") {
    state.prompts[change.key] = change.prompts;
    usedPrompts.delete(change.key); // a new list shows again
  }
  render();
}

function connect() {
  const sock = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ui/live`);
  sock.onmessage = (e) => apply(JSON.parse(e.data));
  sock.onclose = () => setTimeout(connect, 1000);
}

let ready = false;
function setup() {
  drawing += 1;
  const names = Object.fromEntries(state.people.map((p) => [p.id, p.name]));
  names[state.bot.id] = state.bot.name;
  Render.setNames(names, Object.fromEntries(state.channels.map((c) => [c.id, c.name])));
  Render.setPickable(state.people.map((p) => p.id), state.channels.filter((c) => !c.is_im).map((c) => c.id));
  if (ready) return;
  ready = true;
  const select = $("people");
  for (const p of state.people) {
    const o = document.createElement("option");
    o.value = p.id; o.textContent = p.label;
    select.append(o);
  }
  if (!names[me]) me = state.people[0].id;
  const asked = new URLSearchParams(location.search);
  const wanted = channel(asked.get("channel") || "");
  if (wanted) {
    current = wanted.is_im ? "DM" : wanted.id;
    if (wanted.is_im && wanted.members[0] in names) me = wanted.members[0];
    threadTs = asked.get("thread") || null;
  }
  if (current === "DM") openDm();
  select.value = me;
  select.addEventListener("change", () => {
    me = select.value;
    localStorage.setItem("sandbox-person", me);
    threadTs = null;
    render(); renderModals();
    if (current === "HOME") post("/ui/home", { user: me });
    if (current === "DM") openDm();
  });
}

document.querySelectorAll(".sidebar a").forEach((a) => a.addEventListener("click", (e) => {
  e.preventDefault();
  current = a.dataset.channel;
  threadTs = null;
  render();
  if (current === "HOME") post("/ui/home", { user: me });
  if (current === "DM") openDm();
}));

function composer(textarea, threaded) {
  textarea.addEventListener("keydown", async (e) => {
    if (e.key !== "Enter" || e.shiftKey) return;
    e.preventDefault();
    const text = textarea.value.trim();
    if (!text) return;
    if (threaded && !threadTs) return; // a reply needs an open thread: never post it to the channel
    textarea.value = "";
    usedPrompts.add(`${currentId()}:${threaded ? threadTs : ""}`); // writing one's own: the prompts go
    const answer = await post("/ui/message", { user: me, channel: currentId(), text, thread_ts: threaded ? threadTs : null });
    if (!answer.ok) textarea.value = text;
  });
}
composer($("message"), false);
composer($("reply"), true);
$("close-thread").addEventListener("click", () => { threadTs = null; renderThread(); });
// Files go where the composer next to them would post: the channel (or DM), or the open thread.
function sharingIn(threaded, textarea) {
  return () => {
    if (current === "HOME" || (threaded && !threadTs)) return null;
    const c = channel(currentId());
    if (!c || !c.members.includes(me)) return null;
    return { user: me, channel: c.id, thread_ts: threaded ? threadTs : null, textarea };
  };
}
const noteIn = (id) => (text) => { $(id).textContent = text; };
Files.attach($("share"), $("share-input"), $("messages"), sharingIn(false, $("message")), noteIn("share-note"));
Files.attach($("reply-share"), $("reply-share-input"), $("thread-messages"), sharingIn(true, $("reply")), noteIn("reply-share-note"));
$("composer").addEventListener("submit", (e) => e.preventDefault());
$("reply-composer").addEventListener("submit", (e) => e.preventDefault());
connect();
