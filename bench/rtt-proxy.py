#!/usr/bin/env python3
"""A TCP proxy on 127.0.0.1 that adds a network round trip in front of UPSTREAM.

    python3 bench/rtt-proxy.py --rtt-ms 50 --upstream 127.0.0.1:8080 [--port 0]

Prints the port it listens on (one line, then nothing else on stdout) and serves until
SIGTERM or SIGINT, on which it closes its listener and connections and exits 0.

What it models, per connection, for an RTT of R:

- the handshake: nothing flows for R after the connection is accepted (the client's
  connect() returns at once on loopback, so the handshake's round trip shows up before
  its first byte, as when it sends straight after the SYN-ACK);
- the path: every chunk read from one side is written to the other R/2 after it was read,
  so a request and its response cost R, and each direction keeps its order (one FIFO
  and one writer per direction).

It delays, it does not serialize: a chunk's due time is stamped when it is read, the
reader keeps reading while earlier chunks wait, so the throughput is the loopback's
(bandwidth-delay product held in memory, which for a bench's few megabytes is nothing).
Standard library only (asyncio).
"""

import argparse
import asyncio
import signal
import socket
import sys

CHUNK = 256 * 1024
_EOF = object()


async def pump(reader, writer, delay, loop):
    """Copy reader to writer, each chunk written `delay` seconds after it was read."""
    queue = asyncio.Queue()

    async def read_side():
        try:
            while True:
                data = await reader.read(CHUNK)
                due = loop.time() + delay
                if not data:
                    queue.put_nowait((due, _EOF))
                    return
                queue.put_nowait((due, data))
        except (ConnectionError, OSError):
            queue.put_nowait((loop.time() + delay, _EOF))

    async def write_side():
        while True:
            due, data = await queue.get()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if data is _EOF:
                if writer.can_write_eof():
                    writer.write_eof()
                return
            writer.write(data)
            await writer.drain()

    reading = asyncio.ensure_future(read_side())
    try:
        await write_side()
    finally:
        reading.cancel()


async def serve_one(client_reader, client_writer, upstream, rtt, loop):
    upstream_writer = None
    try:
        # The handshake's round trip, while the upstream connection (loopback: ~free) opens.
        opening = asyncio.ensure_future(asyncio.open_connection(*upstream))
        await asyncio.sleep(rtt)
        upstream_reader, upstream_writer = await opening
        for w in (client_writer, upstream_writer):
            sock = w.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pumps = [
            asyncio.ensure_future(pump(client_reader, upstream_writer, rtt / 2, loop)),
            asyncio.ensure_future(pump(upstream_reader, client_writer, rtt / 2, loop)),
        ]
        try:
            # Both directions to their end; a failure on either ends the connection.
            await asyncio.gather(*pumps)
        finally:
            for task in pumps:
                task.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
    except (ConnectionError, OSError):
        pass
    finally:
        for w in (client_writer, upstream_writer):
            if w is not None:
                w.close()


async def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rtt-ms", type=float, required=True, help="round-trip time to add")
    parser.add_argument("--upstream", required=True, help="HOST:PORT to forward to")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: a free one)")
    args = parser.parse_args()
    host, _, port = args.upstream.rpartition(":")
    upstream = (host or "127.0.0.1", int(port))
    rtt = max(args.rtt_ms, 0.0) / 1000.0
    loop = asyncio.get_running_loop()

    connections = set()

    def accepted(reader, writer):
        task = asyncio.ensure_future(serve_one(reader, writer, upstream, rtt, loop))
        connections.add(task)
        task.add_done_callback(connections.discard)

    server = await asyncio.start_server(accepted, "127.0.0.1", args.port, backlog=1024)
    print(server.sockets[0].getsockname()[1], flush=True)

    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()
    for task in list(connections):
        task.cancel()
    await asyncio.gather(*connections, return_exceptions=True)
    await server.wait_closed()


if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)
