// Slack's mrkdwn (and the Markdown of native streaming) and Block Kit, rendered to the DOM.
"use strict";

const Render = (() => {
  let names = {};  // user id -> display name
  let channelNames = {};
  let onAction = () => {};

  function escapeHtml(s) {
    return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  }

  const EMOJI = {
    hourglass_flowing_sand: "⏳", raised_hand: "✋", white_check_mark: "✅", x: "❌",
    warning: "⚠️", no_entry_sign: "🚫", hourglass: "⌛", lock: "🔒", pencil2: "✏️",
    arrows_counterclockwise: "🔄", stopwatch: "⏱️", heavy_check_mark: "✔️", bulb: "💡",
    question: "❓", wave: "👋", memo: "📝", mag: "🔍", eyes: "👀", information_source: "ℹ️",
  };

  // One line of inline formatting, after Slack's <…> tokens were swapped for placeholders.
  function inline(text, tokens) {
    let html = escapeHtml(text);
    html = html.replace(/`([^`\n]+)`/g, (_, c) => `<code>${c}</code>`);
    html = html.replace(/\*\*([^*\n]+)\*\*/g, "<strong>$1</strong>");
    html = html.replace(/(^|[\s(])\*([^*\n]+)\*(?=$|[\s).,:;!?])/g, "$1<strong>$2</strong>");
    html = html.replace(/(^|[\s(])_([^_\n]+)_(?=$|[\s).,:;!?])/g, "$1<em>$2</em>");
    html = html.replace(/(^|[\s(])~([^~\n]+)~(?=$|[\s).,:;!?])/g, "$1<del>$2</del>");
    html = html.replace(/\[([^\]\n]+)\]\((https?:[^)\s]+)\)/g, '<a href="$2" target="_blank" rel="noopener">$1</a>');
    html = html.replace(/:([a-z0-9_+-]+):/g, (all, name) => EMOJI[name] || all);
    return html.replace(/\u0000(\d+)\u0000/g, (_, n) => tokens[Number(n)]);
  }

  // Slack's date token, <!date^UNIX^FORMAT^LINK|fallback>, in the viewer's own time zone (the
  // browser's), as a Slack client shows it; the fallback when the token cannot be read.
  function ordinal(n) {
    const s = ["th", "st", "nd", "rd"], v = n % 100;
    return n + (s[(v - 20) % 10] || s[v] || s[0]);
  }

  function dayWords(d, kind) {
    const month = d.toLocaleString("en-US", { month: kind === "short" ? "short" : "long" });
    if (kind === "short") return `${month} ${d.getDate()}, ${d.getFullYear()}`;
    const date = `${month} ${ordinal(d.getDate())}, ${d.getFullYear()}`;
    return kind === "long" ? `${d.toLocaleString("en-US", { weekday: "long" })}, ${date}` : date;
  }

  function pretty(d, kind) {
    const day = (x) => new Date(x.getFullYear(), x.getMonth(), x.getDate()).getTime();
    const diff = Math.round((day(d) - day(new Date())) / 86400000);
    return { 0: "today", 1: "tomorrow", "-1": "yesterday" }[diff] || dayWords(d, kind);
  }

  function ago(d) {
    const s = Math.round((Date.now() - d.getTime()) / 1000);
    const a = Math.abs(s);
    const [n, unit] = a < 60 ? [a, "second"] : a < 3600 ? [Math.round(a / 60), "minute"]
      : a < 86400 ? [Math.round(a / 3600), "hour"] : [Math.round(a / 86400), "day"];
    const words = `${n} ${unit}${n === 1 ? "" : "s"}`;
    return s >= 0 ? `${words} ago` : `in ${words}`;
  }

  function slackDate(target, fallback) {
    const [, unix, format] = target.split("^");
    if (!/^-?\d+$/.test(unix || "") || !format) return escapeHtml(fallback || "");
    const d = new Date(Number(unix) * 1000);
    const pad = (n) => String(n).padStart(2, "0");
    const time = (secs) => d.toLocaleTimeString("en-US", { hour: "numeric", minute: "2-digit", ...(secs ? { second: "2-digit" } : {}) });
    const tokens = {
      date_num: `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`,
      date: dayWords(d, "plain"), date_short: dayWords(d, "short"), date_long: dayWords(d, "long"),
      date_pretty: pretty(d, "plain"), date_short_pretty: pretty(d, "short"),
      date_long_pretty: pretty(d, "long"), time: time(false), time_secs: time(true), ago: ago(d),
    };
    const text = format.replace(/\{(\w+)\}/g, (all, name) => (name in tokens ? tokens[name] : all));
    return `<time class="date" datetime="${d.toISOString()}" title="${escapeHtml(fallback || "")}">${escapeHtml(text)}</time>`;
  }

  function slackToken(inner) {
    const [target, label] = inner.split("|", 2);
    if (target.startsWith("@")) {
      const id = target.slice(1);
      return `<span class="mention">@${escapeHtml(label || names[id] || id)}</span>`;
    }
    if (target.startsWith("#")) {
      const id = target.slice(1);
      return `<span class="mention">#${escapeHtml(label || channelNames[id] || id)}</span>`;
    }
    if (target.startsWith("!date^")) return slackDate(target, label);
    if (target.startsWith("!")) return `<span class="mention">@${escapeHtml(label || target.slice(1))}</span>`;
    const url = /^(https?:|mailto:)/.test(target) ? target : "#";
    return `<a href="${escapeHtml(url)}" target="_blank" rel="noopener">${escapeHtml(label || target)}</a>`;
  }

  function mrkdwn(text) {
    const tokens = [];
    let raw = String(text || "").replace(/<([^<>\n]+)>/g, (_, inner) => {
      tokens.push(slackToken(inner.replace(/&amp;/g, "&")));
      return `\u0000${tokens.length - 1}\u0000`;
    });
    raw = raw.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
    const out = [];
    const parts = raw.split("```");
    parts.forEach((part, i) => {
      if (i % 2 === 1) {
        out.push(`<pre>${escapeHtml(part.replace(/^\n/, "")).replace(/\u0000(\d+)\u0000/g, (_, n) => tokens[Number(n)])}</pre>`);
        return;
      }
      const lines = part.split("\n").map((line) => {
        const quote = /^(&gt;|>)\s?/.exec(line);
        const heading = /^#{1,6}\s+(.*)$/.exec(line);
        if (heading) return `<strong>${inline(heading[1], tokens)}</strong>`;
        if (quote) return `<span class="quote">│ ${inline(line.slice(quote[0].length), tokens)}</span>`;
        return inline(line.replace(/^(\s*)[-*] /, "$1• "), tokens);
      });
      out.push(`<p>${lines.join("\n")}</p>`);
    });
    return out.join("");
  }

  function textOf(obj) {
    if (!obj) return "";
    return typeof obj === "string" ? obj : obj.text || "";
  }

  function textNode(obj) {
    const span = document.createElement("div");
    if (obj && obj.type === "plain_text") span.textContent = obj.text || "";
    else span.innerHTML = mrkdwn(textOf(obj));
    return span;
  }

  // A link button (`url`): opens its link, as Slack does (a permalink of this workspace in
  // this page), and still sends its click to the app.
  function linkButton(el, ctx) {
    const a = document.createElement("a");
    const url = /^(https?:|mailto:)/.test(el.url) ? el.url : "#";
    a.href = url;
    a.className = `button-link ${el.style || ""}`.trim();
    a.textContent = textOf(el.text);
    if (!url.startsWith(window.location.origin)) { a.target = "_blank"; a.rel = "noopener"; }
    a.addEventListener("click", () => onAction(ctx, { type: "button", action_id: el.action_id, value: el.value, text: el.text }));
    return a;
  }

  function element(el, ctx) {
    if (!el) return document.createElement("span");
    if (el.type === "button" && el.url) return linkButton(el, ctx);
    if (el.type === "button") {
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = textOf(el.text);
      if (el.style) b.className = el.style;
      b.addEventListener("click", async () => {
        if (el.confirm && !(await confirmed(el.confirm))) return;
        onAction(ctx, { type: "button", action_id: el.action_id, value: el.value, text: el.text });
      });
      return b;
    }
    if (el.type === "static_select" || el.type === "overflow") {
      const s = document.createElement("select");
      s.setAttribute("aria-label", textOf(el.placeholder) || "Choose");
      const blank = document.createElement("option");
      blank.textContent = textOf(el.placeholder) || "…";
      blank.value = "";
      s.append(blank);
      for (const o of el.options || []) {
        const opt = document.createElement("option");
        opt.value = o.value;
        opt.textContent = textOf(o.text);
        s.append(opt);
      }
      s.addEventListener("change", () => {
        const o = (el.options || []).find((x) => x.value === s.value);
        if (o) onAction(ctx, { type: el.type, action_id: el.action_id, selected_option: o });
      });
      return s;
    }
    if (el.type === "feedback_buttons") {
      const wrap = document.createElement("span");
      wrap.className = "block-actions";
      for (const which of ["positive_button", "negative_button"]) {
        const fb = el[which];
        const b = document.createElement("button");
        b.type = "button";
        b.textContent = textOf(fb.text) || (which === "positive_button" ? "👍" : "👎");
        if (fb.accessibility_label) b.title = fb.accessibility_label;  // named by its text
        b.addEventListener("click", () => onAction(ctx, { type: "feedback_buttons", action_id: el.action_id, value: fb.value }));
        wrap.append(b);
      }
      return wrap;
    }
    if (el.type === "icon_button") {
      return element({ ...el, type: "button" }, ctx);
    }
    if (el.type === "image") {
      const img = document.createElement("img");
      img.src = el.image_url; img.alt = el.alt_text || ""; img.width = 20;
      return img;
    }
    return textNode(el);
  }

  // A button's `confirm` object: a small dialog with its confirm and deny buttons.
  function confirmed(c) {
    return new Promise((resolve) => {
      const back = document.createElement("div");
      back.className = "backdrop";
      const dlg = document.createElement("div");
      dlg.setAttribute("role", "alertdialog");
      dlg.setAttribute("aria-label", textOf(c.title));
      dlg.className = "confirm";
      const h = document.createElement("h2");
      h.textContent = textOf(c.title);
      const body = textNode(c.text);
      body.className = "modal-body";
      const foot = document.createElement("div");
      foot.className = "modal-foot";
      const answer = (yes) => { back.remove(); resolve(yes); };
      const deny = document.createElement("button");
      deny.type = "button"; deny.textContent = textOf(c.deny) || "Cancel";
      deny.addEventListener("click", () => answer(false));
      const ok = document.createElement("button");
      ok.type = "button"; ok.className = c.style === "danger" ? "danger" : "primary";
      ok.textContent = textOf(c.confirm) || "Yes";
      ok.addEventListener("click", () => answer(true));
      foot.append(deny, ok);
      dlg.append(h, body, foot);
      back.append(dlg);
      document.body.append(back);
      ok.focus();
    });
  }

  function richText(block) {
    const box = document.createElement("div");
    const styled = (e) => {
      let t = escapeHtml(e.text || "");
      if (e.type === "link") {
        const url = /^(https?:|mailto:)/.test(e.url || "") ? e.url : "#";
        t = `<a href="${escapeHtml(url)}" target="_blank" rel="noopener">${escapeHtml(e.text || e.url || "")}</a>`;
      }
      if (e.type === "user") t = `@${escapeHtml(names[e.user_id] || e.user_id)}`;
      if (e.type === "channel") t = `#${escapeHtml(channelNames[e.channel_id] || e.channel_id)}`;
      if (e.type === "emoji") t = `:${escapeHtml(e.name)}:`;
      const s = e.style || {};
      if (s.code) t = `<code>${t}</code>`;
      if (s.bold) t = `<strong>${t}</strong>`;
      if (s.italic) t = `<em>${t}</em>`;
      if (s.strike) t = `<del>${t}</del>`;
      return t;
    };
    const section = (sec) => {
      const inner = (sec.elements || []).map(styled).join("");
      if (sec.type === "rich_text_preformatted") return `<pre>${inner}</pre>`;
      if (sec.type === "rich_text_quote") return `<p class="quote">│ ${inner}</p>`;
      if (sec.type === "rich_text_list") {
        const tag = sec.style === "ordered" ? "ol" : "ul";
        return `<${tag}>${(sec.elements || []).map((i) => `<li>${(i.elements || []).map(styled).join("")}</li>`).join("")}</${tag}>`;
      }
      return `<p>${inner}</p>`;
    };
    box.innerHTML = (block.elements || []).map(section).join("");
    return box;
  }

  // Blocks of a message, a modal or a Home tab. `ctx` says where a click comes from.
  function blocks(list, ctx) {
    const box = document.createElement("div");
    for (const b of list || []) {
      const div = document.createElement("div");
      div.className = `block-${b.type}`;
      const bctx = { ...ctx, block_id: b.block_id };
      if (b.type === "section") {
        const main = document.createElement("div");
        if (b.text) main.append(textNode(b.text));
        if (b.fields) {
          const f = document.createElement("div");
          f.className = "fields";
          for (const x of b.fields) f.append(textNode(x));
          main.append(f);
        }
        div.append(main);
        if (b.accessory) {
          const acc = document.createElement("div");
          acc.className = "accessory";
          acc.append(element(b.accessory, bctx));
          div.append(acc);
        }
      } else if (b.type === "header") {
        const h = document.createElement("h3");
        h.className = "block-header";
        h.textContent = textOf(b.text);
        div.append(h);
      } else if (b.type === "divider") {
        div.append(document.createElement("hr"));
      } else if (b.type === "context") {
        for (const e of b.elements || []) div.append(element(e, bctx));
      } else if (b.type === "actions" || b.type === "context_actions") {
        div.className = "block-actions";
        for (const e of b.elements || []) div.append(element(e, bctx));
      } else if (b.type === "rich_text") {
        div.append(richText(b));
      } else if (b.type === "image") {
        div.append(element(b, bctx));
      } else if (b.type === "input") {
        div.append(Inputs.input(b));
      } else if (b.type === "markdown") {
        div.innerHTML = mrkdwn(b.text || "");
      } else {
        div.textContent = `[${b.type} block]`;
      }
      box.append(div);
    }
    return box;
  }

  return {
    mrkdwn, blocks, textOf, values: (root) => Inputs.values(root),
    nameOf: (id) => names[id] || id,
    channelOf: (id) => `#${channelNames[id] || id}`,
    setNames(people, channels) { names = people; channelNames = channels; },
    setPickable: (peopleIds, channelIds) => Inputs.setPickable(peopleIds, channelIds),
    setOnAction(fn) { onAction = fn; },
  };
})();
