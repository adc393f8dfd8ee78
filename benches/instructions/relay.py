"""One control API client for `benches/instructions/run --relay`: connects to the hub's
/api/v1/link with the hub's token (from MCPDEV_RUNTIME_DIR), then makes N sequential `rpc`
requests of the virtual device's set_volume, as `mcpdev call` does through a hub; prints how many
succeeded. A bare WebSocket client (RFC 6455, masked text frames), so nothing but the standard
library is needed."""
import base64, json, os, socket, struct, sys

host_url, n = sys.argv[1], int(sys.argv[2])
addr = host_url.split('//')[1].strip('/')
hostname, port = addr.rsplit(':', 1)
token = open(os.path.join(os.environ["MCPDEV_RUNTIME_DIR"], f"control-{port}.token")).read().strip()
s = socket.create_connection((hostname, int(port)), timeout=60)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
key = base64.b64encode(os.urandom(16)).decode()
s.sendall((f"GET /api/v1/link HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer {token}\r\n\r\n").encode())
buf = b""
while b"\r\n\r\n" not in buf:
    buf += s.recv(4096)
head, buf = buf.split(b"\r\n\r\n", 1)
assert head.startswith(b"HTTP/1.1 101"), head


def send(text):
    data = text.encode()
    mask = os.urandom(4)
    header = bytes([0x81]) + (bytes([0x80 | len(data)]) if len(data) < 126 else bytes([0x80 | 126]) + struct.pack("!H", len(data)))
    s.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))


def recv():
    global buf
    while True:
        if len(buf) >= 2:
            length, at = buf[1] & 0x7F, 2
            if length == 126 and len(buf) >= 4:
                length, at = struct.unpack("!H", buf[2:4])[0], 4
            elif length == 127 and len(buf) >= 10:
                length, at = struct.unpack("!Q", buf[2:10])[0], 10
            if length < 126 or at > 2:
                if len(buf) >= at + length:
                    opcode, payload, buf = buf[0] & 0x0F, buf[at:at + length], buf[at + length:]
                    if opcode == 1:
                        return json.loads(payload)
                    continue
        chunk = s.recv(65536)
        if not chunk:
            raise SystemExit("the hub closed the connection")
        buf += chunk


ok = 0
for i in range(n):
    send(json.dumps({"id": i + 1, "op": "rpc", "device": "02:00:00:00:00:01", "method": "tools/call",
                     "params": {"name": "self.audio_speaker.set_volume", "arguments": {"volume": 50}}, "timeout_ms": 10000}))
    answer = recv()
    ok += answer.get("id") == i + 1 and answer.get("ok", {}).get("isError") is False
print(ok)
