// The approval inbox: pending calls of the runs you may see (live), a run's
// transcript and events (live, server-sent events), and the decisions you make.
// Every text from a model, a server or a person is put in the page as text
// (textContent, text nodes), never as HTML.
'use strict';
(() => {
  const state = { csrf: null, who: null, tenants: [], run: null, source: null, lastSeq: 0, reload: null, timer: null };
  const $ = (sel, root = document) => root.querySelector(sel);
  const enc = encodeURIComponent;
  // Where the router is mounted: the API and the events are under it.
  const base = () => document.body.dataset.base || '';

  function el(tag, props, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k.startsWith('data-') || k === 'href' || k === 'type') e.setAttribute(k, v);
      else e[k] = v;
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }

  function notice(text, kind) {
    const n = $('#notice');
    n.textContent = text;
    n.className = kind || '';
    n.hidden = !text;
  }

  async function session() {
    const r = await fetch(base() + 'api/session', { headers: { accept: 'application/json' } });
    const data = await r.json().catch(() => null);
    if (!r.ok || !data) throw new Error((data && data.error) || ('HTTP ' + r.status));
    state.csrf = data.csrf;
    state.who = data.principal;
    state.tenants = data.tenants || [];
  }

  // A call of the JSON API: {status, ok, data}. A request that changes anything
  // carries the CSRF token; a refused token is fetched again once.
  async function api(path, body, retried) {
    const init = { headers: { accept: 'application/json' } };
    if (body !== undefined) {
      init.method = 'POST';
      init.headers['content-type'] = 'application/json';
      init.headers['x-csrf-token'] = state.csrf || '';
      init.body = JSON.stringify(body);
    }
    const r = await fetch(base() + path, init);
    const data = await r.json().catch(() => null);
    if (r.status === 403 && body !== undefined && !retried && data && /CSRF/.test(data.error || '')) {
      await session();
      return api(path, body, true);
    }
    return { status: r.status, ok: r.ok, data };
  }

  // JSON, pretty, as text; a long string is collapsed (click to see all of it).
  function renderJson(value, indent) {
    indent = indent || '';
    const frag = document.createDocumentFragment();
    if (Array.isArray(value)) {
      if (!value.length) { frag.append('[]'); return frag; }
      frag.append('[\n');
      value.forEach((v, i) => {
        frag.append(indent + '  ', renderJson(v, indent + '  '), i < value.length - 1 ? ',\n' : '\n');
      });
      frag.append(indent + ']');
      return frag;
    }
    if (value !== null && typeof value === 'object') {
      const keys = Object.keys(value);
      if (!keys.length) { frag.append('{}'); return frag; }
      frag.append('{\n');
      keys.forEach((k, i) => {
        frag.append(indent + '  ' + JSON.stringify(k) + ': ', renderJson(value[k], indent + '  '), i < keys.length - 1 ? ',\n' : '\n');
      });
      frag.append(indent + '}');
      return frag;
    }
    const s = JSON.stringify(value);
    if (typeof value === 'string' && s.length > 240) {
      frag.append(el('details', { class: 'long' },
        el('summary', { text: s.slice(0, 100) + '… (' + value.length + ' characters: show all)' }), s));
      return frag;
    }
    frag.append(s === undefined ? 'null' : s);
    return frag;
  }

  // The JSON Schema keywords a tool's input schema mostly uses, checked before an
  // edit is sent (the agent binds and gates the edited call again).
  function validate(schema, value, path, errors, depth) {
    path = path || '$'; errors = errors || []; depth = depth || 0;
    if (!schema || typeof schema !== 'object' || depth > 32) return errors;
    const typeOf = (v) => v === null ? 'null' : Array.isArray(v) ? 'array' : Number.isInteger(v) ? 'integer' : typeof v;
    if (schema.type) {
      const types = Array.isArray(schema.type) ? schema.type : [schema.type];
      const actual = typeOf(value);
      if (!types.some((t) => t === actual || (t === 'number' && actual === 'integer'))) {
        errors.push(path + ': should be ' + types.join(' or ') + ', is ' + actual);
        return errors;
      }
    }
    const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
    if (Array.isArray(schema.enum) && !schema.enum.some((e) => same(e, value))) errors.push(path + ': should be one of ' + JSON.stringify(schema.enum));
    if ('const' in schema && !same(schema.const, value)) errors.push(path + ': should be ' + JSON.stringify(schema.const));
    if (typeof value === 'string') {
      if (schema.minLength !== undefined && value.length < schema.minLength) errors.push(path + ': shorter than ' + schema.minLength);
      if (schema.maxLength !== undefined && value.length > schema.maxLength) errors.push(path + ': longer than ' + schema.maxLength);
      if (typeof schema.pattern === 'string') {
        try { if (!new RegExp(schema.pattern, 'u').test(value)) errors.push(path + ': does not match ' + schema.pattern); } catch (e) { /* a pattern this browser cannot read is left to the server */ }
      }
    }
    if (typeof value === 'number') {
      if (schema.minimum !== undefined && value < schema.minimum) errors.push(path + ': less than ' + schema.minimum);
      if (schema.maximum !== undefined && value > schema.maximum) errors.push(path + ': more than ' + schema.maximum);
    }
    if (Array.isArray(value)) {
      if (schema.minItems !== undefined && value.length < schema.minItems) errors.push(path + ': fewer than ' + schema.minItems + ' items');
      if (schema.maxItems !== undefined && value.length > schema.maxItems) errors.push(path + ': more than ' + schema.maxItems + ' items');
      if (schema.items && typeof schema.items === 'object' && !Array.isArray(schema.items)) {
        value.forEach((v, i) => validate(schema.items, v, path + '[' + i + ']', errors, depth + 1));
      }
    }
    if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
      for (const r of schema.required || []) if (!Object.prototype.hasOwnProperty.call(value, r)) errors.push(path + ': "' + r + '" is required');
      const props = schema.properties || {};
      for (const [k, v] of Object.entries(value)) {
        if (Object.prototype.hasOwnProperty.call(props, k)) validate(props[k], v, path + '.' + k, errors, depth + 1);
        else if (schema.additionalProperties === false) errors.push(path + ': "' + k + '" is not allowed');
        else if (schema.additionalProperties && typeof schema.additionalProperties === 'object') validate(schema.additionalProperties, v, path + '.' + k, errors, depth + 1);
      }
    }
    for (const s of schema.allOf || []) validate(s, value, path, errors, depth + 1);
    if (Array.isArray(schema.anyOf) && !schema.anyOf.some((s) => !validate(s, value, path, [], depth + 1).length)) errors.push(path + ': matches none of the allowed shapes');
    if (Array.isArray(schema.oneOf) && schema.oneOf.filter((s) => !validate(s, value, path, [], depth + 1).length).length !== 1) errors.push(path + ': should match exactly one of the allowed shapes');
    return errors;
  }

  function when(seconds) {
    return seconds ? new Date(seconds * 1000).toLocaleString() : '';
  }

  // A call asked again because its tool changed: why, and the definition before and
  // now where they differ.
  function changedBox(p) {
    const box = el('div', { class: 'changed' }, el('strong', { text: 'Asked again: ' }), p.changed.reason || 'the tool changed');
    const before = p.changed.before;
    if (before) {
      if ((before.description || '') !== (p.description || '')) {
        box.append(el('div', { class: 'was', text: 'Description before: ' + (before.description || '(none)') }),
          el('div', { class: 'now', text: 'Description now: ' + (p.description || '(none)') }));
      }
      if (JSON.stringify(before.input_schema) !== JSON.stringify(p.input_schema)) {
        box.append(el('div', { class: 'was', text: 'Input schema before:' }), el('pre', { class: 'json was' }, renderJson(before.input_schema)),
          el('div', { class: 'now', text: 'Input schema now:' }), el('pre', { class: 'json now' }, renderJson(p.input_schema)));
      }
    }
    return box;
  }

  // One call waiting for a decision, with its actions.
  function callCard(run, p) {
    const card = el('div', { class: 'call', 'data-decision': p.decision, 'data-run': run.run });
    card.append(el('div', { class: 'head' },
      el('span', { class: 'tool', text: p.server + ' / ' + p.tool + (p.sub_run ? ' (sub-agent run ' + p.sub_run + ')' : '') }),
      el('a', { class: 'runlink', href: '#run=' + enc(run.run), text: 'run ' + run.run.slice(0, 8) })));
    const owner = [];
    if (run.started_by) owner.push('started by ' + run.started_by.name);
    if (run.tenant) owner.push('tenant ' + run.tenant);
    if (p.expires) owner.push('expires ' + when(p.expires));
    if (owner.length) card.append(el('div', { class: 'muted owner', text: owner.join(' · ') }));
    if (p.description) card.append(el('p', { class: 'description', text: p.description }));
    if (p.changed) card.append(changedBox(p));
    card.append(el('pre', { class: 'json arguments' }, renderJson(p.arguments)));
    const actions = el('div', { class: 'actions' });
    const denyForm = el('div', { class: 'form deny-form', hidden: true },
      el('textarea', { class: 'deny-message', rows: 2, placeholder: 'Why not? The model reads this.' }),
      el('div', { class: 'row' }, el('button', { type: 'button', class: 'cancel', text: 'Cancel' }), el('button', { type: 'button', class: 'confirm-deny', text: 'Deny' })));
    const editArea = el('textarea', { class: 'edit-args code', rows: 8 });
    editArea.value = JSON.stringify(p.arguments, null, 2);
    editArea.addEventListener('input', () => { $('.edit-error', card).textContent = ''; });
    const editForm = el('div', { class: 'form edit-form', hidden: true }, editArea,
      el('div', { class: 'edit-error' }),
      el('div', { class: 'row' }, el('button', { type: 'button', class: 'cancel', text: 'Cancel' }), el('button', { type: 'button', class: 'confirm-edit', text: 'Run with these arguments' })));
    const open = (form) => { denyForm.hidden = form !== denyForm; editForm.hidden = form !== editForm; card.classList.toggle('open', !!form); };
    if (p.waits === 'approval') {
      actions.append(
        el('button', { type: 'button', class: 'approve', text: 'Approve', onclick: () => decide(card, { kind: 'approve' }) }),
        el('button', { type: 'button', class: 'deny', text: 'Deny…', onclick: () => open(denyForm) }),
        el('button', { type: 'button', class: 'edit', text: 'Edit arguments…', onclick: () => open(editForm) }),
        el('button', { type: 'button', class: 'always', text: 'Always allow this tool', onclick: () => decide(card, { kind: 'always' }) }));
    } else {
      card.append(el('p', { class: 'muted', text: 'The server asks for input; answer it from the application, or deny.' }));
      actions.append(el('button', { type: 'button', class: 'deny', text: 'Deny…', onclick: () => open(denyForm) }));
    }
    denyForm.querySelector('.cancel').onclick = () => open(null);
    editForm.querySelector('.cancel').onclick = () => open(null);
    denyForm.querySelector('.confirm-deny').onclick = () => decide(card, { kind: 'deny', message: $('.deny-message', card).value });
    editForm.querySelector('.confirm-edit').onclick = () => {
      const out = $('.edit-error', card);
      let args;
      try { args = JSON.parse(editArea.value); } catch (e) { out.textContent = 'Not JSON: ' + e.message; return; }
      if (args === null || typeof args !== 'object' || Array.isArray(args)) { out.textContent = 'The arguments are a JSON object.'; return; }
      const errors = validate(p.input_schema, args);
      if (errors.length) { out.textContent = 'Does not fit the tool\'s input schema:\n' + errors.join('\n'); return; }
      out.textContent = '';
      decide(card, { kind: 'edit', arguments: args });
    };
    card.append(actions, denyForm, editForm);
    return card;
  }

  async function decide(card, body) {
    body.decision = card.dataset.decision;
    for (const b of card.querySelectorAll('button')) b.disabled = true;
    const r = await api('api/runs/' + enc(card.dataset.run) + '/decisions', body);
    if (r.ok) {
      card.classList.remove('open');
      card.classList.add('decided');
      card.replaceChildren(el('div', { class: 'muted recorded', text: 'Recorded: ' + body.kind + ' — ' + card.dataset.decision.slice(0, 8) }));
      notice('');
      refreshSoon();
      return;
    }
    const why = (r.data && r.data.error) || ('HTTP ' + r.status);
    if (r.status === 409) notice('This call was already decided, or no longer waits (nothing changed): ' + why, 'error');
    else if (r.status === 403) notice('You may not make this decision (nothing changed): ' + why, 'error');
    else notice('The decision was not recorded: ' + why, 'error');
    card.classList.remove('open');
    card.remove();
    refreshSoon();
  }

  // Cards are kept by decision id: a card someone is working on (a form open) is
  // left as it is; others come and go with what waits.
  function syncCards(box, runs) {
    const want = new Map();
    for (const run of runs) for (const p of run.pending || []) want.set(p.decision, [run, p]);
    for (const card of [...box.children]) {
      // (A card with a form open stays until it is sent or closed.)
      if (!want.has(card.dataset.decision) && !card.classList.contains('open')) card.remove();
    }
    // (A card just decided stays as it is until the server no longer lists it.)
    const have = new Set([...box.children].map((c) => c.dataset.decision));
    for (const [id, [run, p]] of want) if (!have.has(id)) box.append(callCard(run, p));
  }

  async function refreshInbox() {
    const r = await api('api/runs?status=suspended');
    if (!r.ok) { notice('The inbox could not be read: ' + ((r.data && r.data.error) || r.status), 'error'); return; }
    const runs = r.data.runs.slice().sort((a, b) => (b.created || 0) - (a.created || 0));
    syncCards($('#inbox'), runs);
    const n = runs.reduce((s, run) => s + (run.pending || []).length, 0);
    $('#count').textContent = String(n);
    $('#empty').hidden = n > 0;
    const all = await api('api/runs?limit=20');
    if (all.ok) {
      const body = $('#runs tbody');
      body.replaceChildren(...all.data.runs.map((run) => el('tr', { 'data-run': run.run },
        el('td', {}, el('a', { href: '#run=' + enc(run.run), text: run.run.slice(0, 12) })),
        el('td', {}, el('span', { class: 'badge ' + run.status, text: run.status })),
        el('td', { text: run.started_by ? run.started_by.name : '' }),
        el('td', { text: run.tenant || '' }),
        el('td', { text: when(run.updated) }))));
    }
  }

  function refreshSoon() {
    clearTimeout(state.reload);
    state.reload = setTimeout(() => (state.run ? loadRun() : refreshInbox()), 150);
  }

  function describe(e) {
    switch (e.event) {
      case 'run_started': return 'run started';
      case 'model_answered': return 'the model answered';
      case 'approval_requested': return 'approval requested: ' + e.server + ' / ' + e.tool;
      case 'approval_decided': return (e.kind || (e.approved ? 'approve' : 'deny')) + ' ' + e.tool + ' by ' + e.by + (e.at ? ' at ' + when(e.at) : '');
      case 'before_tool_call': return 'calling ' + e.server + ' / ' + e.tool;
      case 'after_tool_result': return e.tool + (e.is_error ? ' returned an error' : ' returned');
      case 'denied': return 'denied ' + e.tool + ': ' + e.reason;
      case 'decision_voided': return 'approval voided for ' + e.tool + ': ' + e.reason;
      case 'run_suspended': return 'waiting for a decision';
      case 'run_continued': return 'continued';
      case 'run_failed': return 'failed: ' + (e.error || '');
      case 'run_cancelled': return 'cancelled by ' + e.by;
      case 'run_finished': return 'run finished';
      case 'arguments_invalid': return e.tool + ': arguments do not match its schema, not sent: ' + e.violations;
      case 'schema_unchecked': return e.tool + ': schema not checked: ' + e.reason;
      case 'output_mismatch': return e.tool + ': structured result does not match its schema: ' + e.reason;
      case 'output_invalid': return 'the answer does not match the required output' + (e.repair ? ' (asked again)' : '') + ': ' + e.reason;
      case 'hook': return e.hook + (e.tool ? ' on ' + e.tool : '') + ': ' + e.outcome + (e.reason ? ' (' + e.reason + ')' : '');
      case 'sub_agent': return 'sub-agent ' + e.tool + ' (run ' + e.run + '): ' + e.status;
      case 'compacted': return 'compacted ' + e.messages.length + ' messages into a summary';
      default: return String(e.event).replace(/_/g, ' ');
    }
  }

  const ends = (e) => e.event === 'run_finished' || e.event === 'run_cancelled' || (e.event === 'run_failed' && !e.resumable);

  function appendEvent(d) {
    if (d.seq <= state.lastSeq) return;
    state.lastSeq = d.seq;
    $('#events').append(el('li', { 'data-seq': String(d.seq), class: 'ev ' + d.event.event, text: describe(d.event) }));
  }

  function renderTranscript(messages) {
    const box = $('#transcript');
    box.replaceChildren();
    for (const m of messages || []) {
      if (m.role === 'system') continue;
      const msg = el('div', { class: 'msg ' + m.role }, el('div', { class: 'role', text: m.role }));
      for (const b of m.content || []) {
        if (b.type === 'text') msg.append(el('div', { class: 'text', text: b.text }));
        else if (b.type === 'tool_call') msg.append(el('div', { class: 'text', text: 'calls ' + b.name }), el('pre', { class: 'json' }, renderJson(b.arguments)));
        else if (b.type === 'tool_result') {
          if (b.is_error) msg.classList.add('error');
          msg.append(el('pre', { class: 'json result', text: b.content }));
        } else msg.append(el('div', { class: 'muted', text: '[' + b.type + (b.media_type ? ', ' + b.media_type : '') + (b.bytes ? ', ' + b.bytes + ' bytes' : '') + ']' }));
      }
      box.append(msg);
    }
  }

  async function loadRun() {
    const id = state.run;
    const r = await api('api/runs/' + enc(id));
    if (state.run !== id) return;
    if (!r.ok) { notice('Run ' + id + ': ' + ((r.data && r.data.error) || r.status), 'error'); return; }
    const d = r.data;
    $('#run-id').textContent = d.run;
    const status = $('#run-status');
    status.textContent = d.status;
    status.className = 'badge ' + d.status;
    const owner = [];
    if (d.started_by) owner.push('started by ' + d.started_by.name);
    if (d.tenant) owner.push('tenant ' + d.tenant);
    if (d.created) owner.push('at ' + when(d.created));
    if (d.failure) owner.push('failed: ' + d.failure);
    $('#run-owner').textContent = owner.join(' · ');
    renderTranscript(d.messages);
    syncCards($('#pending'), d.pending.length ? [{ run: d.run, started_by: d.started_by, tenant: d.tenant, pending: d.pending }] : []);
    for (const e of d.events) appendEvent(e);
  }

  function follow() {
    if (state.source) state.source.close();
    const id = state.run;
    const src = new EventSource(base() + 'api/runs/' + enc(id) + '/events?after=' + state.lastSeq);
    state.source = src;
    $('#live').textContent = '● live';
    src.onmessage = (m) => {
      const d = JSON.parse(m.data);
      appendEvent(d);
      refreshSoon();
      if (ends(d.event)) { src.close(); $('#live').textContent = 'ended'; }
    };
    src.addEventListener('failure', (m) => {
      src.close();
      $('#live').textContent = '';
      notice('The run\'s events stopped: ' + JSON.parse(m.data).error, 'error');
    });
    src.onerror = () => { if (src.readyState !== EventSource.CLOSED) $('#live').textContent = 'reconnecting…'; };
    src.onopen = () => { $('#live').textContent = '● live'; };
  }

  async function route() {
    const m = /^#run=(.+)$/.exec(location.hash);
    if (state.source) { state.source.close(); state.source = null; }
    notice('');
    if (m) {
      state.run = decodeURIComponent(m[1]);
      state.lastSeq = 0;
      $('#events').replaceChildren();
      $('#pending').replaceChildren();
      $('#transcript').replaceChildren();
      $('#inbox-view').hidden = true;
      $('#run-view').hidden = false;
      await loadRun();
      follow();
    } else {
      state.run = null;
      $('#run-view').hidden = true;
      $('#inbox-view').hidden = false;
      await refreshInbox();
    }
  }

  async function main() {
    try { await session(); } catch (e) { notice('Not signed in: ' + e.message, 'error'); return; }
    $('#who').textContent = 'signed in as ' + state.who.name;
    const tenant = $('#tenant');
    if (state.tenants.length) {
      tenant.replaceChildren(el('option', { value: '', text: 'no tenant' }), ...state.tenants.map((t) => el('option', { value: t, text: t })));
      tenant.hidden = false;
    }
    $('#new-run').addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const prompt = $('#prompt').value;
      if (!prompt.trim()) { notice('Write what the agent should do first.', 'error'); return; }
      const body = { prompt };
      if (tenant.value) body.tenant = tenant.value;
      const r = await api('api/runs', body);
      if (r.status !== 201) { notice('The run was not started: ' + ((r.data && r.data.error) || r.status), 'error'); return; }
      $('#prompt').value = '';
      location.hash = '#run=' + enc(r.data.run);
    });
    window.addEventListener('hashchange', route);
    // The inbox is read again every two seconds while it is shown.
    state.timer = setInterval(() => { if (!state.run && !document.hidden) refreshInbox(); }, 2000);
    await route();
    document.body.dataset.ready = '1';
  }

  document.addEventListener('DOMContentLoaded', main);
})();
