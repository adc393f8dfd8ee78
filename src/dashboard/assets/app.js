// mcpdev dashboard. Every string that came from a device is written with textContent (through
// el() and txt()), never parsed as HTML; control characters and bidi overrides are shown escaped.
'use strict';
(() => {
  const SVG = 'http://www.w3.org/2000/svg';
  const session = { csrf: null, header: 'x-mcpdev-csrf' };
  let cleanup = [];

  // C0/C1 controls (but tab and newline), DEL, and bidi controls, shown as \u{…} escapes.
  const HIDDEN = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
  const visible = (s) => String(s ?? '').replace(HIDDEN, (c) => '\\u{' + c.charCodeAt(0).toString(16).padStart(2, '0') + '}');
  const txt = (s) => document.createTextNode(visible(s));

  // An element; `props`: class, text, attrs (never on* attributes), and children after it.
  function el(tag, props, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = visible(v);
      else if (k.startsWith('on')) throw new Error('no inline handlers');
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat()) {
      if (c === undefined || c === null || c === false) continue;
      e.append(typeof c === 'string' || typeof c === 'number' ? txt(c) : c);
    }
    return e;
  }
  const json = (v) => JSON.stringify(v, null, 2);
  const pre = (v) => el('pre', { text: typeof v === 'string' ? v : json(v) });
  const status = (msg) => { document.getElementById('status').textContent = visible(msg || ''); };
  // One time format on every page: this machine's time, HH:MM:SS (the date before it on another
  // day), and the UTC time on hover. A value (`.v`) never breaks across lines.
  const pad = (n) => String(n).padStart(2, '0');
  const clock = (t) => `${pad(t.getHours())}:${pad(t.getMinutes())}:${pad(t.getSeconds())}`;
  const when = (ms) => {
    if (!ms) return '';
    const t = new Date(ms);
    const day = t.toDateString() === new Date().toDateString() ? '' : `${t.getFullYear()}-${pad(t.getMonth() + 1)}-${pad(t.getDate())} `;
    return el('time', { class: 'v', datetime: t.toISOString(), title: t.toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC'), text: day + clock(t) });
  };
  const bytes = (n) => n > 1 << 20 ? (n / (1 << 20)).toFixed(1) + ' MiB' : n > 1024 ? (n / 1024).toFixed(1) + ' KiB' : n + ' B';
  const duration = (s) => s < 60 ? `${s} s` : s < 3600 ? `${Math.floor(s / 60)} min ${s % 60} s` : s < 86400 ? `${Math.floor(s / 3600)} h ${Math.floor(s % 3600 / 60)} min` : `${Math.floor(s / 86400)} d ${Math.floor(s % 86400 / 3600)} h`;
  // The hub's words (`device_error`, `not_admitted`) as people read them.
  const words = (k) => String(k).replace(/_/g, ' ');
  // A tool meant for people only (xiaozhi's `annotations.audience: ["user"]`): hidden from MCP
  // hosts unless `serve --mcp-user-tools`, listed by the CLI with `tools list --user-tools`.
  const userOnly = (t) => { const a = t && t.annotations && t.annotations.audience; return Array.isArray(a) && a.includes('user') && !a.includes('assistant'); };
  const userOnlyTag = () => el('span', { class: 'tag', title: 'User-only: the device lists it only when asked for user tools; MCP hosts do not see it unless the hub runs with --mcp-user-tools (the CLI: tools list --user-tools)', text: 'user only' });
  const css = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();

  // A plot over time drawn by uPlot (vendored, assets/vendor/): a time axis, a value axis with
  // its unit, and a legend with the values under the cursor. `update(series)` takes one array
  // per line, one value a second, the last one now. It follows the box's width and the theme.
  function timePlot(label, unit, names) {
    const box = el('div', { class: 'plot', role: 'img', 'aria-label': label });
    let chart = null, last = null;
    const make = () => {
      const fg = css('--muted'), line = css('--line');
      const axis = { stroke: fg, grid: { stroke: line, width: 1 }, ticks: { stroke: line, width: 1 }, font: '11px system-ui, sans-serif' };
      const colors = [css('--accent'), css('--warn'), css('--bad')];
      chart = new uPlot({
        width: Math.max(160, box.clientWidth), height: 150, cursor: { drag: { x: false, y: false } },
        scales: { x: { time: true }, y: { range: (u, lo, hi) => [0, Math.max(1, Math.ceil((hi || 0) * 1.2))] } },
        axes: [axis, { ...axis, label: unit, labelFont: '11px system-ui, sans-serif', size: 48, labelSize: 14 }],
        series: [{ label: 'time', value: '{HH}:{mm}:{ss}' }, ...names.map((n, i) => ({ label: n, stroke: colors[i % colors.length], width: 1.5, value: (u, v) => v == null ? '–' : String(Math.round(v * 100) / 100) }))],
      }, last, box);
    };
    const update = (series) => {
      const n = series[0].length;
      const now = Math.floor(Date.now() / 1000);
      last = [Array.from({ length: n }, (_, i) => now - n + 1 + i), ...series];
      if (!box.isConnected) return;
      if (!chart) make(); else chart.setData(last);
    };
    const redraw = () => { if (chart) { chart.destroy(); chart = null; } if (last && box.isConnected) make(); };
    const resize = new ResizeObserver(() => { if (chart && Math.abs(chart.width - box.clientWidth) > 2) chart.setSize({ width: Math.max(160, box.clientWidth), height: 150 }); });
    resize.observe(box);
    document.addEventListener('mcpdev-theme', redraw);
    cleanup.push(() => { resize.disconnect(); document.removeEventListener('mcpdev-theme', redraw); if (chart) chart.destroy(); });
    return { box, update };
  }

  async function request(method, path, body) {
    const headers = { accept: 'application/json' };
    if (method !== 'GET') {
      headers['content-type'] = 'application/json';
      if (session.csrf) headers[session.header] = session.csrf;
    }
    const r = await fetch(path, { method, headers, credentials: 'same-origin', body: body === undefined ? undefined : JSON.stringify(body) });
    if (r.status === 401) { location.reload(); throw new Error('logged out'); }
    const data = await r.json().catch(() => ({}));
    if (!r.ok) { const e = new Error(data.error || r.statusText); e.status = r.status; e.body = data; throw e; }
    return data;
  }
  const get = (path) => request('GET', path);
  const post = (path, body) => request('POST', path, body);

  // Repeats `fn` every `ms` while the page is shown (one run at a time).
  function every(ms, fn) {
    let stop = false, timer = null;
    const run = async () => {
      try { await fn(); status(''); } catch (e) { if (!stop) status(e.message); }
      if (!stop) timer = setTimeout(run, ms);
    };
    run();
    cleanup.push(() => { stop = true; clearTimeout(timer); });
  }

  // The latest call latencies as a plot: one bar per call (oldest left) on a baseline, the scale
  // written beside it with its unit; no calls yet is said in words, not drawn as a flat line.
  function latencyPlot(values) {
    if (!values.length) return el('span', { class: 'muted', text: 'no calls yet' });
    const svg = document.createElementNS(SVG, 'svg');
    svg.setAttribute('class', 'spark');
    svg.setAttribute('viewBox', '0 0 100 20');
    svg.setAttribute('preserveAspectRatio', 'none');
    svg.setAttribute('role', 'img');
    const max = Math.max(1, ...values);
    const w = 100 / Math.max(values.length, 10);
    const axis = document.createElementNS(SVG, 'line');
    axis.setAttribute('x1', '0'); axis.setAttribute('x2', '100'); axis.setAttribute('y1', '19.5'); axis.setAttribute('y2', '19.5');
    axis.setAttribute('class', 'axis');
    svg.append(axis);
    values.forEach((v, i) => {
      const bar = document.createElementNS(SVG, 'rect');
      const h = Math.max(1, v / max * 18);
      bar.setAttribute('x', (i * w + w * 0.15).toFixed(2));
      bar.setAttribute('width', (w * 0.7).toFixed(2));
      bar.setAttribute('y', (19 - h).toFixed(2));
      bar.setAttribute('height', h.toFixed(2));
      svg.append(bar);
    });
    const label = document.createElementNS(SVG, 'title');
    label.textContent = `latency of the last ${values.length} calls, oldest first: ${values.join(', ')} ms`;
    svg.append(label);
    return el('span', { class: 'latency' }, svg, el('span', { class: 'scale v', text: `0–${max} ms` }));
  }

  // ---- Devices --------------------------------------------------------------------------
  const listState = { q: '', state: '', offset: 0, limit: 50 };

  function devicesPage(main) {
    const search = el('input', { type: 'search', id: 'q', placeholder: 'Search devices', title: 'Matches the Device-Id, alias, transport or state', 'aria-label': 'Search devices by Device-Id, alias, transport or state' });
    search.value = listState.q;
    const state = el('select', { id: 'state-filter', 'aria-label': 'Filter by state' },
      ['', 'ready', 'initializing', 'listing', 'awaiting_hello'].map((s) => el('option', { value: s, text: s ? words(s) : 'every state' })));
    state.value = listState.state;
    const prev = el('button', { type: 'button', text: '← Previous' });
    const next = el('button', { type: 'button', text: 'Next →' });
    const count = el('span', { class: 'muted', id: 'device-count' });
    const body = el('tbody', { id: 'device-rows' });
    const table = el('table', { 'aria-label': 'Connected devices' },
      el('thead', {}, el('tr', {}, ['Device', 'Alias', 'Transport', 'State', 'Tools', 'Connected', 'Address', 'Calls', 'Errors', 'p50', 'p99', 'Recent calls']
        .map((h, i) => el('th', { scope: 'col', class: i >= 7 && i <= 10 ? 'num' : i === 11 ? 'spark-col' : undefined, text: h })))), body);
    main.replaceChildren(el('h1', { text: 'Devices' }), el('div', { class: 'toolbar' }, search, state, prev, next, count), el('div', { class: 'table-wrap' }, table));
    let refresh = () => {};
    search.addEventListener('input', () => { listState.q = search.value; listState.offset = 0; refresh(); });
    state.addEventListener('change', () => { listState.state = state.value; listState.offset = 0; refresh(); });
    prev.addEventListener('click', () => { listState.offset = Math.max(0, listState.offset - listState.limit); refresh(); });
    next.addEventListener('click', () => { listState.offset += listState.limit; refresh(); });
    let seq = 0;
    refresh = async () => {
      const mine = ++seq;
      const p = new URLSearchParams({ offset: listState.offset, limit: listState.limit, q: listState.q, state: listState.state });
      const data = await get('/dashboard/api/devices?' + p);
      if (mine !== seq) return;
      const first = data.matched ? data.offset + 1 : 0;
      count.textContent = `${first}–${data.offset + data.devices.length} of ${data.matched} matching (${data.total} connected)`;
      prev.disabled = data.offset === 0;
      next.disabled = data.offset + data.devices.length >= data.matched;
      // The rows are rebuilt every second: a device link the keyboard was on is focused again
      // in its new row (it was lost with the old one, and Enter then went nowhere).
      const focused = body.contains(document.activeElement) ? document.activeElement.closest('tr')?.dataset.device : undefined;
      const filtered = listState.q || listState.state;
      const none = filtered ? 'No device matches this search or state.'
        : 'No device is connected yet. Devices appear here when they connect to the hub\'s device listener (a board, a stock xiaozhi device, or `mcpdev sim`).';
      body.replaceChildren(...(data.devices.length ? [] : [el('tr', { class: 'empty' }, el('td', { colspan: 12, class: 'muted', text: none }))]), ...data.devices.map((d) => el('tr', { 'data-device': d.id },
        el('td', {}, el('a', { class: 'v', href: '#/device/' + encodeURIComponent(d.id), text: d.id })),
        el('td', { text: d.alias || '' }),
        el('td', { text: d.transport }),
        el('td', { class: 'state-' + d.state, text: words(d.state), title: d.onboarding_error || undefined }),
        el('td', { class: 'num', text: d.tools }),
        el('td', {}, when(d.connected_at_ms)),
        el('td', { class: 'v', text: d.remote || '' }),
        el('td', { class: 'num', text: d.calls.calls }),
        el('td', { class: 'num' + (d.calls.errors ? ' bad' : ''), text: d.calls.errors }),
        el('td', { class: 'num', text: d.calls.p50_ms == null ? '' : '≤' + d.calls.p50_ms + ' ms' }),
        el('td', { class: 'num', text: d.calls.p99_ms == null ? '' : '≤' + d.calls.p99_ms + ' ms' }),
        el('td', { class: 'spark-col' }, latencyPlot(d.calls.recent_ms)))));
      if (focused !== undefined) {
        const row = Array.from(body.children).find((r) => r.dataset.device === focused);
        row?.querySelector('a')?.focus({ preventScroll: true });
      }
      document.body.dataset.rendered = 'devices';
    };
    every(1000, () => refresh());
  }

  // ---- One device -----------------------------------------------------------------------
  const typeOf = (s) => { const t = Array.isArray(s.type) ? s.type.find((x) => x !== 'null') : s.type; return t || (s.enum ? 'enum' : 'any'); };

  // A form for one tool, built from its inputSchema; it sends `k=v` words, typed and validated
  // on the hub by the CLI's own code.
  function toolForm(deviceId, tool) {
    const schema = tool.inputSchema || {};
    const props = schema.properties || {};
    const required = new Set(schema.required || []);
    const fid = 'tool-' + Math.random().toString(36).slice(2);
    const fields = [];
    const form = el('form', { class: 'tool', novalidate: true, 'data-tool': tool.name, 'aria-labelledby': fid + '-name' });
    form.append(el('h3', { id: fid + '-name' }, el('code', { text: tool.name }), userOnly(tool) ? [' ', userOnlyTag()] : null));
    if (tool.description) form.append(el('p', { class: 'muted desc', text: tool.description }));
    for (const [name, prop] of Object.entries(props)) {
      const id = `${fid}-${fields.length}`;
      const type = typeOf(prop);
      const hintParts = [];
      let input;
      if (Array.isArray(prop.enum)) {
        input = el('select', { id, name }, required.has(name) ? null : el('option', { value: '', text: '(not set)' }),
          prop.enum.map((v) => el('option', { value: typeof v === 'string' ? v : JSON.stringify(v), text: typeof v === 'string' ? v : JSON.stringify(v) })));
        hintParts.push('one of: ' + prop.enum.map((v) => typeof v === 'string' ? v : JSON.stringify(v)).join(', '));
      } else if (type === 'boolean') {
        input = el('input', { id, name, type: 'checkbox', role: 'switch', class: 'switch' });
        input.addEventListener('change', () => { input.dataset.touched = '1'; });
      } else if (type === 'integer' || type === 'number') {
        input = el('input', { id, name, type: 'number', inputmode: type === 'integer' ? 'numeric' : 'decimal', step: type === 'integer' ? '1' : 'any',
          min: prop.minimum, max: prop.maximum });
        const lo = prop.minimum ?? prop.exclusiveMinimum, hi = prop.maximum ?? prop.exclusiveMaximum;
        hintParts.push(type + (lo !== undefined || hi !== undefined ? ` ${lo ?? '…'}..${hi ?? '…'}` : ''));
      } else if (type === 'string') {
        input = el('input', { id, name, type: 'text', autocomplete: 'off', spellcheck: 'false' });
        hintParts.push('text' + (prop.maxLength !== undefined ? `, at most ${prop.maxLength} characters` : ''));
      } else {
        input = el('textarea', { id, name, rows: 2, spellcheck: 'false' });
        hintParts.push(type + ' as JSON');
      }
      if (prop.default !== undefined && input.type !== 'checkbox') input.placeholder = String(typeof prop.default === 'string' ? prop.default : JSON.stringify(prop.default));
      if (prop.default === true && input.type === 'checkbox') input.checked = true;
      const err = el('span', { class: 'field-error', id: id + '-error', role: 'alert' });
      input.setAttribute('aria-describedby', id + '-hint ' + id + '-error');
      const label = el('label', { for: id }, el('code', { text: name }), required.has(name) ? ' *' : '');
      const hint = el('span', { class: 'hint', id: id + '-hint' }, prop.description ? visible(prop.description) + ' — ' : '', hintParts.join('; '));
      form.append(el('div', { class: 'field' }, label, input, hint, err));
      fields.push({ name, type, input, err, required: required.has(name), isJson: input.tagName === 'TEXTAREA' });
    }
    if (!fields.length) form.append(el('p', { class: 'muted', text: 'No arguments.' }));
    const formError = el('span', { class: 'form-error', role: 'alert' });
    const submit = el('button', { type: 'submit', class: 'primary', text: 'Call' });
    const result = el('div', { class: 'result', 'aria-live': 'polite' });
    form.append(el('div', {}, submit, ' ', formError), result);

    const words = () => fields.flatMap((f) => {
      if (f.input.type === 'checkbox') return f.required || f.input.dataset.touched ? [`${f.name}=${f.input.checked}`] : [];
      const v = f.input.value;
      if (v === '') return [];
      return [f.isJson ? `${f.name}:=${v}` : `${f.name}=${v}`];
    });
    const clearErrors = () => { fields.forEach((f) => { f.err.textContent = ''; f.input.removeAttribute('aria-invalid'); }); formError.textContent = ''; };
    const showErrors = (errors) => {
      clearErrors();
      for (const e of errors || []) {
        const top = String(e.argument || '').split(/[.[]/)[0];
        const f = fields.find((x) => x.name === top);
        if (f) { f.err.textContent = visible(e.text); f.input.setAttribute('aria-invalid', 'true'); } else { formError.textContent = visible(e.text); }
      }
    };
    const body = () => ({ device: deviceId, tool: tool.name, words: words() });
    form.addEventListener('change', async () => {
      try { await post('/dashboard/api/validate', body()); clearErrors(); } catch (e) { if (e.status === 422) showErrors(e.body.errors); }
    });
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      submit.disabled = true;
      result.replaceChildren(el('span', { class: 'muted', text: 'calling…' }));
      try {
        const r = await post('/dashboard/api/call', body());
        clearErrors();
        result.replaceChildren(renderResult(r.result, r.latency_ms));
      } catch (e) {
        if (e.status === 422) { showErrors(e.body.errors); result.replaceChildren(el('span', { class: 'muted', text: 'Nothing was sent.' })); } else { result.replaceChildren(el('span', { class: 'bad', text: e.message })); }
      } finally { submit.disabled = false; }
    });
    return form;
  }

  // The device's tools as a list with a search, and the form of the one chosen (as the MCP
  // Inspector shows them): a device with many tools keeps the traffic pane in reach.
  function toolsPanel(deviceId, tools, warning) {
    const search = el('input', { type: 'search', id: 'tool-search', placeholder: 'Search tools', 'aria-label': 'Search tools by name or description' });
    const list = el('ul', { class: 'tool-list', id: 'tool-list', 'aria-label': 'Tools' });
    const shown = el('span', { class: 'muted', id: 'tool-count' });
    const formBox = el('div', { class: 'tool-form', id: 'tool-form' });
    let chosen = tools.length ? tools[0].name : null;
    const draw = () => {
      const q = search.value.trim().toLowerCase();
      const hits = tools.filter((t) => !q || t.name.toLowerCase().includes(q) || String(t.description || '').toLowerCase().includes(q));
      shown.textContent = q ? `${hits.length} of ${tools.length}` : '';
      list.replaceChildren(...hits.map((t) => {
        const b = el('button', { type: 'button', class: 'tool-item', 'data-tool': t.name, 'aria-pressed': String(t.name === chosen), title: t.description || undefined },
          el('code', { text: t.name }), userOnly(t) ? userOnlyTag() : null);
        b.addEventListener('click', () => { chosen = t.name; draw(); const f = formBox.querySelector('input, select, textarea, button'); if (f) f.focus(); });
        return el('li', {}, b);
      }));
      if (!hits.length) list.append(el('li', { class: 'muted', text: 'No tool matches.' }));
      const tool = tools.find((t) => t.name === chosen);
      if (formBox.dataset.tool !== chosen) {
        formBox.dataset.tool = chosen || '';
        formBox.replaceChildren(tool ? toolForm(deviceId, tool) : el('p', { class: 'muted', text: 'This device offers no tools.' }));
      }
    };
    search.addEventListener('input', draw);
    draw();
    const users = tools.filter(userOnly).length;
    return el('section', { class: 'panel', 'aria-labelledby': 'tools-h' },
      el('h2', { id: 'tools-h', text: `Tools (${tools.length}${users ? `, ${users} user-only` : ''})` }),
      warning ? el('p', { class: 'bad', text: warning }) : '',
      el('div', { class: 'tools-layout' }, el('div', { class: 'tool-nav' }, el('div', { class: 'toolbar' }, search, shown), list), formBox));
  }

  const IMAGE = /^image\/(png|jpeg|gif|webp)$/;
  function renderResult(result, latency) {
    const out = el('div', { class: 'result-body', 'data-is-error': result && result.isError ? 'true' : 'false' });
    out.append(el('p', { class: result && result.isError ? 'bad' : 'muted', text: (result && result.isError ? 'The tool reported an error' : 'Result') + ` in ${latency.toFixed(1)} ms` }));
    const content = result && Array.isArray(result.content) ? result.content : null;
    if (!content) { out.append(pre(result)); return out; }
    for (const block of content) {
      if (block && block.type === 'text') {
        let parsed = null;
        try { parsed = JSON.parse(block.text); } catch (_) { /* plain text */ }
        out.append(parsed !== null && typeof parsed === 'object' ? pre(parsed) : pre(String(block.text)));
      } else if (block && block.type === 'image' && IMAGE.test(block.mimeType || '') && /^[A-Za-z0-9+/=]*$/.test(block.data || '')) {
        out.append(el('img', { src: `data:${block.mimeType};base64,${block.data}`, alt: 'image result' }));
      } else {
        out.append(pre(block));
      }
    }
    if (result.structuredContent !== undefined) out.append(el('h4', { text: 'structuredContent' }), pre(result.structuredContent));
    return out;
  }

  function trafficPane(deviceId, info) {
    const rows = el('tbody', { id: 'traffic-rows' },
      el('tr', { class: 'empty' }, el('td', { colspan: 5, class: 'muted', text: 'The device\'s MCP frames appear here as they go: a call from the form above, the CLI or an MCP host, and the hub\'s keepalive ping.' })));
    const byId = new Map();
    let recording = null;
    const record = el('button', { type: 'button', id: 'record', text: 'Record' });
    const note = el('span', { class: 'muted' });
    record.addEventListener('click', () => {
      if (!recording) {
        // What the hub knows of the device comes first (identity, hello, initialize, every
        // tools/list page), so the recording replays even though the device onboarded earlier.
        const frames = recording = [];
        get('/dashboard/api/recording?id=' + encodeURIComponent(deviceId)).then((head) => {
          frames.unshift(...(head.lines || []).map((l) => JSON.stringify(l)));
        }).catch(() => {
          frames.unshift(JSON.stringify({ ts: new Date().toISOString(), direction: 'identity', device_id: info.device_id, client_id: info.client_id ?? null,
            protocol_version: info.protocol_version, transport: info.transport, hello: info.hello }));
        });
        record.textContent = 'Stop and download';
        note.textContent = 'recording…';
        return;
      }
      const blob = new Blob([recording.join('\n') + '\n'], { type: 'application/x-ndjson' });
      const a = el('a', { href: URL.createObjectURL(blob), download: `mcpdev-${deviceId.replace(/[^0-9a-z]/gi, '')}-${Date.now()}.ndjson` });
      document.body.append(a); a.click(); a.remove();
      note.textContent = `${recording.length} lines saved (the format of watch --record; replay with mcpdev sim --replay)`;
      recording = null;
      record.textContent = 'Record';
    });
    const pane = el('section', { class: 'panel', 'aria-labelledby': 'traffic-h' },
      el('h2', { id: 'traffic-h', text: 'Traffic' }), el('div', { class: 'toolbar' }, record, note),
      el('table', { class: 'traffic', 'aria-label': 'MCP traffic' }, el('thead', {}, el('tr', {}, ['Time', 'Method', 'Request', 'Response', 'Latency'].map((h) => el('th', { scope: 'col', text: h })))), rows));
    const es = new EventSource('/dashboard/api/traffic?id=' + encodeURIComponent(deviceId));
    es.addEventListener('open', () => { pane.dataset.live = 'true'; });
    es.addEventListener('traffic', (m) => {
      let ev;
      try { ev = JSON.parse(m.data); } catch (_) { return; }
      if (recording) recording.push(JSON.stringify({ ts: new Date().toISOString(), direction: ev.direction, frame: ev.payload }));
      const p = ev.payload || {};
      rows.querySelector('tr.empty')?.remove();
      const key = p.id === undefined ? null : JSON.stringify(p.id);
      if (ev.direction === 'out' && key !== null && p.method) {
        const row = el('tr', { 'data-rpc-id': key }, el('td', {}, when(Date.now())), el('td', {}, el('code', { text: p.method })),
          el('td', {}, pre(p.params ?? null)), el('td', { class: 'muted', text: 'waiting…' }), el('td', { class: 'num' }));
        byId.set(key, row);
        rows.prepend(row);
      } else if (ev.direction === 'in' && key !== null && byId.has(key)) {
        const row = byId.get(key);
        byId.delete(key);
        row.children[3].replaceChildren(pre(p.error !== undefined ? { error: p.error } : p.result));
        row.children[3].className = p.error !== undefined ? 'bad' : '';
        row.children[4].textContent = ev.latency_ms == null ? '' : ev.latency_ms.toFixed(1) + ' ms';
        row.dataset.answered = 'true';
      } else {
        rows.prepend(el('tr', {}, el('td', {}, when(Date.now())), el('td', {}, el('code', { text: p.method || ev.direction })),
          el('td', {}, ev.direction === 'out' ? pre(p) : ''), el('td', {}, ev.direction === 'in' ? pre(p) : ''), el('td', {})));
      }
      while (rows.children.length > 200) rows.lastChild.remove();
      if (byId.size > 500) byId.delete(byId.keys().next().value);
    });
    es.addEventListener('lagged', (m) => rows.prepend(el('tr', {}, el('td', { colspan: 5, class: 'muted', text: `${m.data} events skipped (the page fell behind)` }))));
    cleanup.push(() => es.close());
    return pane;
  }

  function timelineList(events) {
    if (!events.length) return el('p', { class: 'muted', id: 'timeline', text: 'Connections, onboarding retries, warnings and disconnections appear here.' });
    return el('ol', { class: 'timeline', id: 'timeline' }, events.map((e) => {
      const ev = e.event || {};
      const detail = ev.event === 'onboarding_retry' ? `attempt ${ev.attempt} of ${ev.of}: ${ev.error}; again in ${ev.retry_in_ms} ms`
        : ev.event === 'onboarding_failed' ? `gave up after ${ev.attempts} attempts: ${ev.error}`
        : ev.event === 'ready' ? `${ev.tools} tools` : ev.event === 'tools_changed' ? `${ev.tools} tools`
        : ev.event === 'connected' ? `${ev.transport} from ${ev.remote || 'unknown'}` : ev.event === 'disconnected' ? ev.reason
        : ev.event === 'warning' ? ev.message : ev.event === 'malformed' ? ev.reason : '';
      return el('li', {}, when(e.at_ms), ' ',
        el('strong', { class: /fail|retry|warning|malformed/.test(ev.event) ? 'bad' : undefined, text: ev.event || '?' }), ' ', detail || '');
    }));
  }

  // `mcpdev check` through the hub (the checks that change nothing), and its report.
  function checkPane(deviceId) {
    const run = el('button', { type: 'button', id: 'run-check', text: 'Run mcpdev check' });
    const out = el('div', { id: 'check-report', 'aria-live': 'polite' });
    run.addEventListener('click', async () => {
      run.disabled = true;
      out.replaceChildren(el('p', { class: 'muted', text: 'checking… (initialize, tools/list, hygiene, timing)' }));
      try {
        const r = await post('/dashboard/api/check', { device: deviceId });
        const s = r.summary || {};
        out.replaceChildren(el('p', { class: s.failed ? 'bad' : 'state-ready', text: `${s.pass} pass, ${s.warn} warn, ${s.fail} fail, ${s.skip} skip` }),
          el('table', { 'aria-label': 'Check results' }, el('thead', {}, el('tr', {}, ['Check', 'Result', 'Reason', 'Reference'].map((h) => el('th', { scope: 'col', text: h })))),
            el('tbody', {}, (r.results || []).map((c) => el('tr', {}, el('td', {}, el('code', { text: c.id })),
              el('td', { class: c.status === 'fail' ? 'bad' : c.status === 'pass' ? 'state-ready' : 'muted', text: c.status }), el('td', { text: c.reason }), el('td', { class: 'muted', text: c.reference }))))));
      } catch (e) { out.replaceChildren(el('p', { class: 'bad', text: e.message })); } finally { run.disabled = false; }
    });
    return el('section', { class: 'panel', 'aria-labelledby': 'check-h' }, el('h2', { id: 'check-h', text: 'Check' }), run, out);
  }

  // A healthy onboarding is said as such; the attempt count only when there was trouble.
  function onboardingSummary(o) {
    if (!o.failed && !o.last_error && o.attempt <= 1) return 'Onboarded at the first attempt.';
    return `attempt ${o.attempt} of ${o.max_attempts}${o.failed ? ', failed' : ''}${o.last_error ? ': ' + o.last_error : ''}`;
  }

  async function devicePage(main, id) {
    const info = await get('/dashboard/api/device?id=' + encodeURIComponent(id));
    const head = el('p', { id: 'device-head' });
    const setHead = (d) => head.replaceChildren(el('span', { class: 'state-' + d.row.state, text: d.row.state }), ` · ${d.transport} · from `, el('span', { class: 'v', text: d.row.remote || 'unknown' }), ' · connected at ',
      when(d.connected_at_ms), ` · ${d.row.calls.calls} calls, ${d.row.calls.errors} errors`, d.onboarding_error ? el('span', { class: 'bad', text: ' · ' + d.onboarding_error }) : '');
    setHead(info);
    const timeline = el('div', {}, timelineList(info.timeline || []));
    const tools = (info.tools || []).filter((t) => t && typeof t.name === 'string');
    main.replaceChildren(
      el('p', {}, el('a', { href: '#/devices', text: '← Devices' })),
      el('h1', {}, 'Device ', el('code', { class: 'v', text: info.device_id }), info.row.alias ? ` (${visible(info.row.alias)})` : ''),
      head,
      el('div', { class: 'grid' },
        el('section', { class: 'panel', 'aria-labelledby': 'hello-h' }, el('h2', { id: 'hello-h', text: 'Hello' }), pre(info.hello ?? 'no hello yet')),
        el('section', { class: 'panel', 'aria-labelledby': 'init-h' }, el('h2', { id: 'init-h', text: 'initialize' }),
          pre({ protocolVersion: info.mcp_protocol_version, serverInfo: info.server_info, capabilities: info.capabilities })),
        el('section', { class: 'panel', 'aria-labelledby': 'ob-h' }, el('h2', { id: 'ob-h', text: 'Onboarding' }),
          el('p', { text: onboardingSummary(info.onboarding) }),
          timeline)),
      toolsPanel(info.device_id, tools, info.tools_warning),
      trafficPane(info.device_id, info),
      checkPane(info.device_id));
    document.body.dataset.rendered = 'device';
    let first = true;
    every(2000, async () => {
      if (first) { first = false; return; }
      const d = await get('/dashboard/api/device?id=' + encodeURIComponent(id));
      setHead(d);
      timeline.replaceChildren(timelineList(d.timeline || []));
    });
  }

  // ---- Admission ------------------------------------------------------------------------
  // The control API's answers, shown field by field: fields added later show up as they come.
  const SECRET = /token|secret|password|challenge/i;
  const PREFERRED = ['code', 'device_id', 'remote', 'client_id', 'via', 'conflicts', 'conflict', 'bindings', 'since_ms', 'expires_in_ms'];
  const columns = (items) => {
    const keys = new Set();
    items.forEach((it) => Object.keys(it || {}).forEach((k) => { if (!SECRET.test(k)) keys.add(k); }));
    return [...PREFERRED.filter((k) => keys.has(k)), ...[...keys].filter((k) => !PREFERRED.includes(k))];
  };
  // Column names people read; a field added later gets its name with the underscores and the
  // unit suffix taken off.
  const LABELS = { code: 'Code', device_id: 'Device', remote: 'Address', client_id: 'Client-Id', via: 'Asked over', conflicts: 'Conflicts',
    conflict: 'Conflict', bindings: 'Bindings', since_ms: 'Waiting since', expires_in_ms: 'Code expires', approved_at_ms: 'Approved',
    device_key: 'Device key', key_hash: 'Device key', reported: 'Reported', board: 'Board', firmware: 'Firmware' };
  const label = (k) => LABELS[k] || words(k.replace(/_(ms|s)$/, '')).replace(/^./, (c) => c.toUpperCase());
  const VIA = { ota: 'OTA check-in', websocket: 'WebSocket', gateway: 'a gateway' };
  const VALUES = new Set(['code', 'device_id', 'remote', 'client_id', 'key_hash', 'replaced']);
  const cell = (k, v) => {
    if (v === null || v === undefined) return el('td', {});
    if (k === 'expires_in_ms' && typeof v === 'number') return el('td', { class: 'num', text: 'in ' + duration(Math.max(0, Math.round(v / 1000))) });
    if (/_ms$/.test(k) && typeof v === 'number') return el('td', {}, when(v));
    if (k === 'via' && typeof v === 'string') return el('td', { text: VIA[v] || v });
    if (typeof v === 'boolean') return el('td', { text: v ? 'yes' : 'no' });
    if (Array.isArray(v) && v.every((x) => typeof x === 'string')) return el('td', { class: v.length ? 'bad' : '' }, v.length ? el('ul', { class: 'plain' }, v.map((x) => el('li', { text: x }))) : 'none');
    if (typeof v === 'object') return el('td', { class: Array.isArray(v) && v.length || (!Array.isArray(v) && Object.keys(v).length) ? 'bad' : '' }, pre(v));
    // Codes, ids and addresses are values: whole on one line (the table scrolls instead).
    return el('td', { class: VALUES.has(k) ? 'v' : undefined, text: String(v) });
  };
  function tableOf(name, items, action) {
    const cols = columns(items);
    return el('div', { class: 'table-wrap' }, el('table', { 'aria-label': name },
      el('thead', {}, el('tr', {}, cols.map((c) => el('th', { scope: 'col', 'data-field': c, text: label(c) })), el('th', { scope: 'col', text: 'Action' }))),
      el('tbody', {}, items.map((it) => el('tr', { 'data-device': it.device_id, 'data-code': it.code }, cols.map((c) => cell(c, it[c])), el('td', {}, action(it)))))));
  }

  // What an approval did, and what to do next, as `mcpdev devices approve` says it.
  function approvalOutcome(a) {
    const id = String(a.device_id || '');
    const out = el('div', { class: 'panel outcome', 'data-device': id });
    if (a.replaced) out.append(el('p', { class: 'bad', text: `Re-bound ${id}: replaced ${a.replaced}; its old tokens no longer work.` }));
    if (a.token) {
      const url = a.device_url || 'ws://HUB:PORT/xiaozhi/v1/';
      const how = a.via === 'websocket' ? 'it asked over WebSocket' : 'it was approved by its Device-Id';
      const copy = el('button', { type: 'button', text: 'Copy token' });
      copy.addEventListener('click', () => navigator.clipboard && navigator.clipboard.writeText(a.token).then(() => { copy.textContent = 'Copied'; }, () => {}));
      out.append(el('p', { class: 'state-ready', text: `Approved ${id}. ${how[0].toUpperCase() + how.slice(1)}, so it cannot learn its token from an OTA check-in: give it this token (shown once).` }),
        el('p', {}, el('code', { id: 'approved-token', class: 'secret', text: a.token }), ' ', copy),
        el('ul', {},
          el('li', {}, `Any device: connect to ${url} with the header `, el('code', { text: 'Authorization: Bearer <token>' }), '.'),
          el('li', {}, 'Stock firmware: its ', el('code', { text: 'websocket.token' }), ' setting; a browser page: the query parameter ', el('code', { text: 'authorization=<token>' }), '.'),
          el('li', {}, 'A virtual device: ', el('code', { text: `MCPDEV_DEVICE_TOKEN=<token> mcpdev sim --device-id ${id} --url ${url}` }))),
        el('p', { class: 'muted', text: 'A device that checks in at OTA should be approved by the code it shows instead.' }));
    } else {
      const next = a.via === 'gateway' ? 'its gateway\'s next connection for it gets in' : 'its activation poll or next OTA check-in gets its token';
      out.append(el('p', { class: 'state-ready', text: `Approved ${id}: ${next}. Nothing more to do.` }));
    }
    return out;
  }

  function admissionPage(main) {
    const pendingBox = el('div', { id: 'pending' });
    const admittedBox = el('div', { id: 'admitted' });
    const outcome = el('div', { id: 'admission-outcome', role: 'status' });
    main.replaceChildren(el('h1', { text: 'Admission' }), outcome, el('h2', { text: 'Waiting for approval' }), pendingBox, el('h2', { text: 'Admitted' }), admittedBox);
    const act = async (path, body, what) => {
      try {
        const r = await post(path, body);
        if (what === 'Approved') outcome.replaceChildren(approvalOutcome(r));
        else if (what === 'Denied') outcome.replaceChildren(el('p', { class: 'state-ready', text: `Denied code ${body.code}${r.device_id ? ' of ' + r.device_id : ''}: the device may ask again, with a new code.` }));
        else outcome.replaceChildren(el('p', { class: 'state-ready', text: `Revoked ${body.device}: ${r.disconnected ? 'it was cut off; ' : ''}its tokens no longer work, and only a new approval lets it in again.` }));
      } catch (e) { outcome.replaceChildren(el('p', { class: 'bad', text: e.message })); }
      refresh();
    };
    let last = '';
    const refresh = async () => {
      const data = await get('/dashboard/api/admission');
      const key = JSON.stringify(data);
      if (key === last) return;
      last = key;
      const pending = Array.isArray(data.pending) ? data.pending : [];
      pendingBox.replaceChildren(pending.length ? tableOf('Devices waiting for approval', pending, (it) => {
        const b = el('button', { type: 'button', class: 'primary', text: 'Approve ' + (it.code || it.device_id) });
        b.addEventListener('click', () => act('/dashboard/api/admission/approve', { target: String(it.code || it.device_id) }, 'Approved'));
        if (!it.code) return b;
        const d = el('button', { type: 'button', class: 'danger', text: 'Deny ' + it.code });
        d.addEventListener('click', () => act('/dashboard/api/admission/deny', { code: String(it.code) }, 'Denied'));
        return el('span', {}, b, ' ', d);
      }) : el('p', { class: 'muted', text: 'No device is waiting.' }));
      const admitted = data.admitted && Array.isArray(data.admitted.devices) ? data.admitted.devices : [];
      admittedBox.replaceChildren(data.admitted && data.admitted.approve_all ? el('p', { class: 'bad', text: 'Admission is off (--approve-all): every device gets in.' }) : '',
        admitted.length ? tableOf('Admitted devices', admitted, (it) => {
          const b = el('button', { type: 'button', class: 'danger', text: 'Revoke' });
          b.addEventListener('click', () => {
            if (b.dataset.armed) { act('/dashboard/api/admission/revoke', { device: String(it.device_id) }, 'Revoked'); return; }
            b.dataset.armed = '1';
            b.textContent = 'Confirm revoke ' + visible(it.device_id);
          });
          return b;
        }) : el('p', { class: 'muted', text: 'No device is admitted.' }));
      document.body.dataset.rendered = 'admission';
    };
    every(500, refresh);
  }

  // ---- Hub ------------------------------------------------------------------------------
  function hubPage(main) {
    const top = el('div', { class: 'grid' });
    const callsText = el('div', {});
    const onboardText = el('div', {});
    const callsPlot = timePlot('Calls per second over the last 5 minutes', 'calls/s', ['calls/s']);
    const onboardPlot = timePlot('Devices onboarded per second over the last 5 minutes', 'devices/s', ['onboarded/s']);
    const rows = (pairs, bad) => el('table', {}, el('tbody', {}, pairs.map(([k, v]) => el('tr', {}, el('th', { scope: 'row', text: words(k) }), el('td', { class: 'num' + (bad && v ? ' bad' : ''), text: v })))));
    main.replaceChildren(el('h1', { text: 'Hub' }), top, el('div', { class: 'grid wide' },
      el('section', { class: 'panel', 'aria-labelledby': 'calls-h' }, el('h2', { id: 'calls-h', text: 'Calls' }), callsText, callsPlot.box),
      el('section', { class: 'panel', 'aria-labelledby': 'onboard-h' }, el('h2', { id: 'onboard-h', text: 'Onboarding' }), onboardText, onboardPlot.box)));
    every(2000, async () => {
      const h = await get('/dashboard/api/hub');
      const n = h.numbers;
      const sum = (pairs) => pairs.reduce((a, [, v]) => a + v, 0);
      top.replaceChildren(
        el('section', { class: 'panel' }, el('h2', { text: 'Listeners' }), el('div', { class: 'table-wrap' }, el('table', {}, el('tbody', {}, h.listeners.map((l) => el('tr', {}, el('th', { scope: 'row', text: l.name }), el('td', {}, el('code', { class: 'v', text: l.addr })), el('td', { text: l.what })))))),
          el('p', { text: `MQTT ${h.mqtt ? 'on' : 'off'} · ${h.devices} devices · up ${duration(n.uptime_s)} · memory ${bytes(n.resident_bytes)}` })),
        el('section', { class: 'panel' }, el('h2', { text: 'Caps and use' }), el('table', { class: 'caps' }, el('tbody', {}, h.caps.map((c) => el('tr', {}, el('th', { scope: 'row', text: c.name }),
          el('td', { class: 'num', text: c.used == null ? `cap ${c.cap}` : `${c.used} / ${c.cap}` }), el('td', { class: 'use' }, c.used == null ? '' : el('meter', { min: 0, max: c.cap, value: c.used, title: `${c.used} of ${c.cap}` }))))))),
        el('section', { class: 'panel' }, el('h2', { text: 'Refusals' }), rows(n.refusals, true)),
        el('section', { class: 'panel' }, el('h2', { text: 'Clients' }), el('p', { text: `${n.mcp_sessions} MCP sessions · ${n.broker_clients} broker clients` })));
      callsText.replaceChildren(rows(n.calls, false), el('p', { class: 'muted', text: `${sum(n.calls)} calls in all; now ${n.calls_per_s[n.calls_per_s.length - 1] || 0}/s` }));
      onboardText.replaceChildren(el('p', { text: `${n.onboarded} onboarded, ${n.onboarding_retries} retries, ${n.onboarding_failures} failures` }));
      callsPlot.update([n.calls_per_s]);
      onboardPlot.update([n.onboarded_per_s]);
      document.body.dataset.rendered = 'hub';
    });
  }

  // ---- Frame ----------------------------------------------------------------------------
  async function route() {
    cleanup.forEach((f) => f());
    cleanup = [];
    const main = document.getElementById('main');
    const hash = location.hash.replace(/^#\/?/, '');
    const [page, ...rest] = hash.split('/');
    document.querySelectorAll('nav a[data-page]').forEach((a) => {
      if (a.dataset.page === (page === 'device' ? 'devices' : page || 'devices')) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
    });
    delete document.body.dataset.rendered;
    try {
      if (page === 'device' && rest.length) await devicePage(main, decodeURIComponent(rest.join('/')));
      else if (page === 'admission') admissionPage(main);
      else if (page === 'hub') hubPage(main);
      else devicesPage(main);
    } catch (e) {
      main.replaceChildren(el('h1', { text: 'Not available' }), el('p', { class: 'bad', text: e.message }), el('p', {}, el('a', { href: '#/devices', text: 'Back to the devices' })));
    }
  }

  function theme() {
    const button = document.getElementById('theme');
    const apply = (t) => {
      if (t) document.documentElement.dataset.theme = t; else delete document.documentElement.dataset.theme;
      dark = t ? t === 'dark' : matchMedia('(prefers-color-scheme: dark)').matches;
      // The button says what it will do.
      button.textContent = dark ? 'Switch to light theme' : 'Switch to dark theme';
      button.dataset.shows = dark ? 'dark' : 'light';
    };
    let dark = false;
    let saved = null;
    try { saved = localStorage.getItem('mcpdev-theme'); } catch (_) { /* storage off */ }
    apply(saved);
    button.addEventListener('click', () => {
      const next = dark ? 'light' : 'dark';
      try { localStorage.setItem('mcpdev-theme', next); } catch (_) { /* storage off */ }
      apply(next);
      document.dispatchEvent(new Event('mcpdev-theme'));
    });
  }

  async function pendingBadge() {
    const badge = document.getElementById('pending-badge');
    try {
      const data = await get('/dashboard/api/admission');
      const n = Array.isArray(data.pending) ? data.pending.length : 0;
      badge.hidden = n === 0;
      badge.textContent = String(n);
    } catch (_) { /* shown on the page itself */ }
    setTimeout(pendingBadge, 3000);
  }

  document.addEventListener('DOMContentLoaded', async () => {
    theme();
    document.getElementById('logout').addEventListener('click', async () => { await post('/dashboard/api/logout', {}).catch(() => {}); location.reload(); });
    const s = await get('/dashboard/api/session');
    session.csrf = s.csrf;
    session.header = s.csrf_header;
    window.addEventListener('hashchange', route);
    route();
    pendingBadge();
  });
})();
