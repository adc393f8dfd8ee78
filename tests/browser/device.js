// The browser device (see device.html). Every step is reported as a console line
// `MCPDEV {"step": …}` that tests/browser.rs reads through the driver (drive.cjs).
'use strict';

const params = new URLSearchParams(location.search);
const OTA_URL = params.get('ota');
const DEVICE_ID = params.get('device') || '02:b0:00:00:00:01';
const CLIENT_ID = 'b2d2c0de-0000-4000-8000-000000000001';

function report(step, detail) {
  console.log('MCPDEV ' + JSON.stringify(Object.assign({ step }, detail || {})));
  document.getElementById('status').textContent = step;
}

// What `self.browser.set_color` last received; `self.browser.get_color` reads it back.
let color = null;

const TOOLS = [
  {
    name: 'self.browser.set_color',
    description: 'Set the page background colour',
    inputSchema: {
      type: 'object',
      properties: {
        r: { type: 'integer', minimum: 0, maximum: 255 },
        g: { type: 'integer', minimum: 0, maximum: 255 },
        b: { type: 'integer', minimum: 0, maximum: 255 },
      },
      required: ['r', 'g', 'b'],
    },
  },
  {
    name: 'self.browser.get_color',
    description: 'The colour last set, as JSON',
    inputSchema: { type: 'object', properties: {} },
  },
];

// The smallest valid JPEG: 1x1 grey (SOI … EOI), as the camera tool would upload.
const TINY_JPEG = Uint8Array.from(atob(
  '/9j/4AAQSkZJRgABAQEASABIAAD/2wBDAAMCAgICAgMCAgIDAwMDBAYEBAQEBAgGBgUGCQgKCgkICQkKDA8MCgsOCwkJDRENDg8QEBEQCgwSExIQEw8QEBD/' +
  'yQALCAABAAEBAREA/8wABgAQEAX/2gAIAQEAAD8A0s8g/9k='), c => c.charCodeAt(0));

async function bootstrap() {
  // A preflighted POST: custom headers and application/json are not a "simple" request.
  let answer;
  try {
    const resp = await fetch(OTA_URL, {
      method: 'POST',
      headers: { 'Device-Id': DEVICE_ID, 'Client-Id': CLIENT_ID, 'Content-Type': 'application/json' },
      body: JSON.stringify({
        mac_address: DEVICE_ID,
        uuid: CLIENT_ID,
        application: { name: 'browser-device', version: '1.0.0' },
        board: { type: 'browser', name: navigator.userAgent.slice(0, 60) },
      }),
    });
    answer = await resp.json();
    report('ota', { status: resp.status });
  } catch (e) {
    report('ota-failed', { error: String(e) }); // what the xiaozhi page shows as "OTA连接失败"
    return;
  }
  const ws = answer.websocket || {};
  const url = ws.url + '?device-id=' + encodeURIComponent(DEVICE_ID) + '&client-id=' + encodeURIComponent(CLIENT_ID) +
    '&authorization=' + encodeURIComponent('Bearer ' + (ws.token || ''));
  connect(url);
}

function connect(url) {
  const sock = new WebSocket(url);
  let sessionId = null;
  let vision = null;
  const send = payload => sock.send(JSON.stringify({ session_id: sessionId, type: 'mcp', payload }));
  sock.onopen = () => {
    report('ws-open');
    sock.send(JSON.stringify({ type: 'hello', features: { mcp: true } })); // no version, no transport
  };
  sock.onerror = () => report('ws-error');
  sock.onclose = ev => report('ws-closed', { code: ev.code });
  sock.onmessage = ev => {
    const msg = JSON.parse(ev.data);
    if (msg.type === 'hello') {
      sessionId = msg.session_id || null;
      report('hello');
      return;
    }
    if (msg.type !== 'mcp' || !msg.payload || msg.payload.id === undefined) return;
    const req = msg.payload;
    const reply = result => send({ jsonrpc: '2.0', id: req.id, result });
    switch (req.method) {
      case 'initialize':
        vision = ((req.params || {}).capabilities || {}).vision || null;
        reply({ protocolVersion: '2024-11-05', capabilities: { tools: {} }, serverInfo: { name: 'browser-device', version: '1.0.0' } });
        report('initialize', { vision: Boolean(vision && vision.url) });
        if (vision && vision.url) upload(vision);
        break;
      case 'tools/list':
        reply({ tools: TOOLS });
        report('tools-list');
        break;
      case 'tools/call': {
        const { name, arguments: args } = req.params || {};
        if (name === 'self.browser.set_color') {
          color = args;
          document.body.style.background = `rgb(${args.r},${args.g},${args.b})`;
          report('set-color', { args });
          reply({ content: [{ type: 'text', text: 'true' }], isError: false });
        } else if (name === 'self.browser.get_color') {
          reply({ content: [{ type: 'text', text: JSON.stringify(color) }], isError: false });
        } else {
          send({ jsonrpc: '2.0', id: req.id, error: { code: -32601, message: 'Unknown tool: ' + name } });
        }
        break;
      }
      default:
        send({ jsonrpc: '2.0', id: req.id, error: { code: -32601, message: 'Method not found' } });
    }
  };
}

// What the page's camera tool does: multipart question + file to the vision URL, with the token.
async function upload(vision) {
  const form = new FormData();
  form.append('question', 'what colour is the page?');
  form.append('file', new Blob([TINY_JPEG], { type: 'image/jpeg' }), 'camera.jpg');
  try {
    const resp = await fetch(vision.url, {
      method: 'POST',
      headers: { 'Authorization': 'Bearer ' + vision.token, 'Device-Id': DEVICE_ID, 'Client-Id': CLIENT_ID },
      body: form,
    });
    const body = await resp.json();
    report('vision', { status: resp.status, success: body.success === true });
  } catch (e) {
    report('vision-failed', { error: String(e) }); // the page's "Failed to fetch"
  }
}

bootstrap();
