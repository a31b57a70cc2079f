"""One proxied connection: two pumps, client -> upstream and upstream -> client, that apply the toxics.

Each direction is a reader and a writer joined by a channel of ``(arrival time, bytes)`` chunks,
bounded by a *window* of bytes in flight (``WINDOW_BYTES``, Linux's largest TCP receive window
by default): over an emulated long path the proxy carries as much as a real TCP connection
could, bandwidth-delay product included, and no more. The reader never waits on toxics, so
arrival times are true and delays do not add up from chunk to chunk; the writer handles chunks
one at a time, in order, so bytes are never reordered. Before each step the writer looks at
the toxics *now* (the proxy's list, filtered by this connection's toxicity draws), and every
wait ends early when that list changes, so a toxic added to or removed from a live connection
takes effect at once:

1. a ``timeout`` toxic drops the chunk (and holds back end-of-stream while it stays);
2. ``latency`` toxics hold the chunk until arrival + the sum of their delays (jitter drawn per chunk);
3. the smallest ``bandwidth`` rate splits the chunk into 100 ms slices, each sent when the previous
   one's time is up;
4. a ``slicer`` holds the next piece until its ``delay`` after the previous slice;
5. ``packet_loss`` toxics hold the next piece for the retransmission waits they draw for it (once
   per piece: a wait cut short by a toxic change is not drawn again unless the toxic was updated);
6. the piece is cut to the smallest of: the bandwidth slice, a slice size drawn from each
   ``slicer``, and the remaining budget of each ``limit_data`` toxic, which closes the connection
   when it is spent.

A *piece* is what one send writes: the rest of the chunk, or less when step 6 cuts it. Since
the writer sends pieces in order, a piece held by a loss holds everything behind it, as TCP's
in-order delivery does.

End-of-stream from one side is passed on as a half close (FIN) after ``latency`` and
``slow_close`` delays; the connection closes once both directions have ended. ``timeout``
(when > 0) and ``reset_peer`` toxics run a timer per connection from the moment they meet it.

When a connection ends for any reason both sockets are closed; a reset closes the socket
the reset stream writes to with SO_LINGER 0, so that peer reads ECONNRESET.
"""

from __future__ import annotations

import logging
import math
import random
import socket
import struct
from collections.abc import Sequence
from typing import Protocol

import trio

from chaos._toxic import MAX_RETRANSMISSIONS, MAX_RTO_MS, Toxic

__all__ = ["Link", "ToxicSource"]

_log = logging.getLogger(__name__)

#: Bytes read from a socket at a time: a chunk, the unit of delay.
CHUNK_BYTES = 32 * 1024
#: Bytes in flight per direction between reader and writer before the reader waits (backpressure):
#: the emulated path's window. Linux's default largest TCP receive window (``net.ipv4.tcp_rmem``'s
#: maximum, 6 MiB), so a latency toxic limits a stream as a real long path would: to at most
#: window / delay. (A count of chunks would make it depend on how full each read happened to be.)
WINDOW_BYTES = 6 * 1024 * 1024
#: Seconds of data per bandwidth slice, as toxiproxy does.
_SLICE_SECONDS = 0.1
#: SO_LINGER on, timeout 0: close() then sends RST instead of FIN.
_LINGER_RESET = struct.pack("ii", 1, 0)

_SocketErrors = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


class _Window:
    """Bytes in flight on one direction of a link, at most ``size`` (one chunk always fits)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.used = 0
        self._freed = trio.Event()

    async def take(self, n: int) -> None:
        while self.used and self.used + n > self.size:
            await self._freed.wait()
        self.used += n

    def give(self, n: int) -> None:
        self.used -= n
        self._freed.set()
        self._freed = trio.Event()


class ToxicSource(Protocol):
    """The proxy as a link sees it. Called on the trio thread; must not block."""

    def active_toxics(self) -> Sequence[Toxic]:
        """The proxy's toxics, both streams, in the order they were added."""
        ...

    def toxics_changed(self) -> trio.Event:
        """An event set at the next change of the toxic list (add, update, remove)."""
        ...


