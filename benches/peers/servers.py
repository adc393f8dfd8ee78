"""The two servers under comparison, started the same way each time, and their virtual devices.

Both are xiaozhi-device WebSocket servers with an MCP endpoint in front; both get their devices
from `mcpdev sim` (the firmware's own MCP core), so the device side is the same for both.
"""

import json
import os
import re
import socket
import subprocess

from mcp_http import McpSession
from procs import Failure, wait_until

START_DEADLINE_S = 30


def mac(n):
    """The Device-Id of virtual device number n (1-based), as `mcpdev sim` counts them from its
    default 02:00:00:00:00:01."""
    return "02:" + ":".join(f"{b:02x}" for b in n.to_bytes(5, "big"))


class Scratch:
    """A working directory, HOME and config home of the bench's own, and an environment without
    the caller's MCPDEV_* settings, so nothing of the user's changes what is measured (and the
    peers' lock files and catalogues land here, not in the user's home)."""

    def __init__(self, root):
        self.root = root
        for sub in ("home", "config", "state"):
            os.makedirs(os.path.join(root, sub), exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MCPDEV_", "STACKCHAN_", "BEARER_", "RUST_LOG"))}
        env.update(HOME=os.path.join(root, "home"), XDG_CONFIG_HOME=os.path.join(root, "config"), NO_COLOR="1",
                   MCPDEV_STATE_DIR=os.path.join(root, "state"), MCPDEV_RUNTIME_DIR=os.path.join(root, "state"))
        self.env = env

    def path(self, name):
        return os.path.join(self.root, name)


def start_sims(children, scratch, mcpdev, url, count, first, tag):
    """`count` virtual devices in one `mcpdev sim` process, numbered from `first`."""
    args = [mcpdev, "sim", "--quiet", "--url", url, "--count", str(count), "--device-id", mac(first)]
    return children.spawn(args, env=scratch.env, cwd=scratch.root, log_path=scratch.path(f"sim-{tag}.log"))


class McpdevHub:
    name = "mcpdev"

    def __init__(self, children, scratch, mcpdev, tag):
        ready = scratch.path(f"hub-{tag}.ready")
        if os.path.exists(ready):
            os.remove(ready)
        # Every virtual device connects from 127.0.0.1: the caps on connections that have not said
        # hello yet (16 per address, 512 in all, against slow-loris floods) are raised, as in
        # benches/hub.rs, or a large fleet would measure the simulator's reconnect backoff.
        args = [mcpdev, "serve", "--json", "--approve-all", "--device-addr", "127.0.0.1:0",
                "--host-addr", "127.0.0.1:0", "--max-pre-hello-per-peer", "4096", "--max-pre-hello", "4096",
                "--ready-file", ready]
        self.mcpdev, self.scratch = mcpdev, scratch
        log = scratch.path(f"hub-{tag}.log")
        self.proc = children.spawn(args, env=scratch.env, cwd=scratch.root, log_path=log)
        # Its event log (`--json`: a line per device event) says when each device is ready.
        self.ready = ReadyLog(log, _hub_ready)
        self.pid = self.proc.pid
        listening = wait_until("mcpdev serve listening", START_DEADLINE_S, lambda: _read_json(ready), self.proc)
        self.device_url, self.host_url, self.mcp_url = listening["devices"], listening["host"], listening["mcp"]
        self._session = McpSession(self.mcp_url)  # as for stackchan-mcp: its MCP endpoint answers

    def tool(self, device_id):
        return f"dev-{device_id.replace(':', '')}.self.audio_speaker.set_volume"

    def call_request(self, device_id, volume):
        return {"name": self.tool(device_id), "arguments": {"volume": volume}}

    def confirm_devices(self):
        """How many devices the hub has onboarded, by its control API (`devices`, phase ready)."""
        env = dict(self.scratch.env, MCPDEV_HUB=self.host_url)
        out = subprocess.run([self.mcpdev, "devices", "--json"], env=env, cwd=self.scratch.root,
                             capture_output=True, text=True, timeout=30)
        if out.returncode != 0:
            raise ValueError(f"mcpdev devices: exit {out.returncode}: {out.stderr.strip()}")
        return sum(1 for d in json.loads(out.stdout) if d.get("phase") == "ready")


class Stackchan:
    """stackchan-mcp's Streamable HTTP daemon (`stackchan-mcp serve --transport streamable-http`):
    an ESP32 WebSocket server (WS_PORT, any path), a capture server (CAPTURE_PORT) and the MCP
    endpoint at MCP_HTTP_PORT/mcp, all set by environment variables. With no STACKCHAN_TOKEN it
    accepts every device. Its `set_volume` tool calls the device's `self.audio_speaker.set_volume`;
    `device_id` picks the device (else the first that connected)."""

    name = "stackchan-mcp"

    def __init__(self, children, scratch, exe, tag):
        ws, capture, mcp = _free_ports(3)
        env = dict(scratch.env, HOST="127.0.0.1", WS_PORT=str(ws), CAPTURE_PORT=str(capture),
                   MCP_HTTP_HOST="127.0.0.1", MCP_HTTP_PORT=str(mcp))
        args = [exe, "--no-mdns", "serve", "--transport", "streamable-http"]
        log = scratch.path(f"stackchan-{tag}.log")
        self.proc = children.spawn(args, env=env, cwd=scratch.root, log_path=log)
        # Its log says `ESP32 ready: device=ID tools=N` once a device is initialized and listed.
        ready = re.compile(r"ESP32 ready: device=(\S+) tools=")
        self.ready = ReadyLog(log, lambda line: (m := ready.search(line)) and m.group(1))
        self.pid = self.proc.pid
        self.device_url = f"ws://127.0.0.1:{ws}/xiaozhi/v1/"
        self.mcp_url = f"http://127.0.0.1:{mcp}/mcp"
        self._session = wait_until("stackchan-mcp's MCP endpoint", START_DEADLINE_S, lambda: McpSession(self.mcp_url), self.proc)

    def tool(self, _device_id):
        return "set_volume"

    def call_request(self, device_id, volume):
        return {"name": "set_volume", "arguments": {"volume": volume, "device_id": device_id}}

    def confirm_devices(self):
        """How many devices are connected and initialized, by its `list_devices` tool."""
        listing = json.loads(self._session.call_text("list_devices", {}))
        return sum(1 for d in listing["devices"] if d.get("initialized"))


class ReadyLog:
    """The Device-Ids a server's log has reported ready so far (read on from where it was, so
    waiting costs the server nothing: polling its API for 1,000 devices would allocate in it)."""

    def __init__(self, path, device_ready):
        # device_ready(line): the Device-Id a log line reports ready, or None
        self.path, self.device_ready, self.offset, self.ids = path, device_ready, 0, set()

    def count(self):
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            chunk = f.read()
        end = chunk.rfind(b"\n") + 1  # whole lines only
        self.offset += end
        for line in chunk[:end].decode(errors="replace").splitlines():
            device = self.device_ready(line)
            if device:
                self.ids.add(device)
        return len(self.ids)


def wait_ready(server, count, deadline_s, sim_proc):
    """Until the server's log has `count` devices ready (in all, since it started)."""
    wait_until(f"{count} devices ready on {server.name}", deadline_s,
               lambda: server.ready.count() >= count, sim_proc, interval=0.1)
    if server.proc.poll() is not None:
        raise Failure(f"{server.name} exited with status {server.proc.returncode}")


def confirm(server, count):
    """Asks the server itself that `count` devices are there (after the measurement it serves)."""
    got = server.confirm_devices()
    if got != count:
        raise Failure(f"{server.name} reports {got} devices ready, not {count}")


def _hub_ready(line):
    """The Device-Id of a `ready` line in the hub's `--json` event log."""
    if line.startswith("{") and '"event":"ready"' in line:
        try:
            return json.loads(line).get("device_id")
        except ValueError:
            return None
    return None


def _read_json(path):
    with open(path) as f:
        text = f.read()
    return json.loads(text) if text.strip() else None


def _free_ports(n):
    """n ports the kernel says are free now (bound to port 0, then released)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()
