// Keeping the page's nodes across updates. The page redraws at every change the server sends
// (a reply streams in as many changes a second); rebuilding every message each time lost a
// click whose press and release straddled a change, and focus, a text selection or a choice
// half made in a menu. So each thing drawn is an item: a key (which thing), a signature
// (everything its node is drawn from) and how to draw it. A node whose key and signature are
// unchanged stays the same object, in place; only changed items are drawn again. An item may
// also have `update(node)`: what changes often and cheaply (a message's reply count) is set
// on its node in place, kept or new, instead of being part of the signature.
"use strict";

const Keep = (() => {
  const drawnFrom = new WeakMap(); // node -> { key, sig } it was drawn from

  // The node for `item`: the old one when it was drawn from the same key and signature.
  function nodeOf(item, old, taken, fresh) {
    const node = old.get(item.key);
    const was = node && drawnFrom.get(node);
    if (node && !taken.has(node) && was.sig === item.sig) return node;
    const drawn = item.draw();
    drawnFrom.set(drawn, { key: item.key, sig: item.sig });
    fresh.push(drawn);
    return drawn;
  }

  // Make `box`'s children the nodes of `items` (in order: {key, sig, draw, update?}); nodes of items
  // gone are removed; a kept node is moved only when the order changed before it. Returns
  // the nodes drawn afresh.
  function fill(box, items) {
    const old = new Map();
    for (const node of box.childNodes) {
      const was = drawnFrom.get(node);
      if (was && !old.has(was.key)) old.set(was.key, node);
    }
    const taken = new Set();
    const fresh = [];
    const wanted = items.map((item) => {
      const node = nodeOf(item, old, taken, fresh);
      taken.add(node);
      return node;
    });
    items.forEach((item, i) => { if (item.update) item.update(wanted[i]); });
    for (const node of [...box.childNodes]) if (!taken.has(node)) node.remove();
    let at = box.firstChild;
    for (const node of wanted) {
      if (node === at) at = at.nextSibling;
      else box.insertBefore(node, at);
    }
    return fresh;
  }

  return { fill };
})();
