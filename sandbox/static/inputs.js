// A modal's input blocks drawn as the controls Slack draws for each element (text boxes,
// person and channel menus, date and date-time inputs, number boxes, menus, checkboxes), and
// their state sent back in the shapes Slack documents for a view_submission.
"use strict";

const Inputs = (() => {
  let inputs = 0;
  let pickPeople = [];  // ids a person picker offers
  let pickChannels = [];  // ids a conversation picker offers (channels, not DMs)

  function optionOf(value, text, selected) {
    const opt = document.createElement("option");
    opt.value = value;
    opt.textContent = text;
    opt.selected = Boolean(selected);
    return opt;
  }

  // A picker of ids (people or channels) as a <select>: single, or several when allowed.
  function idPicker(el, ids, label, initial, many) {
    const field = document.createElement("select");
    field.multiple = many;
    if (!many) field.append(optionOf("", Render.textOf(el.placeholder) || "Choose…", !initial.length));
    for (const id of ids) field.append(optionOf(id, label(id), initial.includes(id)));
    return field;
  }

  // "YYYY-MM-DDTHH:MM" in the browser's own zone, as a datetime-local input takes it.
  function localInput(seconds) {
    const d = new Date(seconds * 1000);
    const two = (n) => String(n).padStart(2, "0");
    return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())}T${two(d.getHours())}:${two(d.getMinutes())}`;
  }

  // The control of an input block's element, as Slack draws each kind.
  function control(el) {
    const type = el.type || "plain_text_input";
    const person = Render.nameOf;
    const channel = Render.channelOf;
    const one = el.max_selected_items === 1;
    if (type === "users_select") return idPicker(el, pickPeople, person, el.initial_user ? [el.initial_user] : [], false);
    if (type === "multi_users_select") {
      const field = idPicker(el, pickPeople, person, el.initial_users || [], !one);
      if (one) field.prepend(optionOf("", Render.textOf(el.placeholder) || "No one", !(el.initial_users || []).length));
      return field;
    }
    if (type === "conversations_select") return idPicker(el, pickChannels, channel, el.initial_conversation ? [el.initial_conversation] : [], false);
    if (type === "multi_conversations_select") {
      const field = idPicker(el, pickChannels, channel, el.initial_conversations || [], !one);
      if (one) field.prepend(optionOf("", Render.textOf(el.placeholder) || "None", !(el.initial_conversations || []).length));
      return field;
    }
    if (type === "static_select") {
      const field = document.createElement("select");
      if (!el.initial_option) field.append(optionOf("", Render.textOf(el.placeholder) || "Choose…", true));
      for (const o of el.options || []) {
        field.append(optionOf(o.value, Render.textOf(o.text), el.initial_option && el.initial_option.value === o.value));
      }
      return field;
    }
    if (type === "checkboxes") {
      const group = document.createElement("div");
      group.setAttribute("role", "group");
      const chosen = (el.initial_options || []).map((o) => o.value);
      for (const o of el.options || []) {
        const line = document.createElement("label");
        const box = document.createElement("input");
        box.type = "checkbox";
        box.value = o.value;
        box.checked = chosen.includes(o.value);
        box.dataset.text = Render.textOf(o.text);
        line.append(box, ` ${Render.textOf(o.text)}`);
        group.append(line);
      }
      return group;
    }
    const field = document.createElement(el.multiline ? "textarea" : "input");
    if (type === "datepicker") {
      field.type = "date";
      field.value = el.initial_date || "";
    } else if (type === "datetimepicker") {
      field.type = "datetime-local";
      if (el.initial_date_time) field.value = localInput(el.initial_date_time);
    } else if (type === "number_input") {
      field.type = "number";
      field.step = el.is_decimal_allowed ? "any" : "1";
      if (el.min_value !== undefined) field.min = el.min_value;
      if (el.max_value !== undefined) field.max = el.max_value;
      field.value = el.initial_value || "";
    } else {
      if (el.multiline) field.rows = 5;
      field.value = el.initial_value || "";
      if (el.max_length) field.maxLength = el.max_length;
    }
    if (el.placeholder) field.placeholder = Render.textOf(el.placeholder);
    return field;
  }

  function input(b) {
    const wrap = document.createElement("div");
    wrap.className = "input-block";
    wrap.dataset.blockId = b.block_id || "";
    const el = b.element || {};
    const id = `input-${++inputs}`;
    const label = document.createElement("label");
    label.id = `${id}-label`;
    label.textContent = Render.textOf(b.label);
    wrap.append(label);
    const field = control(el);
    if (field.getAttribute("role") === "group") field.setAttribute("aria-labelledby", label.id);
    else label.htmlFor = id;
    field.id = id;
    wrap.dataset.actionId = el.action_id || "value";
    wrap.dataset.type = el.type || "plain_text_input";
    if (!b.optional && field.getAttribute("role") !== "group") field.required = true;
    wrap.append(field);
    if (b.hint) {
      const hint = document.createElement("div");
      hint.className = "hint-text";
      hint.textContent = Render.textOf(b.hint);
      wrap.append(hint);
    }
    const err = document.createElement("div");
    err.className = "input-error";
    err.setAttribute("role", "alert");
    wrap.append(err);
    return wrap;
  }

  // One input's state in the shape Slack documents for its element type.
  function stateOf(wrap) {
    const type = wrap.dataset.type;
    const field = wrap.querySelector("input, textarea, select");
    const picked = field && field.tagName === "SELECT" ? [...field.selectedOptions].map((o) => o.value).filter(Boolean) : [];
    if (type === "users_select") return { selected_user: picked[0] || null };
    if (type === "multi_users_select") return { selected_users: picked };
    if (type === "conversations_select") return { selected_conversation: picked[0] || null };
    if (type === "multi_conversations_select") return { selected_conversations: picked };
    if (type === "static_select") {
      const o = field.selectedOptions[0];
      return { selected_option: o && o.value ? { text: { type: "plain_text", text: o.textContent, emoji: true }, value: o.value } : null };
    }
    if (type === "checkboxes") {
      const ticked = [...wrap.querySelectorAll("input[type=checkbox]")].filter((x) => x.checked);
      return { selected_options: ticked.map((x) => ({ text: { type: "plain_text", text: x.dataset.text, emoji: true }, value: x.value })) };
    }
    if (type === "datepicker") return { selected_date: field.value || null };
    if (type === "datetimepicker") {
      return { selected_date_time: field.value ? Math.floor(new Date(field.value).getTime() / 1000) : null };
    }
    return { value: field.value };  // plain_text_input and number_input: the text
  }

  // The state Slack sends with a submission: {block_id: {action_id: {type, ...}}}.
  function values(root) {
    const out = {};
    for (const wrap of root.querySelectorAll(".input-block")) {
      out[wrap.dataset.blockId] = { [wrap.dataset.actionId]: { type: wrap.dataset.type, ...stateOf(wrap) } };
    }
    return out;
  }

  return {
    input, values,
    setPickable(peopleIds, channelIds) { pickPeople = peopleIds; pickChannels = channelIds; },
  };
})();
