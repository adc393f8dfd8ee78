"""Sorts heaptrack's live bytes (collapsed stacks, `heaptrack_print -F`) by the structure that
allocated them, in bytes a device: the innermost frame that names one decides (benches/heap/run)."""
import collections
import re
import sys

STRUCTURES = [
    ("rustls read buffer (DeframerVecBuffer)", r"DeframerVecBuffer"),
    ("rustls handshake deframer (spans)", r"HandshakeDeframer"),
    ("rustls record keys (both ways)", r"AeadAlgorithm..(en|de)crypter|derive_(en|de)crypter|set_(en|de)crypter"),
    ("rustls queues (ChunkVecBuffer)", r"ChunkVecBuffer"),
    ("rustls connection state", r"rustls::server::tls1[23]|rustls..server..tls1[23]|rustls::common_state|rustls::conn"),
    ("cluster view (other hubs' index)", r"cluster_view|presence..View|presence::View|open_shard"),
    ("cluster claims", r"cluster..Claims|cluster::Claims|cluster..Recent|cluster::Recent"),
    ("this hub's index (published)", r"publish_index|shards_of"),
    ("link task (its future)", r"RawTask.*new|task::core::Cell|raw::RawTask"),
    ("socket after the upgrade (hyper's box: TCP or TLS stream)", r"UpgradeableConnection|hyper::upgrade|hyper..upgrade"),
    ("tokio I/O registration", r"RegistrationSet|PollEvented"),
    ("command mailbox", r"mailbox::channel|links..mailbox"),
    ("registry entry", r"registry::Registry|hub::registry"),
    ("session and its description", r"mcpdev::session|mcpdev..session"),
    ("change log", r"links::changes|links..changes"),
    ("log limiter", r"log_limit"),
    ("dashboard timeline", r"timeline"),
    ("device handle", r"spawn_link|links::handle|links..handle"),
    ("WebSocket link", r"links::websocket|ws_socket|wire::ws_frame"),
    ("metrics", r"mcpdev::metrics"),
    ("MQTT (broker client, device links)", r"mcpdev::mqtt|mcpdev..mqtt|rumqttc"),
]
PATTERNS = [(name, re.compile(p)) for name, p in STRUCTURES]


def main(path, devices):
    bytes_by = collections.Counter()
    for line in open(path):
        stack, _, cost = line.rstrip("\n").rpartition(" ")
        name = "other"
        for frame in reversed(stack.split(";")):
            hit = next((n for n, p in PATTERNS if p.search(frame)), None)
            if hit:
                name = hit
                break
        bytes_by[name] += int(cost)
    for name, b in bytes_by.most_common():
        print(f"{b / devices:8.0f} B a device {b:>11,} B  {name}")
    print(f"{sum(bytes_by.values()) / devices:8.0f} B a device  live in all")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
