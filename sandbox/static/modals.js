// A person's modals (views.open / push / update): the top view of their stack as a dialog,
// its Close and Submit sent to the sandbox as Slack's view_closed and view_submission.
"use strict";

const Modals = (() => {
  function button(type, text, className) {
    const b = document.createElement("button");
    b.type = type; b.textContent = text;
    if (className) b.className = className;
    return b;
  }

  // `views`: the stack of `who`; `post(path, body)` sends to the sandbox.
  function show(root, views, who, post) {
    root.replaceChildren();
    if (!views.length) return;
    const view = views[views.length - 1];
    const back = document.createElement("div");
    back.className = "backdrop";
    const dlg = document.createElement("form");
    dlg.setAttribute("role", "dialog");
    dlg.setAttribute("aria-modal", "true");
    dlg.setAttribute("aria-label", Render.textOf(view.title));
    const h = document.createElement("h2");
    h.textContent = Render.textOf(view.title);
    const body = document.createElement("div");
    body.className = "modal-body";
    body.append(Render.blocks(view.blocks, { view_id: view.id }));
    const foot = document.createElement("div");
    foot.className = "modal-foot";
    const close = button("button", Render.textOf(view.close) || "Cancel");
    close.addEventListener("click", () => post("/ui/close", { user: who, view_id: view.id }));
    foot.append(close);
    if (view.submit) foot.append(button("submit", Render.textOf(view.submit), "primary"));
    dlg.addEventListener("submit", async (e) => {
      e.preventDefault();
      const answer = await post("/ui/submit", { user: who, view_id: view.id, values: Render.values(dlg) });
      for (const wrap of dlg.querySelectorAll(".input-block")) {
        wrap.querySelector(".input-error").textContent = (answer.errors || {})[wrap.dataset.blockId] || "";
      }
    });
    dlg.append(h, body, foot);
    back.append(dlg);
    root.append(back);
    const first = dlg.querySelector("input, textarea, select");
    if (first) first.focus();
  }

  return { show };
})();