class Link:
    """Forwards one accepted client connection to its upstream connection, applying the toxics."""

    def __init__(
        self, source: ToxicSource, client: trio.SocketStream, upstream: trio.SocketStream, rng: random.Random
    ) -> None:
        self._source = source
        self._sockets = {"downstream": client, "upstream": upstream}  # keyed by the stream that writes to it
        self._rng = rng
        self._scope = trio.CancelScope()
        self._reset: set[str] = set()
        self._applies: dict[int, bool] = {}  # toxic serial -> toxicity draw for this connection
        self._passed: dict[int, int] = {}  # limit_data toxic serial -> bytes it let through
        self._paced_until = {"upstream": 0.0, "downstream": 0.0}
        self._sliced_until = {"upstream": 0.0, "downstream": 0.0}

    async def run(self) -> None:
        """Forward until both directions end or :meth:`close` is called, then close both sockets.

        Socket errors end the connection quietly; cancellation closes the sockets and propagates.
        """
        try:
            with self._scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._watch_timers)
                    async with trio.open_nursery() as pumps:
                        pumps.start_soon(self._pump, "upstream")
                        pumps.start_soon(self._pump, "downstream")
                    nursery.cancel_scope.cancel()
        finally:
            self._close_sockets()

    def close(self, *, reset: str | None = None) -> None:
        """End the connection now. ``reset`` ("upstream"/"downstream") sends RST to the peer that stream writes to."""
        if reset is not None:
            self._reset.add(reset)
        self._scope.cancel()

    def _close_sockets(self) -> None:
        for stream, sock_stream in self._sockets.items():
            sock = sock_stream.socket
            if stream in self._reset:
                try:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
                except OSError as exc:  # already dead: the close below is all that is left
                    _log.debug("cannot set SO_LINGER for a reset: %s", exc)
            sock.close()

    # -- toxics as this connection sees them ------------------------------------------------------

    def _active(self, stream: str) -> list[Toxic]:
        return [t for t in self._source.active_toxics() if t.stream == stream and self._drawn(t)]

    def _drawn(self, toxic: Toxic) -> bool:
        """Whether ``toxic`` applies to this connection: drawn once against its toxicity, then fixed."""
        applies = self._applies.get(toxic.serial)
        if applies is None:
            applies = self._applies[toxic.serial] = self._rng.random() < toxic.toxicity
        return applies

    def _forget_removed(self, present: set[int]) -> None:
        for serial in [s for s in self._applies if s not in present]:
            del self._applies[serial]
        for serial in [s for s in self._passed if s not in present]:
            del self._passed[serial]

    def _latency(self, toxics: list[Toxic], jitter: dict[int, float]) -> float:
        """Seconds of delay from the ``latency`` toxics; each toxic's jitter is drawn once into ``jitter``."""
        total = 0.0
        for toxic in toxics:
            if toxic.type != "latency":
                continue
            if toxic.serial not in jitter:
                spread = toxic.attribute("jitter")
                jitter[toxic.serial] = self._rng.uniform(-spread, spread) if spread else 0.0
            total += max(0.0, toxic.attribute("latency") + jitter[toxic.serial]) / 1000
        return total

    def _retransmission_wait(self, toxics: list[Toxic], drawn: dict[int, float]) -> float:
        """Seconds the next piece waits for its lost transmissions; each toxic's draw is made once into ``drawn``.

        Per toxic: each transmission is lost with ``probability`` percent, the n-th loss in a row
        adds ``rto_ms`` * 2^(n-1) (at most MAX_RTO_MS); after MAX_RETRANSMISSIONS losses the wait
        is unbounded (until the toxic changes).
        """
        total = 0.0
        for toxic in toxics:
            if toxic.type != "packet_loss":
                continue
            if toxic.serial not in drawn:
                wait_ms = 0.0
                probability = toxic.attribute("probability") / 100
                for attempt in range(MAX_RETRANSMISSIONS + 1):
                    if self._rng.random() >= probability:
                        break
                    if attempt == MAX_RETRANSMISSIONS:
                        wait_ms = math.inf
                    else:
                        wait_ms += min(toxic.attribute("rto_ms") * 2**attempt, MAX_RTO_MS)
                drawn[toxic.serial] = wait_ms / 1000
            total += drawn[toxic.serial]
        return total

    def _slice_size(self, toxics: list[Toxic]) -> int | None:
        """The size of the next slice: the smallest drawn from the ``slicer`` toxics; None without one."""
        sizes = [
            t.attribute("average_size")
            + self._rng.randint(-t.attribute("size_variation"), t.attribute("size_variation"))
            for t in toxics
            if t.type == "slicer"
        ]
        return min(sizes, default=None)

    @staticmethod
    async def _wait(deadline: float, changed: trio.Event) -> None:
        """Sleep until ``deadline`` or until the toxics change, whichever comes first."""
        with trio.move_on_at(deadline):
            await changed.wait()

    # -- the pumps -------------------------------------------------------------------------------

    async def _pump(self, stream: str) -> None:
        source = self._sockets["upstream" if stream == "downstream" else "downstream"]
        send, receive = trio.open_memory_channel[tuple[float, bytes]](math.inf)
        window = _Window(WINDOW_BYTES)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._read, source, send, window)
            await self._write(receive, stream, window)

    async def _read(
        self, source: trio.SocketStream, send: trio.MemorySendChannel[tuple[float, bytes]], window: _Window
    ) -> None:
        async with send:
            while True:
                try:
                    data = await source.receive_some(CHUNK_BYTES)
                except _SocketErrors as exc:
                    _log.debug("connection closed: read failed: %r", exc)
                    self.close()
                    return
                await window.take(len(data))  # the data enters the path once the window has room
                await send.send((trio.current_time(), data))
                if not data:
                    return

    async def _write(
        self, receive: trio.MemoryReceiveChannel[tuple[float, bytes]], stream: str, window: _Window
    ) -> None:
        async with receive:
            async for arrival, data in receive:
                if not data:
                    await self._deliver_eof(arrival, stream)
                    return
                await self._deliver(arrival, data, stream)
                window.give(len(data))

    async def _deliver(self, arrival: float, data: bytes, stream: str) -> None:
        """Send ``data`` on ``stream`` as the toxics allow (or drop it, or close the connection)."""
        jitter: dict[int, float] = {}
        lost: dict[int, float] = {}  # packet_loss serial -> retransmission wait of the next piece
        piece_ready: float | None = None  # when the next piece was first free to go, for its loss wait
        sent = 0
        while sent < len(data):
            changed = self._source.toxics_changed()
            toxics = self._active(stream)
            if any(t.type == "timeout" for t in toxics):
                return  # dropped, as toxiproxy's timeout toxic does
            now = trio.current_time()
            due = arrival + self._latency(toxics, jitter)
            if now < due:
                await self._wait(due, changed)
                continue
            rate = min(
                (t.attribute("rate") for t in toxics if t.type == "bandwidth" and t.attribute("rate")), default=0
            )
            if rate and now < self._paced_until[stream]:
                await self._wait(self._paced_until[stream], changed)
                continue
            slicers = [t for t in toxics if t.type == "slicer"]
            if slicers and now < self._sliced_until[stream]:
                await self._wait(self._sliced_until[stream], changed)
                continue
            if piece_ready is None:
                piece_ready = now
            resend_at = piece_ready + self._retransmission_wait(toxics, lost)
            if now < resend_at:
                await self._wait(resend_at, changed)
                continue
            end = len(data)
            if rate:
                end = min(end, sent + max(1, int(rate * 1000 * _SLICE_SECONDS)))
            slice_size = self._slice_size(slicers)
            if slice_size is not None:
                end = min(end, sent + slice_size)
            limits = [t for t in toxics if t.type == "limit_data"]
            for toxic in limits:
                end = min(end, sent + max(0, toxic.attribute("bytes") - self._passed.get(toxic.serial, 0)))
            if end > sent and not await self._send(stream, data[sent:end]):
                return
            for toxic in limits:
                self._passed[toxic.serial] = self._passed.get(toxic.serial, 0) + end - sent
            if rate:
                self._paced_until[stream] = max(self._paced_until[stream], now) + (end - sent) / (rate * 1000)
            if slicers:
                delay_us = max(t.attribute("delay") for t in slicers)
                self._sliced_until[stream] = trio.current_time() + delay_us / 1_000_000
            sent = end
            piece_ready = None
            lost.clear()
            if any(self._passed[t.serial] >= t.attribute("bytes") for t in limits):
                _log.debug("connection closed: limit_data reached on %s", stream)
                self.close()
                return

    async def _deliver_eof(self, arrival: float, stream: str) -> None:
        """Pass end-of-stream on as a half close, after the latency and slow_close delays."""
        jitter: dict[int, float] = {}
        while True:
            changed = self._source.toxics_changed()
            toxics = self._active(stream)
            if any(t.type == "timeout" for t in toxics):
                await changed.wait()
                continue
            slow_close = sum(t.attribute("delay") for t in toxics if t.type == "slow_close") / 1000
            due = arrival + self._latency(toxics, jitter) + slow_close
            if trio.current_time() < due:
                await self._wait(due, changed)
                continue
            break
        try:
            await self._sockets[stream].send_eof()
        except _SocketErrors as exc:
            _log.debug("connection closed: half close failed: %r", exc)
            self.close()

    async def _send(self, stream: str, data: bytes) -> bool:
        try:
            await self._sockets[stream].send_all(data)
        except _SocketErrors as exc:
            _log.debug("connection closed: write failed: %r", exc)
            self.close()
            return False
        return True

    # -- timers ----------------------------------------------------------------------------------

    async def _watch_timers(self) -> None:
        """Keep one timer per ``timeout`` (> 0) and ``reset_peer`` toxic that applies to this connection."""
        timers: dict[int, trio.CancelScope] = {}
        async with trio.open_nursery() as nursery:
            while True:
                changed = self._source.toxics_changed()
                toxics = self._source.active_toxics()
                self._forget_removed({t.serial for t in toxics})
                wanted = {
                    t.serial: t
                    for t in toxics
                    if (t.type == "reset_peer" or (t.type == "timeout" and t.attribute("timeout") > 0))
                    and self._drawn(t)
                }
                for serial in [s for s in timers if s not in wanted]:
                    timers.pop(serial).cancel()
                for serial, toxic in wanted.items():
                    if serial not in timers:
                        timers[serial] = await nursery.start(self._timer, toxic)
                await changed.wait()

    async def _timer(self, toxic: Toxic, *, task_status: trio.TaskStatus[trio.CancelScope]) -> None:
        with trio.CancelScope() as scope:
            task_status.started(scope)
            await trio.sleep(toxic.attribute("timeout") / 1000)
            _log.debug("connection closed by %s toxic %r", toxic.type, toxic.name)
            self.close(reset=toxic.stream if toxic.type == "reset_peer" else None)
