#!/usr/bin/env python3
"""xiaozhi-sdk devices for mcpdev's interop tests (tests/interop_xiaozhi_sdk.rs).

Runs one xiaozhi-sdk device per --mac against --url, using the library as a device author would
(no audio hardware, no OTA round-trip: the WebSocket URL is given). Each device offers:

  set_volume, set_theme, get_device_status  copies of the SDK's own example tools (xiaozhi_sdk.utils.mcp_tool)
                                            with handlers that keep per-device state
  spin_motor        fails: the handler returns is_error=True, so the SDK answers isError:true
  read_clock        returns a datetime, which the SDK cannot json.dumps: it logs the error and
                    never answers (a genuine no-reply)
  wait_for_button   does not answer until a line `release` arrives on stdin (a late reply); the SDK
                    handles one frame at a time, so the device answers nothing else meanwhile

Prints `ready` on stdout once every device has connected, then runs until killed. Exits 1 if a
device fails to connect or its connection closes.
"""

import argparse
import asyncio
import copy
import datetime
import logging
import sys

from xiaozhi_sdk import XiaoZhiWebsocket
from xiaozhi_sdk.utils import mcp_tool as sdk_tools


def tool(template, handler, is_async=False):
    """A tool declared the SDK's way: a dict with name/description/inputSchema plus `tool_func`."""
    t = copy.deepcopy(template)
    t["tool_func"] = handler
    if is_async:
        t["is_async"] = True
    return t


def device_tools(mac, button):
    """The tools of one device. Handlers return (result, is_error); the SDK sends json.dumps(result)."""
    state = {"volume": 50, "theme": "light"}

    def set_volume(args):
        state["volume"] = args["volume"]
        return {"volume": state["volume"]}, False

    def set_theme(args):
        state["theme"] = args["theme"]
        return {"theme": state["theme"]}, False

    def get_device_status(args):
        return {"device": mac, "audio_speaker": {"volume": state["volume"]}, "screen": {"theme": state["theme"]}}, False

    def spin_motor(args):
        return "motor stalled at {} rpm".format(args["rpm"]), True

    def read_clock(args):
        return {"now": datetime.datetime.now()}, False

    async def wait_for_button(args):
        await button.wait()
        button.clear()
        return {"pressed": True}, False

    return [
        tool(sdk_tools.set_volume, set_volume),
        tool(sdk_tools.set_theme, set_theme),
        tool(sdk_tools.get_device_status, get_device_status),
        tool(
            {
                "name": "spin_motor",
                "description": "Spin the motor (always stalls).",
                "inputSchema": {"type": "object", "properties": {"rpm": {"type": "integer"}}, "required": ["rpm"]},
            },
            spin_motor,
        ),
        tool(
            {"name": "read_clock", "description": "The device's clock.", "inputSchema": {"type": "object", "properties": {}}},
            read_clock,
        ),
        tool(
            {
                "name": "wait_for_button",
                "description": "Wait until the button is pressed.",
                "inputSchema": {"type": "object", "properties": {}},
            },
            wait_for_button,
            is_async=True,
        ),
    ]


async def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the hub's device WebSocket, ws://HOST:PORT/xiaozhi/v1/")
    parser.add_argument("--mac", action="append", required=True, help="a device's MAC (Device-Id); repeatable")
    args = parser.parse_args()

    closed = asyncio.get_running_loop().create_future()
    button = asyncio.Event()

    def on_message_for(mac):
        async def on_message(message):
            if message.get("type") == "websocket" and message.get("state") == "close":
                if not closed.done():
                    closed.set_result(mac)
            else:
                logging.debug("%s: %s", mac, message)

        return on_message

    devices = []
    for mac in args.mac:
        dev = XiaoZhiWebsocket(on_message_for(mac), url=args.url)
        await dev.set_mcp_tool(device_tools(mac, button))
        if not await dev.init_connection(mac):
            sys.exit("xiaozhi-sdk device {} could not connect to {}".format(mac, args.url))
        devices.append(dev)
    print("ready", flush=True)

    async def read_stdin():
        reader = asyncio.StreamReader()
        await asyncio.get_running_loop().connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        while line := await reader.readline():
            if line.strip() == b"release":
                button.set()

    stdin_task = asyncio.create_task(read_stdin())
    mac = await closed
    stdin_task.cancel()
    sys.exit("xiaozhi-sdk device {}: the connection closed".format(mac))


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="xiaozhi-sdk device: %(name)s %(levelname)s %(message)s")
    asyncio.run(main())
