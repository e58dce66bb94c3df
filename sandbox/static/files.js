// Sharing files, as in Slack: a "Share a file" button by each composer and dropping files on the
// messages. The file goes with what is typed in that composer (one message), as JSON (the
// sandbox takes nothing else), and shows on its message: name, size, a preview for an image.
"use strict";

const Files = (() => {
  const MAX = 12 * 1024 * 1024; // the sandbox's limit (sandbox/files.py FILE_MAX)

  function size(n) {
    if (n < 1024) return `${n} B`;
    if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
    return `${(n / 1024 / 1024).toFixed(1)} MB`;
  }

  function base64(file) {
    return new Promise((resolve, reject) => {
      const reader = new FileReader();
      reader.onload = () => resolve(String(reader.result).replace(/^data:[^,]*,/, ""));
      reader.onerror = () => reject(reader.error);
      reader.readAsDataURL(file);
    });
  }

  // `where()` says where a file goes: {user, channel, thread_ts, textarea} or null (nowhere).
  async function share(file, where, say) {
    const to = where();
    if (!to) return;
    if (file.size > MAX) { say(`${file.name} is larger than the sandbox takes (12 MB).`); return; }
    const text = to.textarea.value.trim();
    to.textarea.value = "";
    const body = { user: to.user, channel: to.channel, thread_ts: to.thread_ts, text, name: file.name, mimetype: file.type, data: await base64(file) };
    const r = await fetch("/ui/file", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    const answer = r.ok ? await r.json() : { ok: false, error: await r.text() };
    if (!answer.ok) { to.textarea.value = text; say(answer.error || "The file was not shared."); }
    else say("");
  }

  // A button that opens the file picker, and the messages area as a drop target.
  function attach(button, input, dropTarget, where, say) {
    button.addEventListener("click", () => input.click());
    input.addEventListener("change", async () => {
      for (const file of [...input.files]) await share(file, where, say);
      input.value = "";
    });
    dropTarget.addEventListener("dragover", (e) => { if (where()) { e.preventDefault(); dropTarget.classList.add("dropping"); } });
    dropTarget.addEventListener("dragleave", () => dropTarget.classList.remove("dropping"));
    dropTarget.addEventListener("drop", async (e) => {
      dropTarget.classList.remove("dropping");
      const dropped = e.dataTransfer ? [...e.dataTransfer.files] : [];
      if (!dropped.length || !where()) return;
      e.preventDefault();
      e.stopPropagation();
      for (const file of dropped) await share(file, where, say);
    });
  }

  // A message's files: a card each, with a preview for an image.
  function shown(files) {
    const list = document.createElement("ul");
    list.className = "files";
    list.setAttribute("aria-label", "Shared files");
    for (const f of files) {
      const item = document.createElement("li");
      item.className = "file";
      item.setAttribute("aria-label", `File: ${f.name}`);
      if (f.image) {
        const img = document.createElement("img");
        img.src = f.url; img.alt = f.name; img.loading = "lazy";
        item.append(img);
      }
      const name = document.createElement("a");
      name.href = f.url; name.textContent = f.name; name.className = "file-name";
      name.setAttribute("download", f.name);
      const meta = document.createElement("span");
      meta.className = "file-size"; meta.textContent = size(f.size);
      item.append(name, " ", meta);
      list.append(item);
    }
    return list;
  }

  // A file dropped anywhere else is not opened in place of the page.
  for (const kind of ["dragover", "drop"]) document.addEventListener(kind, (e) => e.preventDefault());

  return { attach, shown, size };
})();
